/* Exported: which device this process uses, the interface it would listen
 * on, and the staging memory a rank would hold (gpubridge-info's summary and
 * preflight). */
#include "base/param.h"
#include "base/result.h"
#include "core/comm.h"
#include "device/device.h"
#include "os/socket.h"

gbResult_t gbGetDeviceInfo(gbDeviceInfo_t* info) {
  if (!info) return gbErrorSet(gbInvalidArgument, "gbGetDeviceInfo: info is NULL");
  const gbDeviceOps* ops = NULL;
  GB_CHECK(gbDeviceGet(&ops));
  info->backend = ops->name;
  info->vendor = ops->vendor ? ops->vendor : "";
  info->runKind = ops->runKind;
  return gbSuccess;
}

gbResult_t gbGetNetInterface(char* name, size_t nameLen, char* address, size_t addressLen) {
  if (!name || !address || nameLen == 0 || addressLen == 0)
    return gbErrorSet(gbInvalidArgument, "gbGetNetInterface: name and address need buffers");
  gbSockAddr_t a;
  GB_CHECK(gbSockFindInterface(gbParamString(GB_PARAM_SOCKET_IFNAME), &a, name, nameLen));
  gbSockAddrHost(&a, address, addressLen);
  return gbSuccess;
}

gbResult_t gbGetMemoryEstimate(int ranks, int gpu, gbCommMemory_t* memory) {
  if (!memory) return gbErrorSet(gbInvalidArgument, "gbGetMemoryEstimate: memory is NULL");
  return gbCommMemoryEstimate(ranks, gpu != 0, memory);
}
