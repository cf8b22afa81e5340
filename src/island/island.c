/* Which island a device gets: a table by the device's runtime. */
#include "island/island.h"

typedef gbResult_t (*createFn_t)(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError,
                                 void* errCtx, gbIsland_t** out);

/* Real GPUs: the vendor library of their runtime. */
static const createFn_t onReal[GB_DEVICE_NUM_RUNTIMES] = {
    [GB_DEVICE_RUNTIME_HOST] = gbIslandHostCreate,
    [GB_DEVICE_RUNTIME_CUDA] = gbIslandNcclCreate,
    [GB_DEVICE_RUNTIME_HIP] = gbIslandRcclCreate,
};

gbResult_t gbIslandCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* errCtx,
                          gbIsland_t** out) {
  int r = dev->runtime;
  createFn_t create = dev->runKind == gbRunReal && r >= 0 && r < GB_DEVICE_NUM_RUNTIMES ? onReal[r] : gbIslandHostCreate;
  return create(group, dev, onError, errCtx, out);
}
