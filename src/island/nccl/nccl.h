/* Private to island/nccl: the NCCL types and entry points the island uses,
 * declared from NCCL's public documentation (no NCCL header is needed to
 * build), and the loader of libnccl (loader.c, its own translation unit). */
#ifndef GB_ISLAND_NCCL_NCCL_H
#define GB_ISLAND_NCCL_NCCL_H

#include <stddef.h>

#include "gpubridge/gpubridge.h"

/* Enums are ints in the C ABI. */
typedef int gbNcclResult_t;   /* ncclResult_t */
typedef int gbNcclDataType_t; /* ncclDataType_t */
typedef int gbNcclRedOp_t;    /* ncclRedOp_t */
typedef struct gbNcclComm* gbNcclComm_t; /* ncclComm_t: opaque */
#define GB_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[GB_NCCL_UNIQUE_ID_BYTES];
} gbNcclUniqueId_t; /* ncclUniqueId, passed by value to ncclCommInitRank */

/* ncclResult_t values. */
enum {
  GB_NCCL_SUCCESS = 0,
  GB_NCCL_UNHANDLED_CUDA_ERROR = 1,
  GB_NCCL_SYSTEM_ERROR = 2,
  GB_NCCL_INTERNAL_ERROR = 3,
  GB_NCCL_INVALID_ARGUMENT = 4,
  GB_NCCL_INVALID_USAGE = 5,
  GB_NCCL_REMOTE_ERROR = 6,
  GB_NCCL_IN_PROGRESS = 7
};

/* Oldest NCCL accepted: 2.10 brought bfloat16 and avg. */
#define GB_NCCL_MIN_VERSION 21000

typedef struct {
  void* handle;
  char name[256]; /* what was loaded, for messages */
  int version;    /* ncclGetVersion's code, e.g. 22805 */

  gbNcclResult_t (*ncclGetVersion)(int*);
  gbNcclResult_t (*ncclGetUniqueId)(gbNcclUniqueId_t*);
  gbNcclResult_t (*ncclCommInitRank)(gbNcclComm_t*, int, gbNcclUniqueId_t, int);
  gbNcclResult_t (*ncclAllReduce)(const void*, void*, size_t, gbNcclDataType_t, gbNcclRedOp_t, gbNcclComm_t,
                                  void*);
  gbNcclResult_t (*ncclReduce)(const void*, void*, size_t, gbNcclDataType_t, gbNcclRedOp_t, int, gbNcclComm_t,
                               void*);
  gbNcclResult_t (*ncclBroadcast)(const void*, void*, size_t, gbNcclDataType_t, int, gbNcclComm_t, void*);
  gbNcclResult_t (*ncclCommDestroy)(gbNcclComm_t);
  gbNcclResult_t (*ncclCommAbort)(gbNcclComm_t);
  const char* (*ncclGetErrorString)(gbNcclResult_t);
  gbNcclResult_t (*ncclCommGetAsyncError)(gbNcclComm_t, gbNcclResult_t*);
  const char* (*ncclGetLastError)(gbNcclComm_t); /* optional (NCCL 2.13+), may be NULL */
} gbNcclApi_t;

/* Loads NCCL once per process: GPUBRIDGE_NCCL_LIBRARY, else libnccl.so.2,
 * with RTLD_NOW | RTLD_LOCAL. Later calls return the same table or the same
 * failure (recorded again with gbErrorSet). */
gbResult_t gbIslandNcclLoad(const gbNcclApi_t** out);

/* Translates a failed NCCL call: the gbResult_t matching r, with the call
 * (printf format), NCCL's error string and its last-error text. */
gbResult_t gbIslandNcclFail(const gbNcclApi_t* api, gbNcclComm_t comm, gbNcclResult_t r, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
