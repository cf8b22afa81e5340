/* Exported: which device this process uses, and the staging memory a rank
 * would hold (gpubridge-info's summary). */
#include "base/result.h"
#include "core/comm.h"
#include "device/device.h"

gbResult_t gbGetDeviceInfo(gbDeviceInfo_t* info) {
  if (!info) return gbErrorSet(gbInvalidArgument, "gbGetDeviceInfo: info is NULL");
  const gbDeviceOps* ops = NULL;
  GB_CHECK(gbDeviceGet(&ops));
  info->backend = ops->name;
  info->vendor = ops->vendor ? ops->vendor : "";
  info->runKind = ops->runKind;
  return gbSuccess;
}

gbResult_t gbGetMemoryEstimate(int ranks, int gpu, gbCommMemory_t* memory) {
  if (!memory) return gbErrorSet(gbInvalidArgument, "gbGetMemoryEstimate: memory is NULL");
  return gbCommMemoryEstimate(ranks, gpu != 0, memory);
}
