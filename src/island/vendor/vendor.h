/* Private to island/: an island over a library with NCCL's API (NCCL, or
 * RCCL, which keeps NCCL's names, signatures and enum values). The types and
 * entry points are declared from NCCL's public documentation, so no vendor
 * header is needed to build. island/nccl and island/rccl each load their own
 * library into a gbVendorApi_t (each in its own translation unit, never
 * both in one: they export the same symbol names) and describe themselves
 * with a gbVendorDesc_t; everything else is vendor.c (the agreement, error
 * translation, teardown) and coll.c (the collectives, send/recv groups,
 * PreMulSum ops). */
#ifndef GB_ISLAND_VENDOR_VENDOR_H
#define GB_ISLAND_VENDOR_VENDOR_H

#include <pthread.h>
#include <stdatomic.h>
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
  GB_VENDOR_IN_PROGRESS = 7,
  GB_VENDOR_TIMEOUT = 8 /* NCCL 2.30 and later */
};

/* Oldest accepted: NCCL 2.10 brought bfloat16 and avg (RCCL: its NCCL base
 * 2.10, ROCm 5). Everything it has is required, including ncclSend, ncclRecv
 * and ncclGroupStart/End (2.7). */
#define GB_VENDOR_MIN_VERSION 21000
/* ncclRedOpCreatePreMulSum and ncclRedOpDestroy came with 2.11: optional
 * (GB_VENDOR_PREMULSUM_SYMS), so a 2.10 library still runs every other
 * collective; preMulSumCreate fails there with gbInvalidUsage, naming the
 * symbol, the library and its version. */

/* ncclScalarResidence_t values; gbScalarResidence_t's are the same numbers,
 * but island/vendor maps them by name (coll.c). */
typedef int gbVendorScalarResidence_t;
enum { GB_VENDOR_SCALAR_DEVICE = 0, GB_VENDOR_SCALAR_HOST_IMMEDIATE = 1 };

/* The required entry points, for the loaders' symbol tables (X-macro). */
#define GB_VENDOR_REQUIRED_SYMS(X)                                                                             \
  X(ncclGetVersion), X(ncclGetUniqueId), X(ncclCommInitRank), X(ncclAllReduce), X(ncclReduce), X(ncclBroadcast), \
      X(ncclAllGather), X(ncclReduceScatter), X(ncclSend), X(ncclRecv), X(ncclGroupStart), X(ncclGroupEnd),      \
      X(ncclCommDestroy), X(ncclCommAbort), X(ncclGetErrorString), X(ncclCommGetAsyncError)

/* Optional entry points that come as a pair (2.11+): a loader binds both or
 * leaves both NULL. */
#define GB_VENDOR_PREMULSUM_SYMS(X) X(ncclRedOpCreatePreMulSum), X(ncclRedOpDestroy)

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
  /* (send, recv, sendcount, dt, comm, stream) */
  gbVendorResult_t (*ncclAllGather)(const void*, void*, size_t, gbVendorDataType_t, gbVendorComm_t, void*);
  /* (send, recv, recvcount, dt, op, comm, stream) */
  gbVendorResult_t (*ncclReduceScatter)(const void*, void*, size_t, gbVendorDataType_t, gbVendorRedOp_t,
                                        gbVendorComm_t, void*);
  /* (buf, count, dt, peer, comm, stream) */
  gbVendorResult_t (*ncclSend)(const void*, size_t, gbVendorDataType_t, int, gbVendorComm_t, void*);
  gbVendorResult_t (*ncclRecv)(void*, size_t, gbVendorDataType_t, int, gbVendorComm_t, void*);
  gbVendorResult_t (*ncclGroupStart)(void);
  gbVendorResult_t (*ncclGroupEnd)(void);
  gbVendorResult_t (*ncclCommDestroy)(gbVendorComm_t);
  gbVendorResult_t (*ncclCommAbort)(gbVendorComm_t);
  const char* (*ncclGetErrorString)(gbVendorResult_t);
  gbVendorResult_t (*ncclCommGetAsyncError)(gbVendorComm_t, gbVendorResult_t*);
  const char* (*ncclGetLastError)(gbVendorComm_t); /* optional (NCCL 2.13+), may be NULL */
  /* Optional pair (2.11+), both NULL when the library lacks either.
   * (op out, scalar, dt, residence, comm) */
  gbVendorResult_t (*ncclRedOpCreatePreMulSum)(gbVendorRedOp_t*, void*, gbVendorDataType_t,
                                               gbVendorScalarResidence_t, gbVendorComm_t);
  gbVendorResult_t (*ncclRedOpDestroy)(gbVendorRedOp_t, gbVendorComm_t);
} gbVendorApi_t;

/* What differs between the NCCL and the RCCL island: names for messages,
 * the loader, and how to make the device's GPU current. */
typedef struct {
  const char* opsName; /* gbIslandOps_t name: "nccl", "rccl" */
  const char* label;   /* the library in messages: "NCCL", "RCCL" */
  const char* callTag; /* "" for NCCL; else added to nccl* call names: "ncclReduce (RCCL)" */
  const char* kind;    /* the island's vendor in messages: "NVIDIA", "AMD" */
  int runtime;         /* gbDeviceOps runtime whose GPU makeCurrent selects: GB_DEVICE_RUNTIME_CUDA, _HIP */
  const char* libraryEnv; /* where a user names another library: "GPUBRIDGE_NCCL_LIBRARY" */
  gbResult_t (*makeCurrent)(void);
  /* Loads the library once per process, in the vendor's translation unit. */
  gbResult_t (*load)(const gbVendorApi_t** out);
} gbVendorDesc_t;

/* The library a loader loads, and what its messages say. */
typedef struct {
  const char* label;          /* "NCCL", "RCCL" */
  const char* env;            /* "GPUBRIDGE_NCCL_LIBRARY": where a user names another */
  const char* named;          /* its value; "" when unset */
  const char* defaultName;    /* "libnccl.so.2": loaded when named is "" */
  const char* installHint;    /* what to install when it does not load: "NCCL 2.10 or newer" */
  const char* updateHint;     /* when it is older than 2.10: "update NCCL" */
  const char* emulatedMarker; /* a test rig's marker symbol ("gbEmulatedRccl"), or NULL */
  const char* emulatedLabel;  /* api->emulated when the marker's text is empty */
} gbVendorLibrary_t;

/* load.c: dlopen (RTLD_NOW | RTLD_LOCAL) of lib into api, with the required
 * symbols, the optional ones and a version of 2.10 or newer. On failure api
 * is cleared (the library closed) and err says why. */
gbResult_t gbIslandVendorLoad(const gbVendorLibrary_t* lib, gbVendorApi_t* api, char* err, size_t errLen);

/* A loader's library, loaded once per process: one in each vendor's
 * translation unit, initialised with GB_VENDOR_LOADED_INIT. */
typedef struct {
  pthread_once_t once;
  gbVendorApi_t api;
  gbResult_t result;
  char error[768];
} gbVendorLoaded_t;
#define GB_VENDOR_LOADED_INIT {.once = PTHREAD_ONCE_INIT, .result = gbSuccess}

/* load.c: runs load (which fills l with gbIslandVendorLoad) once per
 * process; every call returns the same table or the same failure (recorded
 * again). */
gbResult_t gbIslandVendorLoadOnce(gbVendorLoaded_t* l, void (*load)(void), const gbVendorApi_t** out);

/* "2.28.5" from 22805 (2.9 and later) or 2704 (before). */
void gbIslandVendorVersionText(int code, char* buf, size_t len);

/* The island over desc's library: collective over group (connected; borrowed
 * until destroy), which carries only the agreement and the unique id. dev
 * must be a real GPU. See island.h (gbIslandNcclCreate, gbIslandRcclCreate). */
gbResult_t gbIslandVendorCreate(const gbVendorDesc_t* desc, gbAlgoGroup_t* group, const gbDeviceOps* dev,
                                gbIslandErrorFn_t onError, void* errCtx, gbIsland_t** out);

/* ---- Between vendor.c (creation, errors, teardown) and coll.c (the calls) */

/* A device copy of a group's sends (stage.c). */
typedef struct gbVendorStage gbVendorStage_t;

/* A PreMulSum op this island created and has not destroyed. */
typedef struct {
  gbVendorRedOp_t op;
  gbDataType_t dt;
} gbVendorUserOp_t;

typedef struct {
  gbIsland_t island;
  gbIslandOps_t ops; /* the shared ops under desc->opsName */
  const gbVendorDesc_t* desc;
  const gbVendorApi_t* api;
  gbVendorComm_t comm;
  gbAlgoGroup_t* group;
  const gbDeviceOps* dev;
  int onGpu; /* dev is desc->device: make its GPU current before library calls */
  gbIslandErrorFn_t onError;
  void* errCtx;
  atomic_int failed; /* first failure: later calls fail instead of hanging peers */
  pthread_mutex_t userOpsLock; /* over userOps and stages: callers may use any thread */
  gbVendorUserOp_t* userOps;
  int nUserOps, capUserOps;
  gbVendorStage_t* stages; /* copies of sends, reused once their stream is past them */
} gbVendorIsland_t;

/* The group's name for messages ("island" when it has none). */
const char* gbIslandVendorGroupName(const gbVendorIsland_t* vi);
/* " (RCCL)" after an nccl* call name when the library is not NCCL: three %s. */
#define GB_VENDOR_TAG(vi) \
  (vi)->desc->callTag[0] ? " (" : "", (vi)->desc->callTag, (vi)->desc->callTag[0] ? ")" : ""

/* Records a failed library call (fmt names it): the gbResult_t matching r
 * (translated, never cast), with the library's error string, its
 * last-error text and what to do. */
gbResult_t gbIslandVendorCallFailed(const gbVendorIsland_t* vi, gbVendorComm_t comm, gbVendorResult_t r,
                                    const char* fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same for a call whose failure leaves the island unusable (enqueued
 * work, a group): marks it failed and says so. */
gbResult_t gbIslandVendorCallFatal(gbVendorIsland_t* vi, gbVendorResult_t r, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Keeps the first failure: later calls fail at once (ready). */
void gbIslandVendorMarkFailed(gbVendorIsland_t* vi, gbResult_t res);
/* Before a library call: no earlier failure (ours or the library's
 * asynchronous one) and the island's GPU current on this thread. */
gbResult_t gbIslandVendorReady(gbVendorIsland_t* vi, const char* what);
gbResult_t gbIslandVendorMakeCurrent(const gbVendorIsland_t* vi);

/* coll.c: fills the collective entries of ops (allReduce .. redOpDestroy). */
void gbIslandVendorCollOps(gbIslandOps_t* ops);
/* coll.c: forgets the PreMulSum ops still recorded (the communicator goes
 * with them) and frees their table. */
void gbIslandVendorUserOpsFree(gbVendorIsland_t* vi);

/* stage.c: copies the sends of ops (which overlap its receives) to a device
 * buffer on stream and points their entries there; *out (NULL when nothing
 * is sent) is released after the group with gbIslandVendorStageRelease,
 * also when this fails. */
gbResult_t gbIslandVendorStageSends(gbVendorIsland_t* vi, gbIslandP2p_t* ops, int nops, void* stream,
                                    gbVendorStage_t** out);
/* The stream marks the copy free once past the group that read it. */
gbResult_t gbIslandVendorStageRelease(gbVendorIsland_t* vi, gbVendorStage_t* s, void* stream);
/* At teardown, once the streams drained. */
void gbIslandVendorStagesFree(gbVendorIsland_t* vi);

#endif
