/* The NCCL island: an NVIDIA island's native collectives are NCCL calls on
 * the caller's stream. gpubridge's data types and reduction ops have NCCL's
 * values, so each call maps 1:1 (after a range check).
 *
 * Creation, collective over the island's host group (already connected):
 *  1. every member loads NCCL; member 0 (the leader) makes the ncclUniqueId;
 *  2. the members agree that every one of them is ready (one all-reduce of
 *     a flag), so a member without NCCL fails the whole island at once
 *     instead of leaving the others inside ncclCommInitRank;
 *  3. the leader broadcasts the id's 128 bytes; ncclCommInitRank(size, id, me).
 * A failed island is aborted rather than destroyed (ncclCommAbort), and so is
 * one whose communicator was aborted (the group's abort flag). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/result.h"
#include "device/cuda/cuda.h"
#include "island/island.h"
#include "island/nccl/nccl.h"

typedef struct {
  gbIsland_t island;
  const gbNcclApi_t* api;
  gbNcclComm_t comm;
  gbAlgoGroup_t* group;
  const gbDeviceOps* dev;
  int onCuda; /* dev is device/cuda: make its GPU current before NCCL calls */
  gbIslandErrorFn_t onError;
  void* errCtx;
  int failed; /* first failure (atomic): later calls fail instead of hanging peers */
} ncclIsland_t;

static const char* groupName(const ncclIsland_t* ni) { return ni->group->name ? ni->group->name : "island"; }

static void markFailed(ncclIsland_t* ni, gbResult_t res) {
  int none = gbSuccess;
  __atomic_compare_exchange_n(&ni->failed, &none, (int)res, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static gbResult_t makeCurrent(const ncclIsland_t* ni) { return ni->onCuda ? gbDeviceCudaMakeCurrent() : gbSuccess; }

/* Before each call: the GPU current on this thread, and no earlier failure,
 * ours or NCCL's asynchronous one (a peer gone, a network error). */
static gbResult_t ready(ncclIsland_t* ni, const char* what) {
  int earlier = __atomic_load_n(&ni->failed, __ATOMIC_ACQUIRE);
  if (earlier != gbSuccess)
    return gbErrorSet((gbResult_t)earlier,
                      "%s %s skipped: an earlier NCCL call on this island failed (%s); destroy the "
                      "communicator and create a new one",
                      groupName(ni), what, gbResultString((gbResult_t)earlier));
  GB_CHECK(makeCurrent(ni));
  gbNcclResult_t async = GB_NCCL_SUCCESS;
  gbNcclResult_t r = ni->api->ncclCommGetAsyncError(ni->comm, &async);
  if (r != GB_NCCL_SUCCESS) {
    gbResult_t res = gbIslandNcclFail(ni->api, ni->comm, r, "%s: ncclCommGetAsyncError", groupName(ni));
    markFailed(ni, res);
    return res;
  }
  if (async != GB_NCCL_SUCCESS && async != GB_NCCL_IN_PROGRESS) {
    gbResult_t res = gbIslandNcclFail(ni->api, ni->comm, async, "%s: an earlier NCCL collective (asynchronous error)",
                                      groupName(ni));
    markFailed(ni, res);
    if (ni->onError) ni->onError(ni->errCtx, res);
    return res;
  }
  return gbSuccess;
}

static gbResult_t checkArgs(const ncclIsland_t* ni, const char* what, gbDataType_t dt, gbRedOp_t op, int useOp,
                            int root, int useRoot) {
  if ((int)dt < 0 || dt >= gbNumTypes || gbDtypeSize(dt) == 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown data type %d; use a gbDataType_t", groupName(ni), what,
                      (int)dt);
  if (useOp && ((int)op < 0 || op >= gbNumOps))
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown reduction op %d; use a gbRedOp_t", groupName(ni), what,
                      (int)op);
  if (useRoot && (root < 0 || root >= ni->island.size))
    return gbErrorSet(gbInvalidArgument, "%s %s: root %d is not an island member (0..%d)", groupName(ni), what,
                      root, ni->island.size - 1);
  return gbSuccess;
}

/* gbDataType_t and gbRedOp_t values equal NCCL's (checked above for range). */
static gbNcclDataType_t ncclType(gbDataType_t dt) { return (gbNcclDataType_t)dt; }
static gbNcclRedOp_t ncclOp(gbRedOp_t op) { return (gbNcclRedOp_t)op; }

static gbResult_t done(ncclIsland_t* ni, gbNcclResult_t r, const char* what, size_t count, gbDataType_t dt,
                       void* stream) {
  if (r == GB_NCCL_SUCCESS) return gbSuccess;
  gbResult_t res = gbIslandNcclFail(ni->api, ni->comm, r, "%s %s of %zu x %s on stream %p", groupName(ni), what,
                                    count, gbDtypeName(dt), stream);
  markFailed(ni, res);
  return res;
}

static gbResult_t allReduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            gbRedOp_t op, void* stream) {
  ncclIsland_t* ni = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(ni, "all-reduce", dt, op, 1, 0, 0));
  GB_CHECK(ready(ni, "all-reduce"));
  gbNcclResult_t r = ni->api->ncclAllReduce(send, recv, count, ncclType(dt), ncclOp(op), ni->comm, stream);
  return done(ni, r, "ncclAllReduce", count, dt, stream);
}

static gbResult_t reduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                         gbRedOp_t op, int root, void* stream) {
  ncclIsland_t* ni = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(ni, "reduce", dt, op, 1, root, 1));
  GB_CHECK(ready(ni, "reduce"));
  gbNcclResult_t r = ni->api->ncclReduce(send, recv, count, ncclType(dt), ncclOp(op), root, ni->comm, stream);
  return done(ni, r, "ncclReduce", count, dt, stream);
}

static gbResult_t broadcast(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            int root, void* stream) {
  ncclIsland_t* ni = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(ni, "broadcast", dt, gbSum, 0, root, 1));
  GB_CHECK(ready(ni, "broadcast"));
  gbNcclResult_t r = ni->api->ncclBroadcast(send, recv, count, ncclType(dt), root, ni->comm, stream);
  return done(ni, r, "ncclBroadcast", count, dt, stream);
}

/* Destroy flushes and waits for the island's work; abort does not wait, which
 * is what a failed or aborted communicator needs (peers may be gone). */
static void destroy(gbIsland_t* is) {
  if (is == NULL) return;
  ncclIsland_t* ni = is->impl;
  if (ni->comm != NULL) {
    (void)makeCurrent(ni);
    int aborted = __atomic_load_n(&ni->failed, __ATOMIC_ACQUIRE) != gbSuccess ||
                  (ni->group->abortFlag && __atomic_load_n(ni->group->abortFlag, __ATOMIC_ACQUIRE));
    gbNcclResult_t async = GB_NCCL_SUCCESS;
    if (!aborted && ni->api->ncclCommGetAsyncError(ni->comm, &async) == GB_NCCL_SUCCESS &&
        async != GB_NCCL_SUCCESS && async != GB_NCCL_IN_PROGRESS)
      aborted = 1;
    gbNcclResult_t r = aborted ? ni->api->ncclCommAbort(ni->comm) : ni->api->ncclCommDestroy(ni->comm);
    if (r != GB_NCCL_SUCCESS)
      (void)gbIslandNcclFail(ni->api, ni->comm, r, "%s: %s", groupName(ni),
                             aborted ? "ncclCommAbort" : "ncclCommDestroy");
    else
      GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s: NCCL communicator %s", groupName(ni),
              aborted ? "aborted" : "destroyed");
  }
  free(ni);
}

static const gbIslandOps_t ncclIslandOps = {
    .name = "nccl",
    .allReduce = allReduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .destroy = destroy,
};

/* Steps 1-3 of the file comment; on success ni->comm is set. */
static gbResult_t join(ncclIsland_t* ni) {
  gbAlgoGroup_t* g = ni->group;
  gbNcclUniqueId_t id;
  memset(&id, 0, sizeof(id));
  gbResult_t mine = gbIslandNcclLoad(&ni->api);
  if (mine == gbSuccess) mine = makeCurrent(ni);
  if (mine == gbSuccess && g->me == 0) {
    gbNcclResult_t r = ni->api->ncclGetUniqueId(&id);
    if (r != GB_NCCL_SUCCESS) mine = gbIslandNcclFail(ni->api, NULL, r, "%s: ncclGetUniqueId", groupName(ni));
  }
  int32_t okAll = mine == gbSuccess ? 1 : 0;
  GB_CHECK(gbAlgoAllReduce(g, &okAll, &okAll, 1, gbInt32, gbMin, 0));
  if (mine != gbSuccess) return mine; /* already recorded with its cause */
  if (!okAll)
    return gbErrorSet(gbRemoteError,
                      "%s: another member could not load NCCL or make the NCCL id (its log says why); "
                      "every rank of an NVIDIA island needs NCCL 2.10 or newer",
                      groupName(ni));
  GB_CHECK(gbAlgoBroadcast(g, &id, sizeof(id), 0));
  gbNcclComm_t comm = NULL;
  gbNcclResult_t r = ni->api->ncclCommInitRank(&comm, g->n, id, g->me);
  if (r != GB_NCCL_SUCCESS)
    return gbIslandNcclFail(ni->api, NULL, r, "%s: ncclCommInitRank (member %d of %d, leader rank %d)",
                            groupName(ni), g->me, g->n, g->ranks ? g->ranks[0] : 0);
  ni->comm = comm;
  return gbSuccess;
}

gbResult_t gbIslandNcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* ctx,
                              gbIsland_t** out) {
  if (group == NULL || dev == NULL || out == NULL)
    return gbErrorSet(gbInternalError, "NCCL island create: %s is NULL",
                      group == NULL ? "the group" : dev == NULL ? "the device" : "the output pointer");
  if (group->n < 1 || group->me < 0 || group->me >= group->n)
    return gbErrorSet(gbInternalError, "NCCL island create on %s: member %d of %d is not a valid group",
                      group->name ? group->name : "?", group->me, group->n);
  if (dev->runKind != gbRunReal)
    return gbErrorSet(gbInternalError, "NCCL island create on %s: device %s is not a real GPU",
                      group->name ? group->name : "?", dev->name);
  ncclIsland_t* ni = calloc(1, sizeof(*ni));
  if (ni == NULL) return gbErrorSet(gbSystemError, "NCCL island create: out of memory");
  ni->group = group;
  ni->dev = dev;
  ni->onCuda = dev->name != NULL && strcmp(dev->name, "cuda") == 0;
  ni->onError = onError;
  ni->errCtx = ctx;
  ni->failed = gbSuccess;
  ni->island.ops = &ncclIslandOps;
  ni->island.size = group->n;
  ni->island.index = group->me;
  ni->island.impl = ni;
  gbResult_t res = join(ni);
  if (res != gbSuccess) {
    free(ni);
    return res;
  }
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "NCCL island on %s: member %d of %d, NCCL %d (%s)", groupName(ni), group->me,
          group->n, ni->api->version, ni->api->name);
  *out = &ni->island;
  return gbSuccess;
}
