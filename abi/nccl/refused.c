/* NCCL calls gpubridge cannot honour. Each returns ncclInvalidUsage and
 * leaves a last-error text that names the call, says why and what to do
 * instead; none touches its arguments. Exporting them keeps a gpubridge
 * handle from ever reaching the real NCCL library (where it would be read
 * as NCCL's own struct), including calls newer than 2.28. */
#include "abi.h"
#include "nccl_exports.h"

static ncclResult_t refuse(const char* fn, const char* why) {
  return gbNcclResult(gbNcclErrorSet(gbInvalidUsage, "%s is not supported by gpubridge's NCCL interface "
                                                     "(libgpubridge-nccl): %s", fn, why));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  GB_NCCL_FORWARD(ncclCommShrink, comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  return refuse("ncclCommShrink", "gpubridge cannot drop ranks from a communicator; call ncclCommSplit on every "
                                  "surviving rank (the excluded ones pass NCCL_SPLIT_NOCOLOR), or make a new "
                                  "communicator");
}
GB_NCCL_ALIAS(ncclCommShrink)

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  GB_NCCL_FORWARD(ncclCommWindowRegister, comm, buff, size, win, winFlags);
  return refuse("ncclCommWindowRegister", "gpubridge has no symmetric memory windows (its islands meet through "
                                          "host staging); use ordinary buffers");
}
GB_NCCL_ALIAS(ncclCommWindowRegister)

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  GB_NCCL_FORWARD(ncclCommWindowDeregister, comm, win);
  return refuse("ncclCommWindowDeregister", "gpubridge has no symmetric memory windows");
}
GB_NCCL_ALIAS(ncclCommWindowDeregister)

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  GB_NCCL_FORWARD(ncclGroupSimulateEnd, simInfo);
  return refuse("ncclGroupSimulateEnd", "gpubridge has no cost model of NCCL's kernels to simulate a group with; "
                                        "measure with gpubridge-perf instead");
}
GB_NCCL_ALIAS(ncclGroupSimulateEnd)

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  GB_NCCL_FORWARD(ncclCommRevoke, comm, revokeFlags);
  return refuse("ncclCommRevoke", "use ncclCommAbort, which stops the communicator at once on this rank and makes "
                                  "its peers fail");
}
GB_NCCL_ALIAS(ncclCommRevoke)

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* devComm) {
  GB_NCCL_FORWARD(ncclDevCommCreate, comm, reqs, devComm);
  return refuse("ncclDevCommCreate", "NCCL's device API runs NCCL's own kernels on one vendor's GPUs; gpubridge "
                                     "offers host-launched calls only");
}
GB_NCCL_ALIAS(ncclDevCommCreate)

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm) {
  GB_NCCL_FORWARD(ncclDevCommDestroy, comm, devComm);
  return refuse("ncclDevCommDestroy", "NCCL's device API is not available through gpubridge");
}
GB_NCCL_ALIAS(ncclDevCommDestroy)

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  GB_NCCL_FORWARD(ncclCommSuspend, comm, flags);
  return refuse("ncclCommSuspend", "a call of NCCL 2.29; gpubridge keeps its resources until ncclCommDestroy");
}
GB_NCCL_ALIAS(ncclCommSuspend)

ncclResult_t ncclCommResume(ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclCommResume, comm);
  return refuse("ncclCommResume", "a call of NCCL 2.29; gpubridge never suspends a communicator");
}
GB_NCCL_ALIAS(ncclCommResume)

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config) {
  GB_NCCL_FORWARD(ncclCommGrow, comm, nRanks, uniqueId, rank, newcomm, config);
  return refuse("ncclCommGrow", "a call of NCCL 2.29; make a new communicator with ncclGetUniqueId and "
                                "ncclCommInitRank on every rank instead");
}
GB_NCCL_ALIAS(ncclCommGrow)

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  GB_NCCL_FORWARD(ncclCommGetUniqueId, comm, uniqueId);
  return refuse("ncclCommGetUniqueId", "a call of NCCL 2.29 (for ncclCommGrow); use ncclGetUniqueId");
}
GB_NCCL_ALIAS(ncclCommGetUniqueId)

ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, unsigned long long* value) {
  GB_NCCL_FORWARD(ncclCommMemStats, comm, stat, value);
  return refuse("ncclCommMemStats", "a call of NCCL 2.29; gpubridge's memory is its staging slots "
                                    "(GPUBRIDGE_STAGING_SLOTS x GPUBRIDGE_CHUNK_BYTES per communicator)");
}
GB_NCCL_ALIAS(ncclCommMemStats)

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  GB_NCCL_FORWARD(ncclWinGetUserPtr, comm, win, outUserPtr);
  return refuse("ncclWinGetUserPtr", "gpubridge has no symmetric memory windows");
}
GB_NCCL_ALIAS(ncclWinGetUserPtr)

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                           ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclPutSignal, localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream);
  return refuse("ncclPutSignal", "one-sided puts need symmetric memory windows, which gpubridge has not; use "
                                 "ncclSend and ncclRecv");
}
GB_NCCL_ALIAS(ncclPutSignal)

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclSignal, peer, sigIdx, ctx, flags, comm, stream);
  return refuse("ncclSignal", "one-sided signals are not available through gpubridge; use ncclSend and ncclRecv");
}
GB_NCCL_ALIAS(ncclSignal)

ncclResult_t ncclWaitSignal(int nDesc, void* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclWaitSignal, nDesc, signalDescs, comm, stream);
  return refuse("ncclWaitSignal", "one-sided signals are not available through gpubridge; use ncclSend and ncclRecv");
}
GB_NCCL_ALIAS(ncclWaitSignal)

/* Deprecated in NCCL; gpubridge reads its logging settings once, at its
 * first call, so there is nothing to reload. Returns nothing to refuse with. */
void ncclResetDebugInit(void) {
  static _Atomic(void*) slots[GB_NCCL_FORWARD_SLOTS];
  void* own = gbNcclInternalCall(__builtin_return_address(0), "ncclResetDebugInit", slots);
  if (own) { /* the vendor's own, called from inside it */
    void (*fn)(void);
    memcpy(&fn, &own, sizeof(fn));
    fn();
    return;
  }
  GB_NCCL_INFO("ncclResetDebugInit: gpubridge reads GPUBRIDGE_DEBUG once; nothing reloaded");
}
GB_NCCL_ALIAS(ncclResetDebugInit)
