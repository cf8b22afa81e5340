/* Private to island/rccl: the RCCL types and entry points the island uses,
 * declared from RCCL's public header (ROCm/rccl src/nccl.h.in: RCCL exports
 * NCCL's names and values; no RCCL header is needed to build), and the
 * loader of librccl (loader.c, its own translation unit, never shared with
 * island/nccl: both libraries export the same symbol names). */
#ifndef GB_ISLAND_RCCL_RCCL_H
#define GB_ISLAND_RCCL_RCCL_H

#include <stddef.h>

#include "gpubridge/gpubridge.h"

/* Enums are ints in the C ABI. */
typedef int gbRcclResult_t;   /* ncclResult_t */
typedef int gbRcclDataType_t; /* ncclDataType_t */
typedef int gbRcclRedOp_t;    /* ncclRedOp_t */
typedef struct gbRcclComm* gbRcclComm_t; /* ncclComm_t: opaque */
#define GB_RCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[GB_RCCL_UNIQUE_ID_BYTES];
} gbRcclUniqueId_t; /* ncclUniqueId, passed by value to ncclCommInitRank */

/* ncclResult_t values (RCCL's equal NCCL's). */
enum {
  GB_RCCL_SUCCESS = 0,
  GB_RCCL_UNHANDLED_CUDA_ERROR = 1, /* a HIP call failed inside RCCL */
  GB_RCCL_SYSTEM_ERROR = 2,
  GB_RCCL_INTERNAL_ERROR = 3,
  GB_RCCL_INVALID_ARGUMENT = 4,
  GB_RCCL_INVALID_USAGE = 5,
  GB_RCCL_REMOTE_ERROR = 6,
  GB_RCCL_IN_PROGRESS = 7
};

/* Oldest RCCL accepted: its NCCL base 2.10 (ROCm 5) has bfloat16 and avg. */
#define GB_RCCL_MIN_VERSION 21000

typedef struct {
  void* handle;
  char name[256];       /* what was loaded, for messages */
  int version;          /* ncclGetVersion's code, e.g. 22203 */
  const char* emulated; /* the library exports gbEmulatedRccl (test rig): its text, else NULL */

  gbRcclResult_t (*ncclGetVersion)(int*);
  gbRcclResult_t (*ncclGetUniqueId)(gbRcclUniqueId_t*);
  gbRcclResult_t (*ncclCommInitRank)(gbRcclComm_t*, int, gbRcclUniqueId_t, int);
  gbRcclResult_t (*ncclAllReduce)(const void*, void*, size_t, gbRcclDataType_t, gbRcclRedOp_t, gbRcclComm_t,
                                  void*);
  gbRcclResult_t (*ncclReduce)(const void*, void*, size_t, gbRcclDataType_t, gbRcclRedOp_t, int, gbRcclComm_t,
                               void*);
  gbRcclResult_t (*ncclBroadcast)(const void*, void*, size_t, gbRcclDataType_t, int, gbRcclComm_t, void*);
  gbRcclResult_t (*ncclCommDestroy)(gbRcclComm_t);
  gbRcclResult_t (*ncclCommAbort)(gbRcclComm_t);
  const char* (*ncclGetErrorString)(gbRcclResult_t);
  gbRcclResult_t (*ncclCommGetAsyncError)(gbRcclComm_t, gbRcclResult_t*);
  const char* (*ncclGetLastError)(gbRcclComm_t); /* optional, may be NULL */
} gbRcclApi_t;

/* Loads RCCL once per process: GPUBRIDGE_RCCL_LIBRARY, else librccl.so.1,
 * with RTLD_NOW | RTLD_LOCAL. Later calls return the same table or the same
 * failure (recorded again with gbErrorSet). */
gbResult_t gbIslandRcclLoad(const gbRcclApi_t** out);

/* Translates a failed RCCL call: the gbResult_t matching r, with the call
 * (printf format), RCCL's error string and its last-error text. */
gbResult_t gbIslandRcclFail(const gbRcclApi_t* api, gbRcclComm_t comm, gbRcclResult_t r, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
