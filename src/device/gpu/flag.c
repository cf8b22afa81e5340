/* Flags on a GPU stream. gbFlag_t lives in mapped pinned host memory
 * (hostAlloc); the stream writes its value and waits on it with the
 * runtime's stream memory ops, so neither the caller nor a host thread
 * blocks (the backend's writeValue / waitValue: a write runs after the
 * stream's earlier work, so the proxy that sees the value sees the data; a
 * wait is a >= compare). Where only 32-bit memory ops work, the low word is
 * used (x86-64 and Arm are little-endian); values past 2^30 - 1 are then refused.
 * Without stream memory ops, both go through the runtime's launchHostFunc: a
 * host function stores the value, or waits with gbFlagWaitHost (up to the
 * flag owner's timeout, else GPUBRIDGE_TIMEOUT, + 5 s). That fallback blocks the runtime's host-function
 * thread while it waits, and a failed wait can only be logged: host functions
 * have no way to fail the stream.
 * flag->error is not seen by the GPU: whoever sets an error also releases the
 * value (gbFlagSetHost), so the stream goes on and the error reaches the user
 * through the communicator. */
#include <stdint.h>
#include <stdlib.h>

#include "base/result.h"
#include "device/gpu/gpu.h"

const char* gbGpuFlagModeName(gbGpuFlagMode_t mode) {
  return mode == GB_GPU_FLAGS_MEMOPS64 ? "64-bit stream memory ops"
         : mode == GB_GPU_FLAGS_MEMOPS32 ? "32-bit stream memory ops"
                                         : "host functions (no stream memory ops)";
}

/* The device address of flag->value. */
static gbResult_t valueAddress(const gbGpuRuntime_t* rt, gbFlag_t* flag, void** out) {
  gbGpuError_t e = rt->hostGetDevicePointer(out, (void*)&flag->value, 0);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%sHostGetDevicePointer(%p) for a flag (flags must live in memory from the "
                    "device's hostAlloc)", rt->name, (void*)flag);
  return gbSuccess;
}

/* A 32-bit wait compares cyclically ((int32_t)(flag - value) >= 0), and a
 * release (stage/slots.c) stores 2^30 - 1 in the low word: it passes only
 * waits for values below 2^30, so flag values stop there. */
#define FLAG32_MAX 0x3FFFFFFFull

static gbResult_t check32(uint64_t value, const char* what) {
  if (value > FLAG32_MAX)
    return gbErrorSet(gbInternalError,
                      "flag %s of value %llu: this GPU has only 32-bit stream memory ops, so flag values "
                      "stop at 2^30 - 1 (uses of one communicator's slots); create a new communicator",
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

static gbResult_t launchHost(const gbGpuRuntime_t* rt, gbGpuHostFn_t fn, gbFlag_t* flag, uint64_t value,
                             void* stream, const char* what) {
  hostFlag_t* h = malloc(sizeof(*h));
  if (h == NULL) return gbErrorSet(gbSystemError, "flag %s: out of memory", what);
  *h = (hostFlag_t){flag, value, gbFlagStreamWaitSec(flag, rt->flagWaitSec)};
  gbGpuError_t e = rt->launchHostFunc(stream, fn, h);
  if (e != GB_GPU_SUCCESS) {
    free(h);
    return rt->fail(e, "%sLaunchHostFunc (flag %s to %llu) on stream %p", rt->name, what, (unsigned long long)value,
                    stream);
  }
  return gbSuccess;
}

/* ------------------------------------------------------------------ ops */

/* Both ops: the stream's memory op for the runtime's mode, or a host
 * function. addr: the device address of flag->value, NULL to look it up. */
static gbResult_t flagOp(gbFlag_t* flag, void* addr, uint64_t value, void* stream, int isWait) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  const char* what = isWait ? "wait" : "write";
  GB_CHECK(gbGpuMakeCurrent(rt));
  if (rt->flagMode == GB_GPU_FLAGS_HOSTFN)
    return launchHost(rt, isWait ? hostWait : hostWrite, flag, value, stream, what);
  if (rt->flagMode == GB_GPU_FLAGS_MEMOPS32) GB_CHECK(check32(value, what));
  if (addr == NULL) GB_CHECK(valueAddress(rt, flag, &addr));
  int bits = (int)rt->flagMode;
  int r = isWait ? rt->waitValue(stream, addr, value, bits) : rt->writeValue(stream, addr, value, bits);
  if (r != GB_GPU_SUCCESS)
    return rt->memOpFail(r, isWait ? "%sWaitValue%d (flag >= %llu) on stream %p" : "%sWriteValue%d (flag to %llu) on stream %p",
                         rt->memOpPrefix, bits, (unsigned long long)value, stream);
  return gbSuccess;
}

gbResult_t gbGpuFlagWrite(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "flag write: the flag is NULL");
  return flagOp(flag, NULL, value, stream, 0);
}

gbResult_t gbGpuFlagWait(gbFlag_t* flag, uint64_t value, void* stream) {
  if (flag == NULL) return gbErrorSet(gbInvalidArgument, "flag wait: the flag is NULL");
  if (value == 0) return gbSuccess; /* every flag starts at 0 and only grows */
  return flagOp(flag, NULL, value, stream, 1);
}

/* The device address of flags[0].value; flags[i].value's is i flags further
 * (a mapped allocation is one contiguous range on the device too). */
gbResult_t gbGpuFlagsMap(gbFlag_t* flags, void** mapped) {
  if (flags == NULL || mapped == NULL)
    return gbErrorSet(gbInvalidArgument, "flag map: the flags or the output pointer is NULL");
  const gbGpuRuntime_t* rt = gbGpuActive();
  GB_CHECK(gbGpuMakeCurrent(rt));
  return valueAddress(rt, flags, mapped);
}

gbResult_t gbGpuFlagWriteMapped(gbFlag_t* flag, void* mapped, uint64_t value, void* stream) {
  if (flag == NULL || mapped == NULL)
    return gbErrorSet(gbInvalidArgument, "flag write: the flag or its device address is NULL");
  return flagOp(flag, mapped, value, stream, 0);
}
