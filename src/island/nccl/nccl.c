/* The NCCL island: an NVIDIA island over NCCL, whose collectives are
 * island/vendor's; this translation unit only loads NCCL and names it. It is
 * NCCL's alone: dlopen with RTLD_LOCAL, so its symbols never clash with
 * RCCL's, which has the same names and is loaded by island/rccl in its own
 * translation unit. Its GPU is device/cuda's. */
#include "base/param.h"
#include "base/result.h"
#include "device/cuda/cuda.h"
#include "island/island.h"
#include "island/vendor/vendor.h"

static gbVendorLoaded_t loaded = GB_VENDOR_LOADED_INIT;

static void load(void) {
  const gbVendorLibrary_t lib = {
      .label = "NCCL",
      .env = "GPUBRIDGE_NCCL_LIBRARY",
      .named = gbParamIsSet(GB_PARAM_NCCL_LIBRARY) ? gbParamString(GB_PARAM_NCCL_LIBRARY) : "",
      .defaultName = "libnccl.so.2",
      .installHint = "NCCL 2.10 or newer",
      .updateHint = "update NCCL"};
  loaded.result = gbIslandVendorLoad(&lib, &loaded.api, loaded.error, sizeof(loaded.error));
}

/* The loader of island/vendor's gbVendorDesc_t: once per process; later
 * calls return the same table or the same failure (recorded again). */
static gbResult_t loadOnce(const gbVendorApi_t** out) { return gbIslandVendorLoadOnce(&loaded, load, out); }

static const gbVendorDesc_t nccl = {.opsName = "nccl",
                                    .label = "NCCL",
                                    .callTag = "",
                                    .kind = "NVIDIA",
                                    .runtime = GB_DEVICE_RUNTIME_CUDA,
                                    .libraryEnv = "GPUBRIDGE_NCCL_LIBRARY",
                                    .makeCurrent = gbDeviceCudaMakeCurrent,
                                    .load = loadOnce};

gbResult_t gbIslandNcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* ctx,
                              gbIsland_t** out) {
  return gbIslandVendorCreate(&nccl, group, dev, onError, ctx, out);
}
