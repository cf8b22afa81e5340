/* Private to island/: an island over a library with NCCL's API (NCCL, or
 * RCCL, which keeps NCCL's names, signatures and enum values). The types and
 * entry points are declared from NCCL's public documentation, so no vendor
 * header is needed to build. island/nccl and island/rccl each load their own
 * library into a gbVendorApi_t (each in its own translation unit, never
 * both in one: they export the same symbol names) and describe themselves
 * with a gbVendorDesc_t; everything else (the agreement, the collectives,
 * error translation) is vendor.c. */
#ifndef GB_ISLAND_VENDOR_VENDOR_H
#define GB_ISLAND_VENDOR_VENDOR_H

#include <stddef.h>

#include "gpubridge/gpubridge.h"
#include "island/island.h"

/* Enums are ints in the C ABI. */
typedef int gbVendorResult_t;   /* ncclResult_t */
typedef int gbVendorDataType_t; /* ncclDataType_t */
typedef int gbVendorRedOp_t;    /* ncclRedOp_t */
typedef struct gbVendorComm* gbVendorComm_t; /* ncclComm_t: opaque */
#define GB_VENDOR_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[GB_VENDOR_UNIQUE_ID_BYTES];
} gbVendorUniqueId_t; /* ncclUniqueId, passed by value to ncclCommInitRank */

/* ncclResult_t values (RCCL's equal NCCL's). */
enum {
  GB_VENDOR_SUCCESS = 0,
  GB_VENDOR_UNHANDLED_CUDA_ERROR = 1, /* a CUDA (RCCL: HIP) call failed inside the library */
  GB_VENDOR_SYSTEM_ERROR = 2,
  GB_VENDOR_INTERNAL_ERROR = 3,
  GB_VENDOR_INVALID_ARGUMENT = 4,
  GB_VENDOR_INVALID_USAGE = 5,
  GB_VENDOR_REMOTE_ERROR = 6,
  GB_VENDOR_IN_PROGRESS = 7
};

/* Oldest accepted: NCCL 2.10 brought bfloat16 and avg (RCCL: its NCCL base
 * 2.10, ROCm 5). */
#define GB_VENDOR_MIN_VERSION 21000

/* The required entry points, for the loaders' symbol tables (X-macro). */
#define GB_VENDOR_REQUIRED_SYMS(X)                                                                             \
  X(ncclGetVersion), X(ncclGetUniqueId), X(ncclCommInitRank), X(ncclAllReduce), X(ncclReduce), X(ncclBroadcast), \
      X(ncclCommDestroy), X(ncclCommAbort), X(ncclGetErrorString), X(ncclCommGetAsyncError)

typedef struct {
  void* handle;
  char name[256];       /* what was loaded, for messages */
  int version;          /* ncclGetVersion's code, e.g. 22805 */
  const char* emulated; /* RCCL only: the library exports gbEmulatedRccl (test rig): its text, else NULL */

  gbVendorResult_t (*ncclGetVersion)(int*);
  gbVendorResult_t (*ncclGetUniqueId)(gbVendorUniqueId_t*);
  gbVendorResult_t (*ncclCommInitRank)(gbVendorComm_t*, int, gbVendorUniqueId_t, int);
  gbVendorResult_t (*ncclAllReduce)(const void*, void*, size_t, gbVendorDataType_t, gbVendorRedOp_t,
                                    gbVendorComm_t, void*);
  gbVendorResult_t (*ncclReduce)(const void*, void*, size_t, gbVendorDataType_t, gbVendorRedOp_t, int,
                                 gbVendorComm_t, void*);
  gbVendorResult_t (*ncclBroadcast)(const void*, void*, size_t, gbVendorDataType_t, int, gbVendorComm_t, void*);
  gbVendorResult_t (*ncclCommDestroy)(gbVendorComm_t);
  gbVendorResult_t (*ncclCommAbort)(gbVendorComm_t);
  const char* (*ncclGetErrorString)(gbVendorResult_t);
  gbVendorResult_t (*ncclCommGetAsyncError)(gbVendorComm_t, gbVendorResult_t*);
  const char* (*ncclGetLastError)(gbVendorComm_t); /* optional (NCCL 2.13+), may be NULL */
} gbVendorApi_t;

/* What differs between the NCCL and the RCCL island: names for messages,
 * the loader, and how to make the device's GPU current. */
typedef struct {
  const char* opsName; /* gbIslandOps_t name: "nccl", "rccl" */
  const char* label;   /* the library in messages: "NCCL", "RCCL" */
  const char* callTag; /* "" for NCCL; else added to nccl* call names: "ncclReduce (RCCL)" */
  const char* kind;    /* the island's vendor in messages: "NVIDIA", "AMD" */
  const char* device;  /* gbDeviceOps name whose GPU makeCurrent selects: "cuda", "hip" */
  gbResult_t (*makeCurrent)(void);
  /* Loads the library once per process, in the vendor's translation unit. */
  gbResult_t (*load)(const gbVendorApi_t** out);
} gbVendorDesc_t;

/* "2.28.5" from 22805 (2.9 and later) or 2704 (before). */
void gbIslandVendorVersionText(int code, char* buf, size_t len);

/* The island over desc's library: collective over group (connected; borrowed
 * until destroy), which carries only the agreement and the unique id. dev
 * must be a real GPU. See island.h (gbIslandNcclCreate, gbIslandRcclCreate). */
gbResult_t gbIslandVendorCreate(const gbVendorDesc_t* desc, gbAlgoGroup_t* group, const gbDeviceOps* dev,
                                gbIslandErrorFn_t onError, void* errCtx, gbIsland_t** out);

#endif
