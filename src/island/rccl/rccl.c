/* The RCCL island: an AMD island's native collectives are RCCL calls on the
 * caller's stream. RCCL keeps NCCL's API and enum values, and gpubridge's
 * data types and reduction ops have NCCL's values, so each call maps 1:1
 * (after a range check).
 *
 * Creation, collective over the island's host group (already connected):
 *  1. every member loads RCCL; member 0 (the leader) makes the ncclUniqueId;
 *  2. the members agree that every one of them is ready (one all-reduce of
 *     a flag), so a member without RCCL fails the whole island at once
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
#include "device/hip/hip.h"
#include "island/island.h"
#include "island/rccl/rccl.h"

typedef struct {
  gbIsland_t island;
  const gbRcclApi_t* api;
  gbRcclComm_t comm;
  gbAlgoGroup_t* group;
  const gbDeviceOps* dev;
  int onHip; /* dev is device/hip: make its GPU current before RCCL calls */
  gbIslandErrorFn_t onError;
  void* errCtx;
  int failed; /* first failure (atomic): later calls fail instead of hanging peers */
} rcclIsland_t;

static const char* groupName(const rcclIsland_t* ri) { return ri->group->name ? ri->group->name : "island"; }

static void markFailed(rcclIsland_t* ri, gbResult_t res) {
  int none = gbSuccess;
  __atomic_compare_exchange_n(&ri->failed, &none, (int)res, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static gbResult_t makeCurrent(const rcclIsland_t* ri) { return ri->onHip ? gbDeviceHipMakeCurrent() : gbSuccess; }

/* Before each call: the GPU current on this thread, and no earlier failure,
 * ours or RCCL's asynchronous one (a peer gone, a network error). */
static gbResult_t ready(rcclIsland_t* ri, const char* what) {
  int earlier = __atomic_load_n(&ri->failed, __ATOMIC_ACQUIRE);
  if (earlier != gbSuccess)
    return gbErrorSet((gbResult_t)earlier,
                      "%s %s skipped: an earlier RCCL call on this island failed (%s); destroy the "
                      "communicator and create a new one",
                      groupName(ri), what, gbResultString((gbResult_t)earlier));
  GB_CHECK(makeCurrent(ri));
  gbRcclResult_t async = GB_RCCL_SUCCESS;
  gbRcclResult_t r = ri->api->ncclCommGetAsyncError(ri->comm, &async);
  if (r != GB_RCCL_SUCCESS) {
    gbResult_t res = gbIslandRcclFail(ri->api, ri->comm, r, "%s: ncclCommGetAsyncError", groupName(ri));
    markFailed(ri, res);
    return res;
  }
  if (async != GB_RCCL_SUCCESS && async != GB_RCCL_IN_PROGRESS) {
    gbResult_t res = gbIslandRcclFail(ri->api, ri->comm, async, "%s: an earlier RCCL collective (asynchronous error)",
                                      groupName(ri));
    markFailed(ri, res);
    if (ri->onError) ri->onError(ri->errCtx, res);
    return res;
  }
  return gbSuccess;
}

static gbResult_t checkArgs(const rcclIsland_t* ri, const char* what, gbDataType_t dt, gbRedOp_t op, int useOp,
                            int root, int useRoot) {
  if ((int)dt < 0 || dt >= gbNumTypes || gbDtypeSize(dt) == 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown data type %d; use a gbDataType_t", groupName(ri), what,
                      (int)dt);
  if (useOp && ((int)op < 0 || op >= gbNumOps))
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown reduction op %d; use a gbRedOp_t", groupName(ri), what,
                      (int)op);
  if (useRoot && (root < 0 || root >= ri->island.size))
    return gbErrorSet(gbInvalidArgument, "%s %s: root %d is not an island member (0..%d)", groupName(ri), what,
                      root, ri->island.size - 1);
  return gbSuccess;
}

/* gbDataType_t and gbRedOp_t values equal RCCL's (checked above for range). */
static gbRcclDataType_t rcclType(gbDataType_t dt) { return (gbRcclDataType_t)dt; }
static gbRcclRedOp_t rcclOp(gbRedOp_t op) { return (gbRcclRedOp_t)op; }

static gbResult_t done(rcclIsland_t* ri, gbRcclResult_t r, const char* what, size_t count, gbDataType_t dt,
                       void* stream) {
  if (r == GB_RCCL_SUCCESS) return gbSuccess;
  gbResult_t res = gbIslandRcclFail(ri->api, ri->comm, r, "%s %s of %zu x %s on stream %p", groupName(ri), what,
                                    count, gbDtypeName(dt), stream);
  markFailed(ri, res);
  return res;
}

static gbResult_t allReduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            gbRedOp_t op, void* stream) {
  rcclIsland_t* ri = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(ri, "all-reduce", dt, op, 1, 0, 0));
  GB_CHECK(ready(ri, "all-reduce"));
  gbRcclResult_t r = ri->api->ncclAllReduce(send, recv, count, rcclType(dt), rcclOp(op), ri->comm, stream);
  return done(ri, r, "ncclAllReduce (RCCL)", count, dt, stream);
}

static gbResult_t reduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                         gbRedOp_t op, int root, void* stream) {
  rcclIsland_t* ri = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(ri, "reduce", dt, op, 1, root, 1));
  GB_CHECK(ready(ri, "reduce"));
  gbRcclResult_t r = ri->api->ncclReduce(send, recv, count, rcclType(dt), rcclOp(op), root, ri->comm, stream);
  return done(ri, r, "ncclReduce (RCCL)", count, dt, stream);
}

static gbResult_t broadcast(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            int root, void* stream) {
  rcclIsland_t* ri = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(ri, "broadcast", dt, gbSum, 0, root, 1));
  GB_CHECK(ready(ri, "broadcast"));
  gbRcclResult_t r = ri->api->ncclBroadcast(send, recv, count, rcclType(dt), root, ri->comm, stream);
  return done(ri, r, "ncclBroadcast (RCCL)", count, dt, stream);
}

/* Destroy flushes and waits for the island's work; abort does not wait, which
 * is what a failed or aborted communicator needs (peers may be gone). */
static void destroy(gbIsland_t* is) {
  if (is == NULL) return;
  rcclIsland_t* ri = is->impl;
  if (ri->comm != NULL) {
    (void)makeCurrent(ri);
    int aborted = __atomic_load_n(&ri->failed, __ATOMIC_ACQUIRE) != gbSuccess ||
                  (ri->group->abortFlag && __atomic_load_n(ri->group->abortFlag, __ATOMIC_ACQUIRE));
    gbRcclResult_t async = GB_RCCL_SUCCESS;
    if (!aborted && ri->api->ncclCommGetAsyncError(ri->comm, &async) == GB_RCCL_SUCCESS &&
        async != GB_RCCL_SUCCESS && async != GB_RCCL_IN_PROGRESS)
      aborted = 1;
    gbRcclResult_t r = aborted ? ri->api->ncclCommAbort(ri->comm) : ri->api->ncclCommDestroy(ri->comm);
    if (r != GB_RCCL_SUCCESS)
      (void)gbIslandRcclFail(ri->api, ri->comm, r, "%s: %s", groupName(ri),
                             aborted ? "ncclCommAbort (RCCL)" : "ncclCommDestroy (RCCL)");
    else
      GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s: RCCL communicator %s", groupName(ri),
              aborted ? "aborted" : "destroyed");
  }
  free(ri);
}

static const gbIslandOps_t rcclIslandOps = {
    .name = "rccl",
    .allReduce = allReduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .destroy = destroy,
};

/* Steps 1-3 of the file comment; on success ri->comm is set. */
static gbResult_t join(rcclIsland_t* ri) {
  gbAlgoGroup_t* g = ri->group;
  gbRcclUniqueId_t id;
  memset(&id, 0, sizeof(id));
  gbResult_t mine = gbIslandRcclLoad(&ri->api);
  if (mine == gbSuccess) mine = makeCurrent(ri);
  if (mine == gbSuccess && g->me == 0) {
    gbRcclResult_t r = ri->api->ncclGetUniqueId(&id);
    if (r != GB_RCCL_SUCCESS) mine = gbIslandRcclFail(ri->api, NULL, r, "%s: ncclGetUniqueId (RCCL)", groupName(ri));
  }
  int32_t okAll = mine == gbSuccess ? 1 : 0;
  GB_CHECK(gbAlgoAllReduce(g, &okAll, &okAll, 1, gbInt32, gbMin, 0));
  if (mine != gbSuccess) return mine; /* already recorded with its cause */
  if (!okAll)
    return gbErrorSet(gbRemoteError,
                      "%s: another member could not load RCCL or make the RCCL id (its log says why); "
                      "every rank of an AMD island needs RCCL 2.10 or newer",
                      groupName(ri));
  GB_CHECK(gbAlgoBroadcast(g, &id, sizeof(id), 0));
  gbRcclComm_t comm = NULL;
  gbRcclResult_t r = ri->api->ncclCommInitRank(&comm, g->n, id, g->me);
  if (r != GB_RCCL_SUCCESS)
    return gbIslandRcclFail(ri->api, NULL, r, "%s: ncclCommInitRank (RCCL; member %d of %d, leader rank %d)",
                            groupName(ri), g->me, g->n, g->ranks ? g->ranks[0] : 0);
  ri->comm = comm;
  return gbSuccess;
}

gbResult_t gbIslandRcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* ctx,
                              gbIsland_t** out) {
  if (group == NULL || dev == NULL || out == NULL)
    return gbErrorSet(gbInternalError, "RCCL island create: %s is NULL",
                      group == NULL ? "the group" : dev == NULL ? "the device" : "the output pointer");
  if (group->n < 1 || group->me < 0 || group->me >= group->n)
    return gbErrorSet(gbInternalError, "RCCL island create on %s: member %d of %d is not a valid group",
                      group->name ? group->name : "?", group->me, group->n);
  if (dev->runKind != gbRunReal)
    return gbErrorSet(gbInternalError, "RCCL island create on %s: device %s is not a real GPU",
                      group->name ? group->name : "?", dev->name);
  rcclIsland_t* ri = calloc(1, sizeof(*ri));
  if (ri == NULL) return gbErrorSet(gbSystemError, "RCCL island create: out of memory");
  ri->group = group;
  ri->dev = dev;
  ri->onHip = dev->name != NULL && strcmp(dev->name, "hip") == 0;
  ri->onError = onError;
  ri->errCtx = ctx;
  ri->failed = gbSuccess;
  ri->island.ops = &rcclIslandOps;
  ri->island.size = group->n;
  ri->island.index = group->me;
  ri->island.impl = ri;
  gbResult_t res = join(ri);
  if (res != gbSuccess) {
    free(ri);
    return res;
  }
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "RCCL island on %s: member %d of %d, RCCL %d (%s)%s", groupName(ri), group->me,
          group->n, ri->api->version, ri->api->name, ri->api->emulated ? ", emulated AMD" : "");
  *out = &ri->island;
  return gbSuccess;
}
