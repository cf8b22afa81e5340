/* How flags are signalled on a CUDA stream (the paths are device/gpu/flag.c):
 *  - write: cuStreamWriteValue64 (fenced: the stream's earlier copies land
 *    before the value, so the proxy that sees the value sees the data);
 *  - wait: cuStreamWaitValue64 with GEQ;
 * 32-bit ones where the device has only those, host functions
 * (cudaLaunchHostFunc) where it has neither. */
#include <stdint.h>

#include "base/param.h"
#include "base/result.h"
#include "device/cuda/api.h"
#include "os/dl.h"

/* The table chooseFlagMode bound the memory ops into (read-only after open). */
static const gbCudaApi_t* memOps;

static int writeValue(gbGpuStream_t stream, void* addr, uint64_t value, int bits) {
  gbCuDevicePtr_t a = (gbCuDevicePtr_t)(uintptr_t)addr;
  return bits == 64 ? memOps->cuStreamWriteValue64(stream, a, value, GB_CU_STREAM_WRITE_VALUE_DEFAULT)
                    : memOps->cuStreamWriteValue32(stream, a, (uint32_t)value, GB_CU_STREAM_WRITE_VALUE_DEFAULT);
}

static int waitValue(gbGpuStream_t stream, void* addr, uint64_t value, int bits) {
  gbCuDevicePtr_t a = (gbCuDevicePtr_t)(uintptr_t)addr;
  return bits == 64 ? memOps->cuStreamWaitValue64(stream, a, value, GB_CU_STREAM_WAIT_VALUE_GEQ)
                    : memOps->cuStreamWaitValue32(stream, a, (uint32_t)value, GB_CU_STREAM_WAIT_VALUE_GEQ);
}

/* Stream memory ops: the v2 entry points (CUDA 11.7+) work on every platform;
 * older drivers have only v1, which may be disabled (NVreg_EnableStreamMemOPs).
 * Without either, flags go through host functions. */
static gbResult_t chooseFlagMode(gbCudaApi_t* api, gbCuDevice_t dev) {
  void* drv = api->drvHandle;
  int v2 = gbOsSymbolBind(drv, "cuStreamWriteValue32_v2", &api->cuStreamWriteValue32) &&
           gbOsSymbolBind(drv, "cuStreamWaitValue32_v2", &api->cuStreamWaitValue32);
  int v1 = 0;
  if (!v2)
    v1 = gbOsSymbolBind(drv, "cuStreamWriteValue32", &api->cuStreamWriteValue32) &&
         gbOsSymbolBind(drv, "cuStreamWaitValue32", &api->cuStreamWaitValue32);
  int has64 = 0;
  if (v2) {
    has64 = gbOsSymbolBind(drv, "cuStreamWriteValue64_v2", &api->cuStreamWriteValue64) &&
            gbOsSymbolBind(drv, "cuStreamWaitValue64_v2", &api->cuStreamWaitValue64);
  } else if (v1) {
    has64 = gbOsSymbolBind(drv, "cuStreamWriteValue64", &api->cuStreamWriteValue64) &&
            gbOsSymbolBind(drv, "cuStreamWaitValue64", &api->cuStreamWaitValue64);
  }
  api->rt.flagMode = GB_GPU_FLAGS_HOSTFN;
  if (!v1 && !v2) return gbSuccess;
  int ok = 1;
  gbCuResult_t r;
  if (v1) {
    r = api->cuDeviceGetAttribute(&ok, GB_CU_ATTR_CAN_USE_STREAM_MEM_OPS_V1, dev);
    if (r != GB_CU_SUCCESS) return gbDeviceCudaDriverFail(r, "cuDeviceGetAttribute(CAN_USE_STREAM_MEM_OPS)");
    if (!ok) return gbSuccess;
  }
  api->rt.flagMode = GB_GPU_FLAGS_MEMOPS32;
  if (!has64) return gbSuccess;
  int ok64 = 0;
  r = api->cuDeviceGetAttribute(&ok64, v2 ? GB_CU_ATTR_CAN_USE_64_BIT_STREAM_MEM_OPS
                                          : GB_CU_ATTR_CAN_USE_64_BIT_STREAM_MEM_OPS_V1, dev);
  if (r != GB_CU_SUCCESS) return gbDeviceCudaDriverFail(r, "cuDeviceGetAttribute(CAN_USE_64_BIT_STREAM_MEM_OPS)");
  if (ok64) api->rt.flagMode = GB_GPU_FLAGS_MEMOPS64;
  return gbSuccess;
}

gbResult_t gbDeviceCudaFlagModeChoose(gbCudaApi_t* api, gbCuDevice_t dev) {
  GB_CHECK(chooseFlagMode(api, dev));
  /* GPUBRIDGE_STREAM_FLAGS may ask for a weaker mode than the GPU offers, so
   * the fallbacks can be tested on GPUs that have every mode. */
  int64_t want = gbParamInt(GB_PARAM_STREAM_FLAGS); /* 0 auto, 1 64-bit, 2 32-bit, 3 host functions */
  if (want == 3) api->rt.flagMode = GB_GPU_FLAGS_HOSTFN;
  if (want == 2 && api->rt.flagMode == GB_GPU_FLAGS_MEMOPS64) api->rt.flagMode = GB_GPU_FLAGS_MEMOPS32;
  memOps = api;
  api->rt.writeValue = writeValue;
  api->rt.waitValue = waitValue;
  return gbSuccess;
}
