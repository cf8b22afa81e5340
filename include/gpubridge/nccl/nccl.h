/* NCCL's C API as gpubridge's drop-in, libgpubridge-nccl.so, serves it
 * (docs/DROP_IN.md): the types, values and functions of NCCL 2.18 .. 2.28's
 * nccl.h, declared from NCCL's documentation, so that a program written for
 * NCCL builds where no NCCL is installed (a machine without GPUs, simulated
 * islands) and runs over gpubridge:
 *
 *   cc app.c $(pkg-config --cflags --libs gpubridge-nccl)      (#include <nccl.h>)
 *
 * pkg-config puts this folder, include/gpubridge/nccl, on the include path.
 * Calls past 2.28 are declared too: gpubridge refuses them with
 * ncclInvalidUsage and a text naming the call. Streams are void* underneath:
 * a cudaStream_t, a hipStream_t or a stream made by gbStreamCreate. */
#ifndef GB_NCCL_H
#define GB_NCCL_H

#include <stddef.h>

/* The NCCL version whose API this header declares. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_SUFFIX ""
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

/* libgpubridge-nccl.so builds with this set to default visibility. */
#ifndef GB_NCCL_API
#define GB_NCCL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The communicator handle programs hold; the struct is libgpubridge-nccl's
 * own (abi.h), programs only pass the pointer around. */
typedef struct ncclComm* ncclComm_t;
/* Opaque handles of calls gpubridge refuses; never dereferenced. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct ncclSimInfo ncclSimInfo_t;
/* cudaStream_t or hipStream_t: passed through to gpubridge as void*. */
typedef struct CUstream_st* cudaStream_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8, /* as NCCL 2.28 counts them */
  ncclTimeout = 8     /* NCCL 2.30 and later only: libgpubridge-nccl returns it only to such callers */
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, /* NCCL 2.24 and later; gpubridge's gbFloat8e4m3 (e4m3 saturates at 448) */
  ncclFloat8e5m2 = 11, /* gbFloat8e5m2 */
  ncclNumTypes = 12,
  /* NCCL's other names for the same types */
  ncclChar = 0,
  ncclInt = 2,
  ncclHalf = 6,
  ncclFloat = 7,
  ncclDouble = 8
} ncclDataType_t;

/* Values from ncclNumOps up are dynamic ops (ncclRedOpCreatePreMulSum). */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

#define NCCL_SPLIT_NOCOLOR (-1)
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define NCCL_CONFIG_UNDEF_PTR NULL
/* ncclConfig_t.CTAPolicy (2.27; ZERO 2.28), ncclCommShrink's flags and
 * ncclCommWindowRegister's flags (2.27): gpubridge ignores or refuses the
 * calls and fields that take them (docs/DROP_IN.md), and declares them so
 * that programs using them build. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01

/* ncclConfig_t as NCCL 2.28 lays it out. NCCL only ever appends fields, and
 * every caller's struct starts with size, magic and version, so a field is
 * read only when the caller's size covers it (config.c). The version in
 * which each field appeared, from NCCL's documentation:
 *   2.14 blocking; 2.17 cgaClusterSize, minCTAs, maxCTAs, netName;
 *   2.18 splitShare (48 bytes, the size through 2.25); 2.26 trafficClass
 *   (still 48 bytes); 2.27 commName, collnetEnable, CTAPolicy, shrinkShare,
 *   nvlsCTAs (72 bytes); 2.28 nChannelsPerNetPeer, nvlinkCentricSched
 *   (80 bytes). Later versions append more; those fields are not read. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

/* ncclConfig_t with every field unset, as NCCL's initializer makes it. */
#define NCCL_CONFIG_INITIALIZER                                                                            \
  {                                                                                                        \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),               \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT            \
  }

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

#ifdef __cplusplus
}
#endif

#endif
