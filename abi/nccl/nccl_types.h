/* NCCL's public C types, declared from NCCL's documentation (no NCCL header
 * is needed to build libgpubridge-nccl). Values and layouts are ABI: they
 * must equal what a program compiled against nccl.h 2.18 .. 2.28 passes. */
#ifndef GB_ABI_NCCL_TYPES_H
#define GB_ABI_NCCL_TYPES_H

#include <stddef.h>

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
  ncclTimeout = 8 /* NCCL 2.30 and later only: see error.c for who receives it */
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
  ncclFloat8e4m3 = 10, /* NCCL 2.24 and later; gpubridge refuses both fp8 types */
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
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

#endif
