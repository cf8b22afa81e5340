/* The device ops over a CUDA-like runtime: memory, pinned mapped host memory,
 * streams and stream copies. Each op first makes this process's GPU current,
 * because callers use streams from any thread. A NULL stream is passed as is:
 * the runtime's default stream (CUDA's legacy one, HIP's null stream). */
#include <string.h>

#include "base/result.h"
#include "device/gpu/gpu.h"

/* The runtime of the process's device, set once by gbGpuOpsFill (under
 * choose.c's once-guard); the ops take no context, so they reach it here. */
static gbGpuRuntime_t* active;

const gbGpuRuntime_t* gbGpuActive(void) { return active; }

gbResult_t gbGpuMakeCurrent(const gbGpuRuntime_t* rt) {
  gbGpuError_t e = rt->setDevice(rt->device);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sSetDevice(%d)", rt->name, rt->device);
  return gbSuccess;
}

static gbResult_t memAlloc(void** ptr, size_t bytes) {
  const gbGpuRuntime_t* rt = active;
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "%s memory allocation: the output pointer is NULL", rt->name);
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->memAlloc(ptr, bytes);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%sMalloc of %zu bytes (free GPU memory or use smaller buffers)", rt->name, bytes);
  return gbSuccess;
}

static gbResult_t memFree(void* ptr) {
  const gbGpuRuntime_t* rt = active;
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->memFree(ptr);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sFree(%p)", rt->name, ptr);
  return gbSuccess;
}

/* The default memcpy kind: the runtime tells host from device pointers
 * (unified addressing), so a caller that passes pinned or device memory on
 * either side is served too. A "synchronous" memcpy is not synchronous in
 * every case: from pageable memory to the GPU it may return once the data is
 * staged, before the DMA lands, and device-to-device it returns at once. Work
 * on a non-blocking stream would then read stale data, so the default stream
 * the copy ran on is synchronized. */
static gbResult_t copySync(void* dst, const void* src, size_t bytes, const char* what) {
  const gbGpuRuntime_t* rt = active;
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "%s of %zu bytes with a NULL %s pointer", what, bytes,
                      dst == NULL ? "destination" : "source");
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->copy(dst, src, bytes, GB_GPU_MEMCPY_DEFAULT);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sMemcpy (%s) of %zu bytes", rt->name, what, bytes);
  e = rt->streamSynchronize(NULL);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%sStreamSynchronize(%s) after a %s of %zu bytes", rt->name, rt->nullStream, what, bytes);
  return gbSuccess;
}

static gbResult_t memcpyToDevice(void* dst, const void* src, size_t bytes) {
  return copySync(dst, src, bytes, "copy to the GPU");
}

static gbResult_t memcpyToHost(void* dst, const void* src, size_t bytes) {
  return copySync(dst, src, bytes, "copy from the GPU");
}

/* Mapped, so streams can write and wait on flags in it; portable, so every
 * context in the process may use it. Zeroed: flags start at value 0. */
static gbResult_t hostAlloc(void** ptr, size_t bytes) {
  const gbGpuRuntime_t* rt = active;
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "%s host allocation: the output pointer is NULL", rt->name);
  GB_CHECK(gbGpuMakeCurrent(rt));
  size_t n = bytes ? bytes : 1;
  gbGpuError_t e = rt->hostAlloc(ptr, n, GB_GPU_HOST_ALLOC_MAPPED | GB_GPU_HOST_ALLOC_PORTABLE);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%s (mapped, portable) of %zu bytes (lower GPUBRIDGE_CHUNK_BYTES or "
                    "GPUBRIDGE_STAGING_SLOTS, or raise the locked-memory limit)", rt->hostAllocName, n);
  memset(*ptr, 0, n);
  return gbSuccess;
}

static gbResult_t hostFree(void* ptr) {
  const gbGpuRuntime_t* rt = active;
  if (ptr == NULL) return gbSuccess;
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->hostFree(ptr);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%s(%p)", rt->hostFreeName, ptr);
  return gbSuccess;
}

static gbResult_t streamCreate(void** stream) {
  const gbGpuRuntime_t* rt = active;
  if (stream == NULL) return gbErrorSet(gbInvalidArgument, "%s stream create: the output pointer is NULL", rt->name);
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuStream_t s = NULL;
  /* Non-blocking: collectives must not serialize with the default stream. */
  gbGpuError_t e = rt->streamCreateWithFlags(&s, GB_GPU_STREAM_NON_BLOCKING);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sStreamCreateWithFlags(non-blocking)", rt->name);
  *stream = s;
  return gbSuccess;
}

static gbResult_t streamDestroy(void* stream) {
  const gbGpuRuntime_t* rt = active;
  if (stream == NULL) return gbSuccess; /* the default stream is not ours */
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->streamDestroy(stream);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sStreamDestroy(%p)", rt->name, stream);
  return gbSuccess;
}

static gbResult_t streamSynchronize(void* stream) {
  const gbGpuRuntime_t* rt = active;
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->streamSynchronize(stream);
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sStreamSynchronize(%p)", rt->name, stream);
  return gbSuccess;
}

static gbResult_t deviceSynchronize(void) {
  const gbGpuRuntime_t* rt = active;
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->deviceSynchronize();
  if (e != GB_GPU_SUCCESS) return rt->fail(e, "%sDeviceSynchronize", rt->name);
  return gbSuccess;
}

static gbResult_t copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  const gbGpuRuntime_t* rt = active;
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "stream copy of %zu bytes with a NULL %s pointer", bytes,
                      dst == NULL ? "destination" : "source");
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->copyAsync(dst, src, bytes, GB_GPU_MEMCPY_DEFAULT, stream);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%sMemcpyAsync of %zu bytes (%p <- %p) on stream %p", rt->name, bytes, dst, src, stream);
  return gbSuccess;
}

void gbGpuOpsFill(gbGpuRuntime_t* rt, gbDeviceOps* ops) {
  active = rt;
  memset(ops, 0, sizeof(*ops));
  ops->name = rt->name;
  ops->runtime = rt->runtime;
  ops->runKind = gbRunReal;
  ops->vendor = rt->vendor;
  ops->memAlloc = memAlloc;
  ops->memFree = memFree;
  ops->memcpyToDevice = memcpyToDevice;
  ops->memcpyToHost = memcpyToHost;
  ops->hostAlloc = hostAlloc;
  ops->hostFree = hostFree;
  ops->streamCreate = streamCreate;
  ops->streamDestroy = streamDestroy;
  ops->streamSynchronize = streamSynchronize;
  ops->copyAsync = copyAsync;
  ops->flagWrite = gbGpuFlagWrite;
  ops->flagWait = gbGpuFlagWait;
  ops->flagsMap = gbGpuFlagsMap;
  ops->flagWriteMapped = gbGpuFlagWriteMapped;
  ops->launchHostFn = NULL; /* island work on a GPU is the vendor library's */
  ops->hostRegister = gbGpuHostRegister;
  ops->hostUnregister = gbGpuHostUnregister;
  ops->reduceAsync = gbGpuReduceAsync;
  ops->exchangeAsync = gbGpuExchangeAsync;
  ops->encodeAsync = gbGpuEncodeAsync;
  ops->deviceSynchronize = deviceSynchronize;
  ops->identify = NULL;
}
