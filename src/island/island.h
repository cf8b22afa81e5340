/* Native collectives of one vendor island behind one ops table: nccl/ and
 * rccl/ (real GPUs, dlopen'd), host/ (over algo/, for simulated and CPU
 * islands). Roots are island-local indices. Calls enqueue on the stream. */
#ifndef GB_ISLAND_ISLAND_H
#define GB_ISLAND_ISLAND_H

#include <stddef.h>
#include "gpubridge/gpubridge.h"
#include "algo/algo.h"
#include "device/device.h"

typedef struct gbIsland gbIsland_t;

/* One send or receive of a fused group; peer is an island-local index. */
typedef struct {
  int peer;
  int isSend;
  void* buf;   /* const for a send */
  size_t count;
  gbDataType_t dt;
} gbIslandP2p_t;

/* *overlap = whether a send of the list reads bytes a receive of it writes
 * (an in-place all-to-all): then the island sends from a copy taken before
 * the group starts, since nothing orders a group's entries (overlap.c). */
gbResult_t gbIslandP2pOverlap(const gbIslandP2p_t* ops, int nops, int* overlap);

/* Called (from a stream's host thread) when island work fails. */
typedef void (*gbIslandErrorFn_t)(void* ctx, gbResult_t res);

typedef struct gbIslandOps {
  const char* name; /* "host", "nccl", "rccl" */
  /* op may be avg: the island divides by its own size. */
  gbResult_t (*allReduce)(gbIsland_t* is, const void* send, void* recv, size_t count,
                          gbDataType_t dt, gbRedOp_t op, void* stream);
  /* op is sum, prod, max or min. recv matters on root only. */
  gbResult_t (*reduce)(gbIsland_t* is, const void* send, void* recv, size_t count,
                       gbDataType_t dt, gbRedOp_t op, int root, void* stream);
  gbResult_t (*broadcast)(gbIsland_t* is, const void* send, void* recv, size_t count,
                          gbDataType_t dt, int root, void* stream);
  /* recv[i*count ..] = member i's send (count elements each). */
  gbResult_t (*allGather)(gbIsland_t* is, const void* send, void* recv, size_t count,
                          gbDataType_t dt, void* stream);
  /* recv (count elements) = op over members of send[index*count ..]. op as
   * allReduce's (avg divides by the island's size). */
  gbResult_t (*reduceScatter)(gbIsland_t* is, const void* send, void* recv, size_t count,
                              gbDataType_t dt, gbRedOp_t op, void* stream);
  /* A fused group of sends and receives (all-to-all is one): all progress
   * together; per peer and direction they match in list order. Sends carry
   * the data their buffers held when the group was enqueued, also where a
   * receive of the same group overwrites it (an in-place all-to-all). */
  gbResult_t (*sendRecv)(gbIsland_t* is, const gbIslandP2p_t* ops, int nops, void* stream);
  /* An island op summing scalar * x (see gbRedOpCreatePreMulSum), usable as
   * the op of allReduce, reduce and reduceScatter until redOpDestroy. */
  gbResult_t (*preMulSumCreate)(gbIsland_t* is, void* scalar, gbDataType_t dt,
                                gbScalarResidence_t residence, gbRedOp_t* op);
  gbResult_t (*redOpDestroy)(gbIsland_t* is, gbRedOp_t op);
  /* Ends the island's pending work at once after a failure or gbCommAbort,
   * without freeing it (stream work may still point into it); destroy
   * follows once the streams drained. NULL where the abort flag is enough. */
  void (*abort)(gbIsland_t* is);
  void (*destroy)(gbIsland_t* is);
} gbIslandOps_t;

struct gbIsland {
  const gbIslandOps_t* ops;
  int size;   /* members */
  int index;  /* my island-local index */
  void* impl;
};

/* The island for dev, looked up by its runtime: NCCL on a real CUDA GPU,
 * RCCL on a real HIP GPU (the emulated-AMD rig's too), else the host island
 * (simulated, CPU, or a GPU that could not be opened). Arguments as the
 * creators' below (island.c). */
gbResult_t gbIslandCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* errCtx,
                          gbIsland_t** out);

/* A host island over group (which it borrows; the caller keeps it alive).
 * Work runs as host functions on the device's streams; failures go to onError. */
gbResult_t gbIslandHostCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev,
                              gbIslandErrorFn_t onError, void* errCtx, gbIsland_t** out);

/* An NVIDIA island over NCCL (dlopen'd: GPUBRIDGE_NCCL_LIBRARY, else
 * libnccl.so.2). Collective over group (connected; borrowed until destroy),
 * which carries only the agreement and the NCCL id. dev must be a real GPU.
 * Calls enqueue NCCL work on the caller's stream; destroy waits for it
 * (ncclCommDestroy), or aborts it after a failure or an abort. */
gbResult_t gbIslandNcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev,
                              gbIslandErrorFn_t onError, void* errCtx, gbIsland_t** out);

/* An AMD island over RCCL (dlopen'd: GPUBRIDGE_RCCL_LIBRARY, else
 * librccl.so.1, RTLD_LOCAL, so its nccl* symbols never meet NCCL's).
 * Collective over group (connected; borrowed until destroy), which carries
 * only the agreement and the RCCL id. dev must be a real GPU (the hip device).
 * Calls enqueue RCCL work on the caller's stream; destroy waits for it
 * (ncclCommDestroy), or aborts it after a failure or an abort. */
gbResult_t gbIslandRcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev,
                              gbIslandErrorFn_t onError, void* errCtx, gbIsland_t** out);

#endif
