/* The "hip" device ops: memory, pinned mapped host memory, streams and
 * stream copies through the dlopen'd HIP runtime. Each op first makes this
 * process's GPU current, because callers use streams from any thread. A NULL
 * stream is HIP's null stream. */
#include <string.h>

#include "base/result.h"
#include "device/hip/api.h"
#include "device/hip/hip.h"

static const gbHipApi_t* api(void) { return gbDeviceHipApi(); }

static gbResult_t memAlloc(void** ptr, size_t bytes) {
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "hip memory allocation: the output pointer is NULL");
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipMalloc(ptr, bytes);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipMalloc of %zu bytes (free GPU memory or use smaller buffers)", bytes);
  return gbSuccess;
}

static gbResult_t memFree(void* ptr) {
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipFree(ptr);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipFree(%p)", ptr);
  return gbSuccess;
}

/* hipMemcpyDefault: the runtime tells host from device pointers (unified
 * addressing), so pinned or device memory on either side is served too. */
static gbResult_t copySync(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "%s of %zu bytes with a NULL %s pointer", what, bytes,
                      dst == NULL ? "destination" : "source");
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipMemcpy(dst, src, bytes, GB_HIP_MEMCPY_DEFAULT);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipMemcpy (%s) of %zu bytes", what, bytes);
  /* A copy from pageable memory may return before it landed (seen with the
   * CUDA runtime for small copies): wait for the null stream, as "synchronous"
   * promises, before other streams read the data. */
  e = api()->hipStreamSynchronize(NULL);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipStreamSynchronize(null stream) after a %s of %zu bytes", what, bytes);
  return gbSuccess;
}

static gbResult_t memcpyToDevice(void* dst, const void* src, size_t bytes) {
  return copySync(dst, src, bytes, "copy to the GPU");
}

static gbResult_t memcpyToHost(void* dst, const void* src, size_t bytes) {
  return copySync(dst, src, bytes, "copy from the GPU");
}

/* Mapped, so streams can write and wait on flags in it; portable, so every
 * device in the process may use it. Zeroed: flags start at value 0. */
static gbResult_t hostAlloc(void** ptr, size_t bytes) {
  if (ptr == NULL) return gbErrorSet(gbInvalidArgument, "hip host allocation: the output pointer is NULL");
  GB_CHECK(gbDeviceHipMakeCurrent());
  size_t n = bytes ? bytes : 1;
  gbHipError_t e = api()->hipHostMalloc(ptr, n, GB_HIP_HOST_MALLOC_MAPPED | GB_HIP_HOST_MALLOC_PORTABLE);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipHostMalloc (mapped, portable) of %zu bytes (lower GPUBRIDGE_CHUNK_BYTES or "
                           "GPUBRIDGE_STAGING_SLOTS, or raise the locked-memory limit)", n);
  memset(*ptr, 0, n);
  return gbSuccess;
}

static gbResult_t hostFree(void* ptr) {
  if (ptr == NULL) return gbSuccess;
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipHostFree(ptr);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipHostFree(%p)", ptr);
  return gbSuccess;
}

static gbResult_t streamCreate(void** stream) {
  if (stream == NULL) return gbErrorSet(gbInvalidArgument, "hip stream create: the output pointer is NULL");
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipStream_t s = NULL;
  /* Non-blocking: collectives must not serialize with the null stream. */
  gbHipError_t e = api()->hipStreamCreateWithFlags(&s, GB_HIP_STREAM_NON_BLOCKING);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipStreamCreateWithFlags(non-blocking)");
  *stream = s;
  return gbSuccess;
}

static gbResult_t streamDestroy(void* stream) {
  if (stream == NULL) return gbSuccess; /* the null stream is not ours */
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipStreamDestroy(stream);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipStreamDestroy(%p)", stream);
  return gbSuccess;
}

static gbResult_t streamSynchronize(void* stream) {
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipStreamSynchronize(stream);
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipStreamSynchronize(%p)", stream);
  return gbSuccess;
}

static gbResult_t deviceSynchronize(void) {
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipDeviceSynchronize();
  if (e != GB_HIP_SUCCESS) return gbDeviceHipFail(e, "hipDeviceSynchronize");
  return gbSuccess;
}

static gbResult_t copyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return gbSuccess;
  if (dst == NULL || src == NULL)
    return gbErrorSet(gbInvalidArgument, "stream copy of %zu bytes with a NULL %s pointer", bytes,
                      dst == NULL ? "destination" : "source");
  GB_CHECK(gbDeviceHipMakeCurrent());
  gbHipError_t e = api()->hipMemcpyAsync(dst, src, bytes, GB_HIP_MEMCPY_DEFAULT, stream);
  if (e != GB_HIP_SUCCESS)
    return gbDeviceHipFail(e, "hipMemcpyAsync of %zu bytes (%p <- %p) on stream %p", bytes, dst, src, stream);
  return gbSuccess;
}

void gbDeviceHipFillOps(gbDeviceOps* ops) {
  memset(ops, 0, sizeof(*ops));
  ops->name = "hip";
  ops->runKind = gbRunReal;
  ops->vendor = "amd";
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
  ops->flagWrite = gbDeviceHipFlagWrite;
  ops->flagWait = gbDeviceHipFlagWait;
  ops->launchHostFn = NULL; /* island work on a GPU is the vendor library's */
  ops->deviceSynchronize = deviceSynchronize;
  ops->identify = gbDeviceHipIdentify;
}
