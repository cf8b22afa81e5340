/* Flags on a CUDA stream. gbFlag_t lives in mapped pinned host memory
 * (hostAlloc); the stream writes its value and waits on it with the driver's
 * stream memory ops, so neither the caller nor a host thread blocks:
 *  - write: cuStreamWriteValue64 (fenced: the stream's earlier copies land
 *    before the value, so the proxy that sees the value sees the data);
 *  - wait: cuStreamWaitValue64 with GEQ.
 * Where the device has 32-bit memory ops only, the low word is used (x86-64
 * and Arm are little-endian); values past 2^32 are then refused.
 * Without stream memory ops, both go through cudaLaunchHostFunc: a host
 * function stores the value, or waits with gbFlagWaitHost (up to
 * GPUBRIDGE_TIMEOUT + 5 s). That fallback blocks CUDA's host-function thread
 * while it waits, and a failed wait can only be logged: CUDA gives host
 * functions no way to fail the stream.
 * flag->error is not seen by the GPU: whoever sets an error also releases the
 * value (gbFlagSetHost), so the stream goes on and the error reaches the user
 * through the communicator. */
#include <stdint.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/result.h"
#include "device/cuda/api.h"
#include "device/cuda/cuda.h"

/* The device address of flag->value. */
static gbResult_t valueAddress(const gbCudaApi_t* api, gbFlag_t* flag, gbCuDevicePtr_t* out) {
  void* dptr = NULL;
  gbCudaError_t e = api->cudaHostGetDevicePointer(&dptr, (void*)&flag->value, 0);
  if (e != GB_CUDA_SUCCESS)
    return gbDeviceCudaFail(e, "cudaHostGetDevicePointer(%p) for a flag (flags must live in memory from the "
                            "device's hostAlloc)", (void*)flag);
  *out = (gbCuDevicePtr_t)(uintptr_t)dptr;
  return gbSuccess;
}

static gbResult_t check32(uint64_t value, const char* what) {
  if (value > UINT32_MAX)
    return gbErrorSet(gbInternalError,
                      "flag %s of value %llu: this GPU has only 32-bit stream memory ops, so flag values "
                      "stop at 2^32; create a new communicator",
                      what, (unsigned long long)value);
  return gbSuccess;
}

/* ------------------------------------------------- host-function fallback */

typedef struct {
  gbFlag_t* flag;
  uint64_t value;
  double waitSec;
} hostFlag_t;

static void hostWrite(void* p) {
  hostFlag_t* h = p;
  gbFlagSetHost(h->flag, h->value, 0);
  free(h);
}

static void hostWait(void* p) {
  hostFlag_t* h = p;
  /* The result is logged where it is detected; nothing can fail the stream. */
  (void)gbFlagWaitHost(h->flag, h->value, h->waitSec, NULL);
  free(h);
}

static gbResult_t launchHost(const gbCudaApi_t* api, gbCudaHostFn_t fn, gbFlag_t* flag, uint64_t value,
                             void* stream, const char* what) {
  hostFlag_t* h = malloc(sizeof(*h));
  if (h == NULL) return gbErrorSet(gbSystemError, "flag %s: out of memory", what);
  *h = (hostFlag_t){flag, value, api->flagWaitSec};
  gbCudaError_t e = api->cudaLaunchHostFunc(stream, fn, h);
  if (e != GB_CUDA_SUCCESS) {
    free(h);
    return gbDeviceCudaFail(e, "cudaLaunchHostFunc (flag %s to %llu) on stream %p", what,
                            (unsigned long long)value, stream);
  }
  return gbSuccess;
}

/* ------------------------------------------------------------------ ops */

gbResult_t gbDeviceCudaFlagWrite(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "flag write: the flag is NULL");
  GB_CHECK(gbDeviceCudaMakeCurrent());
  const gbCudaApi_t* api = gbDeviceCudaApi();
  if (api->flagMode == GB_CUDA_FLAGS_HOSTFN) return launchHost(api, hostWrite, flag, value, stream, "write");
  gbCuDevicePtr_t addr = 0;
  GB_CHECK(valueAddress(api, flag, &addr));
  gbCuResult_t r;
  if (api->flagMode == GB_CUDA_FLAGS_MEMOPS64) {
    r = api->cuStreamWriteValue64(stream, addr, value, GB_CU_STREAM_WRITE_VALUE_DEFAULT);
  } else {
    GB_CHECK(check32(value, "write"));
    r = api->cuStreamWriteValue32(stream, addr, (uint32_t)value, GB_CU_STREAM_WRITE_VALUE_DEFAULT);
  }
  if (r != GB_CU_SUCCESS)
    return gbDeviceCudaDriverFail(r, "cuStreamWriteValue%d (flag to %llu) on stream %p", (int)api->flagMode,
                                  (unsigned long long)value, stream);
  return gbSuccess;
}

gbResult_t gbDeviceCudaFlagWait(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "flag wait: the flag is NULL");
  if (value == 0) return gbSuccess; /* every flag starts at 0 and only grows */
  GB_CHECK(gbDeviceCudaMakeCurrent());
  const gbCudaApi_t* api = gbDeviceCudaApi();
  if (api->flagMode == GB_CUDA_FLAGS_HOSTFN) return launchHost(api, hostWait, flag, value, stream, "wait");
  gbCuDevicePtr_t addr = 0;
  GB_CHECK(valueAddress(api, flag, &addr));
  gbCuResult_t r;
  if (api->flagMode == GB_CUDA_FLAGS_MEMOPS64) {
    r = api->cuStreamWaitValue64(stream, addr, value, GB_CU_STREAM_WAIT_VALUE_GEQ);
  } else {
    GB_CHECK(check32(value, "wait"));
    r = api->cuStreamWaitValue32(stream, addr, (uint32_t)value, GB_CU_STREAM_WAIT_VALUE_GEQ);
  }
  if (r != GB_CU_SUCCESS)
    return gbDeviceCudaDriverFail(r, "cuStreamWaitValue%d (flag >= %llu) on stream %p", (int)api->flagMode,
                                  (unsigned long long)value, stream);
  return gbSuccess;
}
