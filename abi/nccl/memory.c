/* Device memory and buffer registration. ncclMemAlloc/ncclMemFree are
 * gpubridge's gbMemAlloc/gbMemFree (device memory of the GPU it serves;
 * host memory on a simulated rank). Registration is a promise to NCCL that
 * lets it use a buffer zero-copy; gpubridge copies through its own staging
 * and needs none, so ncclCommRegister succeeds with a handle that stands for
 * nothing and ncclCommDeregister takes it back. */
#include "abi.h"
#include "nccl_exports.h"

/* The one handle ncclCommRegister gives out; only its address matters. */
static char registered;

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  GB_NCCL_FORWARD(ncclMemAlloc, ptr, size);
  static const char fn[] = "ncclMemAlloc";
  int device;
  gbResult_t res = gbNcclDeviceAdopt(fn, &device); /* gpubridge's first device use may be here */
  if (res == gbSuccess) res = gbNcclErrorFrom(gbMemAlloc(ptr, size), fn, NULL);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclMemAlloc)

ncclResult_t ncclMemFree(void* ptr) {
  GB_NCCL_FORWARD(ncclMemFree, ptr);
  return gbNcclResult(gbNcclErrorFrom(gbMemFree(ptr), "ncclMemFree", NULL));
}
GB_NCCL_ALIAS(ncclMemFree)

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  GB_NCCL_FORWARD(ncclCommRegister, comm, buff, size, handle);
  static const char fn[] = "ncclCommRegister";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess && !handle) res = gbNcclErrorSet(gbInvalidArgument, "%s: handle is NULL", fn);
  if (res == gbSuccess) {
    *handle = &registered;
    GB_NCCL_TRACE("%s: %p, %zu bytes: nothing to register (gpubridge stages through its own buffers)", fn, buff,
                  size);
  }
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommRegister)

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  GB_NCCL_FORWARD(ncclCommDeregister, comm, handle);
  static const char fn[] = "ncclCommDeregister";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess && handle != &registered)
    res = gbNcclErrorSet(gbInvalidArgument, "%s: handle %p was not made by ncclCommRegister", fn, handle);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommDeregister)
