/* Exported: which device this process uses (gpubridge-info's summary). */
#include "base/result.h"
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
