/* The "cuda" device ops: memory, pinned mapped host memory, streams and
 * stream copies through the dlopen'd CUDA runtime. Each op first makes this
 * process's GPU current, because callers use streams from any thread. A NULL
 * stream is passed as 0: the legacy default stream (the plain, not the
 * per-thread, entry points are loaded). */
#include <string.h>

#include "base/result.h"
#include "device/cuda/api.h"
#include "device/cuda/cuda.h"

static const gbCudaApi_t* api(void) { return gbDeviceCudaApi(); }

static gbResult_t memAlloc(void** ptr, size_t bytes) {
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "cuda memory allocation: the output pointer is NULL");
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaMalloc(ptr, bytes);
  if (e != GB_CUDA_SUCCESS)
    return gbDeviceCudaFail(e, "cudaMalloc of %zu bytes (free GPU memory or use smaller buffers)", bytes);
  return gbSuccess;
}

static gbResult_t memFree(void* ptr) {
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaFree(ptr);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaFree(%p)", ptr);
  return gbSuccess;
}

/* cudaMemcpyDefault: the runtime tells host from device pointers (UVA), so a
 * caller that passes pinned or device memory on either side is served too.
 * cudaMemcpy alone is not synchronous in every case: from pageable memory to
 * the GPU it may return once the data is staged, before the DMA lands, and
 * device-to-device it returns at once. Work on a non-blocking stream would
 * then read stale data, so the legacy stream the copy ran on is synchronized. */
static gbResult_t copySync(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "%s of %zu bytes with a NULL %s pointer", what, bytes,
                      dst == NULL ? "destination" : "source");
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaMemcpy(dst, src, bytes, GB_CUDA_MEMCPY_DEFAULT);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaMemcpy (%s) of %zu bytes", what, bytes);
  e = api()->cudaStreamSynchronize(NULL);
  if (e != GB_CUDA_SUCCESS)
    return gbDeviceCudaFail(e, "cudaStreamSynchronize(legacy stream) after a %s of %zu bytes", what, bytes);
  return gbSuccess;
}

static gbResult_t memcpyToDevice(void* dst, const void* src, size_t bytes) {
  return copySync(dst, src, bytes, "copy to the GPU");
}

static gbResult_t memcpyToHost(void* dst, const void* src, size_t bytes) {
  return copySync(dst, src, bytes, "copy from the GPU");
}

/* Mapped, so streams can write and wait on flags in it; portable, so any
 * context in the process may use it. Zeroed: flags start at value 0. */
static gbResult_t hostAlloc(void** ptr, size_t bytes) {
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "cuda host allocation: the output pointer is NULL");
  GB_CHECK(gbDeviceCudaMakeCurrent());
  size_t n = bytes ? bytes : 1;
  gbCudaError_t e = api()->cudaHostAlloc(ptr, n, GB_CUDA_HOST_ALLOC_MAPPED | GB_CUDA_HOST_ALLOC_PORTABLE);
  if (e != GB_CUDA_SUCCESS)
    return gbDeviceCudaFail(e, "cudaHostAlloc (mapped, portable) of %zu bytes (lower GPUBRIDGE_CHUNK_BYTES or "
                            "GPUBRIDGE_STAGING_SLOTS, or raise the locked-memory limit)", n);
  memset(*ptr, 0, n);
  return gbSuccess;
}

static gbResult_t hostFree(void* ptr) {
  if (ptr == NULL) return gbSuccess;
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaFreeHost(ptr);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaFreeHost(%p)", ptr);
  return gbSuccess;
}

static gbResult_t streamCreate(void** stream) {
  if (stream == NULL) return gbErrorSet(gbInvalidArgument, "cuda stream create: the output pointer is NULL");
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaStream_t s = NULL;
  /* Non-blocking: collectives must not serialize with the legacy default stream. */
  gbCudaError_t e = api()->cudaStreamCreateWithFlags(&s, GB_CUDA_STREAM_NON_BLOCKING);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaStreamCreateWithFlags(non-blocking)");
  *stream = s;
  return gbSuccess;
}

static gbResult_t streamDestroy(void* stream) {
  if (stream == NULL) return gbSuccess; /* the default stream is not ours */
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaStreamDestroy(stream);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaStreamDestroy(%p)", stream);
  return gbSuccess;
}

static gbResult_t streamSynchronize(void* stream) {
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaStreamSynchronize(stream);
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaStreamSynchronize(%p)", stream);
  return gbSuccess;
}

static gbResult_t deviceSynchronize(void) {
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaDeviceSynchronize();
  if (e != GB_CUDA_SUCCESS) return gbDeviceCudaFail(e, "cudaDeviceSynchronize");
  return gbSuccess;
}

static gbResult_t copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "stream copy of %zu bytes with a NULL %s pointer", bytes,
                      dst == NULL ? "destination" : "source");
  GB_CHECK(gbDeviceCudaMakeCurrent());
  gbCudaError_t e = api()->cudaMemcpyAsync(dst, src, bytes, GB_CUDA_MEMCPY_DEFAULT, stream);
  if (e != GB_CUDA_SUCCESS)
    return gbDeviceCudaFail(e, "cudaMemcpyAsync of %zu bytes (%p <- %p) on stream %p", bytes, dst, src, stream);
  return gbSuccess;
}

void gbDeviceCudaFillOps(gbDeviceOps* ops) {
  memset(ops, 0, sizeof(*ops));
  ops->name = "cuda";
  ops->runKind = gbRunReal;
  ops->vendor = "nvidia";
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
  ops->flagWrite = gbDeviceCudaFlagWrite;
  ops->flagWait = gbDeviceCudaFlagWait;
  ops->launchHostFn = NULL; /* island work on a GPU is the vendor library's */
  ops->deviceSynchronize = deviceSynchronize;
  ops->identify = gbDeviceCudaIdentify;
}
