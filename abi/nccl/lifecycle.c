/* Communicator state and queries: finalize, destroy, abort, the async
 * error, count, device, rank. Destroy and abort of NULL succeed, as in
 * NCCL. gbCommFinalize blocks until the communicator's host work is done,
 * so a non-blocking communicator's ncclCommFinalize returns ncclSuccess
 * rather than ncclInProgress: a finished state NCCL callers accept. */
#include "abi.h"
#include "nccl_exports.h"

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclCommFinalize, comm);
  static const char fn[] = "ncclCommFinalize";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbCommFinalize(gb), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommFinalize)

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclCommDestroy, comm);
  static const char fn[] = "ncclCommDestroy";
  if (!comm) return ncclSuccess;
  gbComm_t gb;
  gbResult_t res = gbNcclCommRetire(fn, comm, &gb);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbCommDestroy(gb), fn, NULL);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommDestroy)

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclCommAbort, comm);
  static const char fn[] = "ncclCommAbort";
  if (!comm) return ncclSuccess;
  gbComm_t gb;
  gbResult_t res = gbNcclCommRetire(fn, comm, &gb);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbCommAbort(gb), fn, NULL);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommAbort)

/* The first time a non-blocking communicator reports success, it is ready:
 * that is when its "serves NCCL calls" line is logged. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  GB_NCCL_FORWARD(ncclCommGetAsyncError, comm, asyncError);
  static const char fn[] = "ncclCommGetAsyncError";
  if (!asyncError) return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "%s: asyncError is NULL", fn));
  gbComm_t gb;
  gbResult_t state = gbSuccess;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbCommGetAsyncError(gb, &state), fn, gb);
  if (res != gbSuccess) return gbNcclResult(res);
  if (state == gbSuccess) gbNcclCommAnnounce(comm);
  else gbNcclErrorFrom(state, fn, gb); /* the communicator's own text becomes this thread's last error */
  *asyncError = gbNcclResult(state);
  return ncclSuccess;
}
GB_NCCL_ALIAS(ncclCommGetAsyncError)

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  GB_NCCL_FORWARD(ncclCommCount, comm, count);
  static const char fn[] = "ncclCommCount";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess && !count) res = gbNcclErrorSet(gbInvalidArgument, "%s: count is NULL", fn);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbCommCount(gb, count), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommCount)

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  GB_NCCL_FORWARD(ncclCommUserRank, comm, rank);
  static const char fn[] = "ncclCommUserRank";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess && !rank) res = gbNcclErrorSet(gbInvalidArgument, "%s: rank is NULL", fn);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbCommUserRank(gb, rank), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommUserRank)

/* The GPU gpubridge serves for this process (device.c); 0 on a simulated
 * rank unless GPUBRIDGE_DEVICE says otherwise. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  GB_NCCL_FORWARD(ncclCommCuDevice, comm, device);
  static const char fn[] = "ncclCommCuDevice";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess && !device) res = gbNcclErrorSet(gbInvalidArgument, "%s: device is NULL", fn);
  if (res == gbSuccess) *device = comm->cudaDev;
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommCuDevice)
