/* Every nccl* function libgpubridge-nccl exports: NCCL's public C API of
 * 2.18 .. 2.28, plus refusals for calls up to 2.30 that take a
 * communicator (so none of them reaches the real library with a gpubridge
 * handle). Each also has NCCL's profiling alias pnccl*. The library is
 * built with hidden visibility: only what is declared GB_NCCL_API here is
 * exported. */
#ifndef GB_ABI_NCCL_EXPORTS_H
#define GB_ABI_NCCL_EXPORTS_H

#include "nccl_types.h"

#define GB_NCCL_API __attribute__((visibility("default")))
/* NCCL exports pnccl<Name> next to every nccl<Name> (its profiling
 * interface); a tool that calls those must reach gpubridge too. */
#define GB_NCCL_ALIAS(name) \
  GB_NCCL_API __typeof__(name) p##name __attribute__((alias(#name)));

/* version, ids, errors */
GB_NCCL_API ncclResult_t ncclGetVersion(int* version);
GB_NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
GB_NCCL_API const char* ncclGetErrorString(ncclResult_t result);
GB_NCCL_API const char* ncclGetLastError(ncclComm_t comm);
GB_NCCL_API void ncclResetDebugInit(void);

/* communicators */
GB_NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
GB_NCCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t* config);
GB_NCCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId* commIds, ncclConfig_t* config);
GB_NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
GB_NCCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config);
GB_NCCL_API ncclResult_t ncclCommFinalize(ncclComm_t comm);
GB_NCCL_API ncclResult_t ncclCommDestroy(ncclComm_t comm);
GB_NCCL_API ncclResult_t ncclCommAbort(ncclComm_t comm);
GB_NCCL_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
GB_NCCL_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
GB_NCCL_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
GB_NCCL_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

/* memory, registration, ops */
GB_NCCL_API ncclResult_t ncclMemAlloc(void** ptr, size_t size);
GB_NCCL_API ncclResult_t ncclMemFree(void* ptr);
GB_NCCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
GB_NCCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
GB_NCCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm);
GB_NCCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* collectives */
GB_NCCL_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream);

/* point to point and groups */
GB_NCCL_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclGroupStart(void);
GB_NCCL_API ncclResult_t ncclGroupEnd(void);

/* refused (refused.c): each returns ncclInvalidUsage with a text naming it */
GB_NCCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
GB_NCCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                int winFlags);
GB_NCCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
GB_NCCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
GB_NCCL_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
GB_NCCL_API ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* devComm);
GB_NCCL_API ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);
/* after 2.28; refused so that a gpubridge handle never reaches the real library */
GB_NCCL_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
GB_NCCL_API ncclResult_t ncclCommResume(ncclComm_t comm);
GB_NCCL_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                      ncclComm_t* newcomm, ncclConfig_t* config);
GB_NCCL_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
GB_NCCL_API ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, unsigned long long* value);
GB_NCCL_API ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
GB_NCCL_API ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                       ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                       unsigned int flags, ncclComm_t comm, cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                    cudaStream_t stream);
GB_NCCL_API ncclResult_t ncclWaitSignal(int nDesc, void* signalDescs, ncclComm_t comm, cudaStream_t stream);

#endif
