/* Flags on a HIP stream. gbFlag_t lives in mapped pinned host memory
 * (hostAlloc); the stream writes its value and waits on it with HIP's stream
 * memory ops, so neither the caller nor a host thread blocks:
 *  - write: hipStreamWriteValue64 (runs after the stream's earlier work, so
 *    the proxy that sees the value sees the data);
 *  - wait: hipStreamWaitValue64 with hipStreamWaitValueGte and a full mask.
 * Which path works is decided once at open by a self-test on a private
 * stream (write 1, wait for >= 1, check that the host sees 1): 64-bit ops,
 * else 32-bit ones (the low word: x86-64 and Arm are little-endian; values
 * past 2^32 are then refused), else host functions (hipLaunchHostFunc): one
 * stores the value, or waits with gbFlagWaitHost (up to GPUBRIDGE_TIMEOUT +
 * 5 s). That fallback blocks HIP's host-function thread while it waits, and
 * a failed wait can only be logged: host functions cannot fail the stream.
 * flag->error is not seen by the GPU: whoever sets an error also releases the
 * value (gbFlagSetHost), so the stream goes on and the error reaches the user
 * through the communicator. */
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

/* The device address of flag->value. */
static gbResult_t valueAddress(const gbHipApi_t* api, gbFlag_t* flag, void** out) {
  gbHipError_t e = api->hipHostGetDevicePointer(out, (void*)&flag->value, 0);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipHostGetDevicePointer(%p) for a flag (flags must live in memory from the "
                           "device's hostAlloc)", (void*)flag);
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

static gbHipError_t writeValue(const gbHipApi_t* api, int bits, void* stream, void* addr, uint64_t value) {
  return bits == 64 ? api->hipStreamWriteValue64(stream, addr, value, 0)
                    : api->hipStreamWriteValue32(stream, addr, (uint32_t)value, 0);
}

static gbHipError_t waitValue(const gbHipApi_t* api, int bits, void* stream, void* addr, uint64_t value) {
  return bits == 64 ? api->hipStreamWaitValue64(stream, addr, value, GB_HIP_STREAM_WAIT_VALUE_GTE, GB_HIP_MASK_64)
                    : api->hipStreamWaitValue32(stream, addr, (uint32_t)value, GB_HIP_STREAM_WAIT_VALUE_GTE,
                                                GB_HIP_MASK_32);
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
  gbHipError_t e = api->hipHostGetDevicePointer(&addr, (void*)&flag->value, 0);
  const char* step = "hipHostGetDevicePointer";
  if (e == GB_HIP_SUCCESS) {
    step = bits == 64 ? "hipStreamWriteValue64" : "hipStreamWriteValue32";
    e = writeValue(api, bits, stream, addr, 1);
  }
  if (e == GB_HIP_SUCCESS) {
    step = bits == 64 ? "hipStreamWaitValue64" : "hipStreamWaitValue32";
    e = waitValue(api, bits, stream, addr, 1);
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
                      bits, api->device, PROBE_TIMEOUT_SEC, (unsigned long long)flag->value, api->name);
  }
  if (e == GB_HIP_SUCCESS && q != GB_HIP_SUCCESS) {
    step = "hipStreamQuery after the memory ops";
    e = q;
  }
  if (e != GB_HIP_SUCCESS) {
    const char* text = api->hipGetErrorString(e);
    (void)api->hipGetLastError();
    GB_INFO(GB_LOG_DEVICE, "hip: %d-bit stream memory ops not usable on GPU %d: %s returned HIP error %d (%s)",
            bits, api->device, step, e, text ? text : "");
    return gbSuccess;
  }
  uint64_t seen = __atomic_load_n(&flag->value, __ATOMIC_ACQUIRE);
  if (seen != 1) {
    GB_INFO(GB_LOG_DEVICE, "hip: %d-bit stream memory ops not usable on GPU %d: the stream wrote 1, the host "
            "reads %llu", bits, api->device, (unsigned long long)seen);
    return gbSuccess;
  }
  *works = 1;
  return gbSuccess;
}

gbResult_t gbDeviceHipFlagModeChoose(gbHipApi_t* api) {
  api->flagMode = GB_HIP_FLAGS_HOSTFN;
  gbFlag_t* flags = NULL;
  gbHipError_t e = api->hipHostMalloc((void**)&flags, 2 * sizeof(gbFlag_t),
                                      GB_HIP_HOST_MALLOC_MAPPED | GB_HIP_HOST_MALLOC_PORTABLE);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipHostMalloc (mapped) of %zu bytes for the flag self-test", 2 * sizeof(gbFlag_t));
  memset(flags, 0, 2 * sizeof(gbFlag_t));
  gbHipStream_t s = NULL;
  gbResult_t res = gbSuccess;
  int works = 0;
  e = api->hipStreamCreateWithFlags(&s, GB_HIP_STREAM_NON_BLOCKING);
  if (e != GB_HIP_SUCCESS) {
    res = gbDeviceHipFail(e, "hipStreamCreateWithFlags for the flag self-test");
    goto done;
  }
  GB_CHECK_GOTO(probe(api, 64, &flags[0], s, &works), res, done);
  if (works) {
    api->flagMode = GB_HIP_FLAGS_MEMOPS64;
    goto done;
  }
  GB_CHECK_GOTO(probe(api, 32, &flags[1], s, &works), res, done);
  if (works) {
    api->flagMode = GB_HIP_FLAGS_MEMOPS32;
    goto done;
  }
  if (api->hipLaunchHostFunc == NULL)
    res = gbErrorSet(gbUnhandledCudaError,
                     "the HIP runtime %s has neither usable stream memory ops nor hipLaunchHostFunc, so "
                     "streams cannot signal the proxy; use ROCm 6 or newer",
                     api->name);
done:
  /* After a self-test that did not finish, the stream may still read the
   * flags: leave both to the process (its start-up fails anyway). */
  if (works >= 0) {
    if (s != NULL) (void)api->hipStreamDestroy(s);
    (void)api->hipHostFree(flags);
  }
  (void)api->hipGetLastError(); /* the refused ops must not surface in a later call */
  return res;
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

static gbResult_t launchHost(const gbHipApi_t* api, gbHipHostFn_t fn, gbFlag_t* flag, uint64_t value, void* stream,
                             const char* what) {
  hostFlag_t* h = malloc(sizeof(*h));
  if (h == NULL) return gbErrorSet(gbSystemError, "flag %s: out of memory", what);
  *h = (hostFlag_t){flag, value, api->flagWaitSec};
  gbHipError_t e = api->hipLaunchHostFunc(stream, fn, h);
  if (e != GB_HIP_SUCCESS) {
    free(h);
    return gbDeviceHipFail(e, "hipLaunchHostFunc (flag %s to %llu) on stream %p", what, (unsigned long long)value,
                           stream);
  }
  return gbSuccess;
}

/* ------------------------------------------------------------------ ops */

gbResult_t gbDeviceHipFlagWrite(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "flag write: the flag is NULL");
  GB_CHECK(gbDeviceHipMakeCurrent());
  const gbHipApi_t* api = gbDeviceHipApi();
  if (api->flagMode == GB_HIP_FLAGS_HOSTFN) return launchHost(api, hostWrite, flag, value, stream, "write");
  if (api->flagMode == GB_HIP_FLAGS_MEMOPS32) GB_CHECK(check32(value, "write"));
  void* addr = NULL;
  GB_CHECK(valueAddress(api, flag, &addr));
  gbHipError_t e = writeValue(api, (int)api->flagMode, stream, addr, value);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipStreamWriteValue%d (flag to %llu) on stream %p", (int)api->flagMode,
                           (unsigned long long)value, stream);
  return gbSuccess;
}

gbResult_t gbDeviceHipFlagWait(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "flag wait: the flag is NULL");
  if (value == 0) return gbSuccess; /* every flag starts at 0 and only grows */
  GB_CHECK(gbDeviceHipMakeCurrent());
  const gbHipApi_t* api = gbDeviceHipApi();
  if (api->flagMode == GB_HIP_FLAGS_HOSTFN) return launchHost(api, hostWait, flag, value, stream, "wait");
  if (api->flagMode == GB_HIP_FLAGS_MEMOPS32) GB_CHECK(check32(value, "wait"));
  void* addr = NULL;
  GB_CHECK(valueAddress(api, flag, &addr));
  gbHipError_t e = waitValue(api, (int)api->flagMode, stream, addr, value);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipStreamWaitValue%d (flag >= %llu) on stream %p", (int)api->flagMode,
                           (unsigned long long)value, stream);
  return gbSuccess;
}
