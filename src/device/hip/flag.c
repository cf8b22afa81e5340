/* How flags are signalled on a HIP stream (the paths are device/gpu/flag.c):
 *  - write: hipStreamWriteValue64 (runs after the stream's earlier work, so
 *    the proxy that sees the value sees the data);
 *  - wait: hipStreamWaitValue64 with hipStreamWaitValueGte and a full mask.
 * Which path works is decided once at open by a self-test on a private
 * stream (write 1, wait for >= 1, check that the host sees 1): 64-bit ops,
 * else 32-bit ones, else host functions (hipLaunchHostFunc). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/result.h"
#include "device/hip/api.h"
#include "device/hip/hip.h"

/* The self-test's stream finishes in microseconds; this bounds a broken one. */
#define PROBE_TIMEOUT_SEC 10.0
#define PROBE_POLL_NS 50000

static gbHipError_t writeBits(const gbHipApi_t* api, int bits, void* stream, void* addr, uint64_t value) {
  return bits == 64 ? api->hipStreamWriteValue64(stream, addr, value, 0)
                    : api->hipStreamWriteValue32(stream, addr, (uint32_t)value, 0);
}

static gbHipError_t waitBits(const gbHipApi_t* api, int bits, void* stream, void* addr, uint64_t value) {
  return bits == 64 ? api->hipStreamWaitValue64(stream, addr, value, GB_HIP_STREAM_WAIT_VALUE_GTE, GB_HIP_MASK_64)
                    : api->hipStreamWaitValue32(stream, addr, (uint32_t)value, GB_HIP_STREAM_WAIT_VALUE_GTE,
                                                GB_HIP_MASK_32);
}

/* The table the flag paths use (read-only after open). */
static const gbHipApi_t* memOps;

static int writeValue(gbGpuStream_t stream, void* addr, uint64_t value, int bits) {
  return writeBits(memOps, bits, stream, addr, value);
}

static int waitValue(gbGpuStream_t stream, void* addr, uint64_t value, int bits) {
  return waitBits(memOps, bits, stream, addr, value);
}

/* ---------------------------------------------------------------- self-test */

/* Whether bits-wide stream memory ops work on flag (fresh, value 0) through
 * stream: *works = 1, or 0 with a line at INFO when the runtime refuses them.
 * An error, with *works = -1, when the stream does not finish: no fallback
 * repairs that, and the stream may still read the flag. */
static gbResult_t probe(gbHipApi_t* api, int bits, gbFlag_t* flag, void* stream, int* works) {
  *works = 0;
  if (bits == 64 ? !api->hipStreamWriteValue64 || !api->hipStreamWaitValue64
                 : !api->hipStreamWriteValue32 || !api->hipStreamWaitValue32)
    return gbSuccess;
  void* addr = NULL;
  gbHipError_t e = api->rt.hostGetDevicePointer(&addr, (void*)&flag->value, 0);
  const char* step = "hipHostGetDevicePointer";
  if (e == GB_HIP_SUCCESS) {
    step = bits == 64 ? "hipStreamWriteValue64" : "hipStreamWriteValue32";
    e = writeBits(api, bits, stream, addr, 1);
  }
  if (e == GB_HIP_SUCCESS) {
    step = bits == 64 ? "hipStreamWaitValue64" : "hipStreamWaitValue32";
    e = waitBits(api, bits, stream, addr, 1);
  }
  gbDeadline_t deadline = gbDeadlineIn(PROBE_TIMEOUT_SEC);
  const struct timespec interval = {0, PROBE_POLL_NS};
  gbHipError_t q = api->hipStreamQuery(stream);
  while (q == GB_HIP_ERROR_NOT_READY && !gbDeadlinePassed(deadline)) {
    nanosleep(&interval, NULL);
    q = api->hipStreamQuery(stream);
  }
  if (q == GB_HIP_ERROR_NOT_READY) {
    /* Try to release the wait from the host; the caller leaves the stream be. */
    gbFlagSetHost(flag, UINT32_MAX, 0);
    *works = -1;
    return gbErrorSet(gbUnhandledCudaError,
                      "the %d-bit stream memory op self-test on GPU %d did not finish within %g s (the flag "
                      "holds %llu): the HIP runtime %s accepted a write and a wait it does not carry out; "
                      "update ROCm or report it",
                      bits, api->rt.device, PROBE_TIMEOUT_SEC,
                      (unsigned long long)atomic_load_explicit(&flag->value, memory_order_relaxed), api->name);
  }
  if (e == GB_HIP_SUCCESS && q != GB_HIP_SUCCESS) {
    step = "hipStreamQuery after the memory ops";
    e = q;
  }
  if (e != GB_HIP_SUCCESS) {
    const char* text = api->hipGetErrorString(e);
    (void)api->hipGetLastError();
    GB_INFO(GB_LOG_DEVICE, "hip: %d-bit stream memory ops not usable on GPU %d: %s returned HIP error %d (%s)",
            bits, api->rt.device, step, e, text ? text : "");
    return gbSuccess;
  }
  uint64_t seen = atomic_load_explicit(&flag->value, memory_order_acquire);
  if (seen != 1) {
    GB_INFO(GB_LOG_DEVICE, "hip: %d-bit stream memory ops not usable on GPU %d: the stream wrote 1, the host "
            "reads %llu", bits, api->rt.device, (unsigned long long)seen);
    return gbSuccess;
  }
  *works = 1;
  return gbSuccess;
}

gbResult_t gbDeviceHipFlagModeChoose(gbHipApi_t* api) {
  api->rt.flagMode = GB_GPU_FLAGS_HOSTFN;
  memOps = api;
  api->rt.writeValue = writeValue;
  api->rt.waitValue = waitValue;
  gbFlag_t* flags = NULL;
  gbHipError_t e = api->rt.hostAlloc((void**)&flags, 2 * sizeof(gbFlag_t),
                                      GB_GPU_HOST_ALLOC_MAPPED | GB_GPU_HOST_ALLOC_PORTABLE);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipHostMalloc (mapped) of %zu bytes for the flag self-test", 2 * sizeof(gbFlag_t));
  memset(flags, 0, 2 * sizeof(gbFlag_t));
  gbHipStream_t s = NULL;
  gbResult_t res = gbSuccess;
  int works = 0;
  e = api->rt.streamCreateWithFlags(&s, GB_GPU_STREAM_NON_BLOCKING);
  if (e != GB_HIP_SUCCESS) {
    res = gbDeviceHipFail(e, "hipStreamCreateWithFlags for the flag self-test");
    goto done;
  }
  GB_CHECK_GOTO(probe(api, 64, &flags[0], s, &works), res, done);
  if (works) {
    api->rt.flagMode = GB_GPU_FLAGS_MEMOPS64;
    goto done;
  }
  GB_CHECK_GOTO(probe(api, 32, &flags[1], s, &works), res, done);
  if (works) {
    api->rt.flagMode = GB_GPU_FLAGS_MEMOPS32;
    goto done;
  }
  if (api->rt.launchHostFunc == NULL)
    res = gbErrorSet(gbUnhandledCudaError,
                     "the HIP runtime %s has neither usable stream memory ops nor hipLaunchHostFunc, so "
                     "streams cannot signal the proxy; use ROCm 6 or newer",
                     api->name);
done:
  /* After a self-test that did not finish, the stream may still read the
   * flags: leave both to the process (its start-up fails anyway). */
  if (works >= 0) {
    if (s != NULL) (void)api->rt.streamDestroy(s);
    (void)api->rt.hostFree(flags);
  }
  (void)api->hipGetLastError(); /* the refused ops must not surface in a later call */
  return res;
}
