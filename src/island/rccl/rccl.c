/* The RCCL island: an AMD island over RCCL (which keeps NCCL's API), whose
 * collectives are island/vendor's; this translation unit only loads RCCL and
 * names it. It is RCCL's alone: dlopen with RTLD_LOCAL, because RCCL exports
 * NCCL's symbol names, which must never resolve against libnccl in a process
 * that has both. Its GPU is device/hip's. */
#include "base/param.h"
#include "base/result.h"
#include "device/hip/hip.h"
#include "island/island.h"
#include "island/vendor/vendor.h"

static gbVendorLoaded_t loaded = GB_VENDOR_LOADED_INIT;

static void load(void) {
  const gbVendorLibrary_t lib = {
      .label = "RCCL",
      .env = "GPUBRIDGE_RCCL_LIBRARY",
      .named = gbParamIsSet(GB_PARAM_RCCL_LIBRARY) ? gbParamString(GB_PARAM_RCCL_LIBRARY) : "",
      .defaultName = "librccl.so.1",
      .installHint = "RCCL (ROCm 6 or newer)",
      .updateHint = "update ROCm",
      .emulatedMarker = "gbEmulatedRccl", /* the test rig (tests/gpu/emulated_amd) */
      .emulatedLabel = "emulated RCCL"};
  loaded.result = gbIslandVendorLoad(&lib, &loaded.api, loaded.error, sizeof(loaded.error));
}

/* The loader of island/vendor's gbVendorDesc_t: once per process; later
 * calls return the same table or the same failure (recorded again). */
static gbResult_t loadOnce(const gbVendorApi_t** out) { return gbIslandVendorLoadOnce(&loaded, load, out); }

static const gbVendorDesc_t rccl = {.opsName = "rccl",
                                    .label = "RCCL",
                                    .callTag = "RCCL",
                                    .kind = "AMD",
                                    .runtime = GB_DEVICE_RUNTIME_HIP,
                                    .libraryEnv = "GPUBRIDGE_RCCL_LIBRARY",
                                    .makeCurrent = gbDeviceHipMakeCurrent,
                                    .load = loadOnce};

gbResult_t gbIslandRcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* ctx,
                              gbIsland_t** out) {
  return gbIslandVendorCreate(&rccl, group, dev, onError, ctx, out);
}
