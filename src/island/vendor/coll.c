/* The calls of an island over a library with NCCL's API (vendor.c creates
 * it): each entry of gbIslandOps_t checks its arguments, then that the island
 * is usable (gbIslandVendorReady), then makes the library's call on the
 * caller's stream. gpubridge's data types and ops have NCCL's values, so they
 * pass 1:1 after a range check. A call the library refuses fails the island
 * (vendor.c's gbIslandVendorCallFatal): its peers may already be inside the
 * matching call, so later calls fail at once instead of pairing wrongly.
 *
 * Send/receive: one list is one ncclGroupStart .. ncclGroupEnd on the stream,
 * so every send and receive of it progresses together (all-to-all, or a
 * rank that sends to and receives from one peer). Entries of count 0 are
 * skipped: a send must meet a receive of the same count, so both sides skip.
 * Sends that overlap the group's receives (an in-place all-to-all) leave
 * from a device copy taken on the stream first (stage.c).
 *
 * fp8: moved as bytes (ncclUint8), so every accepted library version moves
 * it; reductions of fp8 never come here (plan.h's gbPlanFp8OffIsland: they
 * run flat, reduced by gpubridge), and one that did is refused before the
 * library sees it.
 *
 * PreMulSum: the library's op value is the island's op. Each live one is
 * recorded with its type, so a destroyed or foreign op, or a collective of
 * another type, is refused here with its cause; the library would refuse it
 * too, but only after the island's peers had entered the collective. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/result.h"
#include "island/island.h"
#include "island/vendor/vendor.h"

static gbResult_t checkType(const gbVendorIsland_t* vi, const char* what, gbDataType_t dt) {
  if ((int)dt < 0 || dt >= gbNumTypes || gbDtypeSize(dt) == 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown data type %d; use a gbDataType_t",
                      gbIslandVendorGroupName(vi), what, (int)dt);
  return gbSuccess;
}

/* A reduction's type: not fp8, which gpubridge reduces itself. */
static gbResult_t checkReducible(const gbVendorIsland_t* vi, const char* what, gbDataType_t dt) {
  if (gbDtypeIsFp8(dt))
    return gbErrorSet(gbInternalError, "%s %s of %s reached the %s island: gpubridge reduces fp8 itself (the flat "
                      "policy) and never hands it to %s; report this", gbIslandVendorGroupName(vi), what,
                      gbDtypeName(dt), vi->desc->label, vi->desc->label);
  return gbSuccess;
}

static int findUserOp(const gbVendorIsland_t* vi, gbRedOp_t op) {
  for (int i = 0; i < vi->nUserOps; i++)
    if ((gbRedOp_t)vi->userOps[i].op == op) return i;
  return -1;
}

/* A built-in op, or a live PreMulSum op of this island created for dt. */
static gbResult_t checkOp(gbVendorIsland_t* vi, const char* what, gbRedOp_t op, gbDataType_t dt) {
  const char* name = gbIslandVendorGroupName(vi);
  if ((int)op < 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown reduction op %d; use a gbRedOp_t", name, what, (int)op);
  if (op < gbNumOps) return gbSuccess;
  pthread_mutex_lock(&vi->userOpsLock);
  int i = findUserOp(vi, op);
  gbDataType_t made = i >= 0 ? vi->userOps[i].dt : dt;
  pthread_mutex_unlock(&vi->userOpsLock);
  if (i < 0)
    return gbErrorSet(gbInvalidArgument,
                      "%s %s: reduction op %d is neither built in nor a live PreMulSum op of this %s island "
                      "(destroyed already, or made for another communicator); create it with "
                      "gbRedOpCreatePreMulSum on this communicator",
                      name, what, (int)op, vi->desc->label);
  if (made != dt)
    return gbErrorSet(gbInvalidArgument,
                      "%s %s: PreMulSum op %d was created for %s, the call passes %s; create one op per data type",
                      name, what, (int)op, gbDtypeName(made), gbDtypeName(dt));
  return gbSuccess;
}

static gbResult_t checkRoot(const gbVendorIsland_t* vi, const char* what, int root) {
  if (root < 0 || root >= vi->island.size)
    return gbErrorSet(gbInvalidArgument, "%s %s: root %d is not an island member (0..%d)",
                      gbIslandVendorGroupName(vi), what, root, vi->island.size - 1);
  return gbSuccess;
}

/* All-gather's receive buffer and reduce-scatter's send buffer hold size
 * times count elements. */
static gbResult_t checkTotal(const gbVendorIsland_t* vi, const char* what, size_t count, gbDataType_t dt) {
  size_t n = (size_t)vi->island.size;
  if (count > SIZE_MAX / n / gbDtypeSize(dt))
    return gbErrorSet(gbInvalidArgument, "%s %s: %zu x %s per member, times %zu members, overflows the address space",
                      gbIslandVendorGroupName(vi), what, count, gbDtypeName(dt), n);
  return gbSuccess;
}

/* gbDataType_t and gbRedOp_t values equal NCCL's (range-checked above); an
 * op from gbNumOps up is the library's own value (preMulSumCreate). fp8
 * travels as uint8 (only moved here), which NCCL has had since 2.0. */
static gbVendorDataType_t vendorType(gbDataType_t dt) {
  return gbDtypeIsFp8(dt) ? (gbVendorDataType_t)gbUint8 : (gbVendorDataType_t)dt;
}
static gbVendorRedOp_t vendorOp(gbRedOp_t op) { return (gbVendorRedOp_t)op; }

static gbResult_t done(gbVendorIsland_t* vi, gbVendorResult_t r, const char* call, size_t count, gbDataType_t dt,
                       void* stream) {
  if (r == GB_VENDOR_SUCCESS) return gbSuccess;
  return gbIslandVendorCallFatal(vi, r, "%s %s%s%s%s of %zu x %s on stream %p", gbIslandVendorGroupName(vi), call,
                                 GB_VENDOR_TAG(vi), count, gbDtypeName(dt), stream);
}

static gbResult_t allReduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            gbRedOp_t op, void* stream) {
  gbVendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkType(vi, "all-reduce", dt));
  GB_CHECK(checkReducible(vi, "all-reduce", dt));
  GB_CHECK(checkOp(vi, "all-reduce", op, dt));
  GB_CHECK(gbIslandVendorReady(vi, "all-reduce"));
  gbVendorResult_t r = vi->api->ncclAllReduce(send, recv, count, vendorType(dt), vendorOp(op), vi->comm, stream);
  return done(vi, r, "ncclAllReduce", count, dt, stream);
}

static gbResult_t reduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                         gbRedOp_t op, int root, void* stream) {
  gbVendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkType(vi, "reduce", dt));
  GB_CHECK(checkReducible(vi, "reduce", dt));
  GB_CHECK(checkOp(vi, "reduce", op, dt));
  GB_CHECK(checkRoot(vi, "reduce", root));
  GB_CHECK(gbIslandVendorReady(vi, "reduce"));
  gbVendorResult_t r = vi->api->ncclReduce(send, recv, count, vendorType(dt), vendorOp(op), root, vi->comm, stream);
  return done(vi, r, "ncclReduce", count, dt, stream);
}

static gbResult_t broadcast(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            int root, void* stream) {
  gbVendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkType(vi, "broadcast", dt));
  GB_CHECK(checkRoot(vi, "broadcast", root));
  GB_CHECK(gbIslandVendorReady(vi, "broadcast"));
  gbVendorResult_t r = vi->api->ncclBroadcast(send, recv, count, vendorType(dt), root, vi->comm, stream);
  return done(vi, r, "ncclBroadcast", count, dt, stream);
}

static gbResult_t allGather(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            void* stream) {
  gbVendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkType(vi, "all-gather", dt));
  GB_CHECK(checkTotal(vi, "all-gather", count, dt));
  GB_CHECK(gbIslandVendorReady(vi, "all-gather"));
  gbVendorResult_t r = vi->api->ncclAllGather(send, recv, count, vendorType(dt), vi->comm, stream);
  return done(vi, r, "ncclAllGather", count, dt, stream);
}

static gbResult_t reduceScatter(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                                gbRedOp_t op, void* stream) {
  gbVendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkType(vi, "reduce-scatter", dt));
  GB_CHECK(checkReducible(vi, "reduce-scatter", dt));
  GB_CHECK(checkOp(vi, "reduce-scatter", op, dt));
  GB_CHECK(checkTotal(vi, "reduce-scatter", count, dt));
  GB_CHECK(gbIslandVendorReady(vi, "reduce-scatter"));
  gbVendorResult_t r =
      vi->api->ncclReduceScatter(send, recv, count, vendorType(dt), vendorOp(op), vi->comm, stream);
  return done(vi, r, "ncclReduceScatter", count, dt, stream);
}

/* Checks every entry; *live counts those with elements. */
static gbResult_t checkP2p(const gbVendorIsland_t* vi, const gbIslandP2p_t* ops, int nops, int* live) {
  const char* name = gbIslandVendorGroupName(vi);
  *live = 0;
  if (nops < 0 || (nops > 0 && ops == NULL))
    return gbErrorSet(gbInvalidArgument, "%s send/receive group: %d entries at %p is not a list", name, nops,
                      (const void*)ops);
  for (int i = 0; i < nops; i++) {
    const gbIslandP2p_t* p = &ops[i];
    const char* dir = p->isSend ? "send" : "receive";
    if (p->peer < 0 || p->peer >= vi->island.size)
      return gbErrorSet(gbInvalidArgument, "%s send/receive group: entry %d (%s) names peer %d, not an island member "
                        "(0..%d)", name, i, dir, p->peer, vi->island.size - 1);
    if ((int)p->dt < 0 || p->dt >= gbNumTypes || gbDtypeSize(p->dt) == 0)
      return gbErrorSet(gbInvalidArgument, "%s send/receive group: entry %d (%s, peer %d) has unknown data type %d; "
                        "use a gbDataType_t", name, i, dir, p->peer, (int)p->dt);
    if (p->count > 0 && p->buf == NULL)
      return gbErrorSet(gbInvalidArgument, "%s send/receive group: entry %d (%s of %zu x %s, peer %d) has a NULL "
                        "buffer", name, i, dir, p->count, gbDtypeName(p->dt), p->peer);
    *live += p->count > 0;
  }
  return gbSuccess;
}

static gbResult_t groupSendRecv(gbVendorIsland_t* vi, const gbIslandP2p_t* ops, int nops, int live,
                                void* stream) {
  const char* name = gbIslandVendorGroupName(vi);
  const gbVendorApi_t* a = vi->api;
  gbVendorResult_t r = a->ncclGroupStart();
  if (r != GB_VENDOR_SUCCESS)
    return gbIslandVendorCallFatal(vi, r, "%s ncclGroupStart%s%s%s, opening a group of %d sends and receives on "
                                   "stream %p", name, GB_VENDOR_TAG(vi), live, stream);
  gbResult_t res = gbSuccess;
  for (int i = 0; i < nops && res == gbSuccess; i++) {
    const gbIslandP2p_t* p = &ops[i];
    if (p->count == 0) continue;
    r = p->isSend ? a->ncclSend(p->buf, p->count, vendorType(p->dt), p->peer, vi->comm, stream)
                  : a->ncclRecv(p->buf, p->count, vendorType(p->dt), p->peer, vi->comm, stream);
    if (r != GB_VENDOR_SUCCESS)
      res = gbIslandVendorCallFatal(vi, r, "%s %s%s%s%s %s member %d of %zu x %s on stream %p (entry %d of %d of a "
                                    "group)", name, p->isSend ? "ncclSend" : "ncclRecv", GB_VENDOR_TAG(vi),
                                    p->isSend ? "to" : "from", p->peer, p->count, gbDtypeName(p->dt), stream, i,
                                    nops);
  }
  /* Always closed: the group is the calling thread's, and an open one would
   * swallow the thread's next calls. After a failed entry the library
   * drops the group and reports that again here. */
  r = a->ncclGroupEnd();
  if (r != GB_VENDOR_SUCCESS && res == gbSuccess)
    res = gbIslandVendorCallFatal(vi, r, "%s ncclGroupEnd%s%s%s, issuing a group of %d sends and receives on "
                                  "stream %p", name, GB_VENDOR_TAG(vi), live, stream);
  else if (r != GB_VENDOR_SUCCESS)
    GB_INFO(GB_LOG_COLL, "%s: ncclGroupEnd%s%s%s after the failed entry returned %d too", name, GB_VENDOR_TAG(vi), r);
  return res;
}

/* Sends that overlap receives (an in-place all-to-all) leave from a copy:
 * *copy holds the list pointing there and *stage the copy's memory. */
static gbResult_t stageIfOverlapping(gbVendorIsland_t* vi, const gbIslandP2p_t* ops, int nops, void* stream,
                                     gbIslandP2p_t** copy, gbVendorStage_t** stage) {
  int overlap = 0;
  *copy = NULL;
  *stage = NULL;
  GB_CHECK(gbIslandP2pOverlap(ops, nops, &overlap));
  if (!overlap) return gbSuccess;
  *copy = malloc((size_t)nops * sizeof(**copy));
  if (*copy == NULL)
    return gbErrorSet(gbSystemError, "%s send/receive group: out of memory for %d entries",
                      gbIslandVendorGroupName(vi), nops);
  memcpy(*copy, ops, (size_t)nops * sizeof(**copy));
  gbResult_t res = gbIslandVendorStageSends(vi, *copy, nops, stream, stage);
  /* A copy that failed on the stream leaves the peers waiting in the group
   * this rank will not join: the island fails, as after a refused call. */
  if (res != gbSuccess) gbIslandVendorMarkFailed(vi, res);
  return res;
}

static gbResult_t sendRecv(gbIsland_t* is, const gbIslandP2p_t* ops, int nops, void* stream) {
  gbVendorIsland_t* vi = is->impl;
  int live = 0;
  GB_CHECK(checkP2p(vi, ops, nops, &live));
  if (live == 0) return gbSuccess;
  GB_CHECK(gbIslandVendorReady(vi, "send/receive group"));
  gbIslandP2p_t* copy = NULL;
  gbVendorStage_t* stage = NULL;
  gbResult_t res = stageIfOverlapping(vi, ops, nops, stream, &copy, &stage);
  if (res == gbSuccess && copy != NULL) ops = copy;
  if (res == gbSuccess) res = groupSendRecv(vi, ops, nops, live, stream);
  (void)gbIslandVendorStageRelease(vi, stage, stream);
  free(copy);
  return res;
}

/* Room for one more record before the library makes the op, so that an op
 * it made is never left unrecorded (and so never destroyed). */
static gbResult_t reserveUserOp(gbVendorIsland_t* vi) {
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&vi->userOpsLock);
  if (vi->nUserOps == vi->capUserOps) {
    int cap = vi->capUserOps ? 2 * vi->capUserOps : 8;
    gbVendorUserOp_t* grown = realloc(vi->userOps, (size_t)cap * sizeof(*grown));
    if (grown == NULL)
      res = gbErrorSet(gbSystemError, "%s PreMulSum op: out of memory recording %d live ops",
                       gbIslandVendorGroupName(vi), cap);
    else {
      vi->userOps = grown;
      vi->capUserOps = cap;
    }
  }
  pthread_mutex_unlock(&vi->userOpsLock);
  return res;
}

static gbResult_t preMulSumCreate(gbIsland_t* is, void* scalar, gbDataType_t dt, gbScalarResidence_t residence,
                                  gbRedOp_t* op) {
  gbVendorIsland_t* vi = is->impl;
  const char* name = gbIslandVendorGroupName(vi);
  const char* label = vi->desc->label;
  const gbVendorApi_t* a = vi->api;
  if (scalar == NULL || op == NULL)
    return gbErrorSet(gbInvalidArgument, "%s PreMulSum op: the %s is NULL", name,
                      scalar == NULL ? "scalar" : "output op pointer");
  GB_CHECK(checkType(vi, "PreMulSum op", dt));
  GB_CHECK(checkReducible(vi, "PreMulSum op", dt));
  gbVendorScalarResidence_t where;
  switch (residence) {
    case gbScalarDevice: where = GB_VENDOR_SCALAR_DEVICE; break;
    case gbScalarHostImmediate: where = GB_VENDOR_SCALAR_HOST_IMMEDIATE; break;
    default:
      return gbErrorSet(gbInvalidArgument, "%s PreMulSum op: unknown scalar residence %d; use gbScalarDevice or "
                        "gbScalarHostImmediate", name, (int)residence);
  }
  if (a->ncclRedOpCreatePreMulSum == NULL || a->ncclRedOpDestroy == NULL) {
    char v[32];
    gbIslandVendorVersionText(a->version, v, sizeof(v));
    return gbErrorSet(gbInvalidUsage, "%s PreMulSum op: %s is %s %s, which has no %s (it came with %s 2.11); "
                      "update %s or set %s to a 2.11 or newer library, or scale the input and use gbSum",
                      name, a->name, label, v,
                      a->ncclRedOpCreatePreMulSum == NULL ? "ncclRedOpCreatePreMulSum" : "ncclRedOpDestroy", label,
                      label, vi->desc->libraryEnv);
  }
  GB_CHECK(gbIslandVendorReady(vi, "PreMulSum op"));
  GB_CHECK(reserveUserOp(vi));
  gbVendorRedOp_t made = -1;
  gbVendorResult_t r = a->ncclRedOpCreatePreMulSum(&made, scalar, vendorType(dt), where, vi->comm);
  /* Nothing was enqueued: a refusal leaves the island usable. */
  if (r != GB_VENDOR_SUCCESS)
    return gbIslandVendorCallFailed(vi, vi->comm, r, "%s ncclRedOpCreatePreMulSum%s%s%s (%s, scalar in %s memory)",
                                    name, GB_VENDOR_TAG(vi), gbDtypeName(dt),
                                    where == GB_VENDOR_SCALAR_DEVICE ? "device" : "host");
  if (made < (gbVendorRedOp_t)gbNumOps) /* it would shadow a built-in op */
    return gbErrorSet(gbInternalError, "%s ncclRedOpCreatePreMulSum%s%s%s returned op %d, a built-in op's value; "
                      "%s (%s) breaks NCCL's API: use another %s library (%s)", name, GB_VENDOR_TAG(vi), made,
                      a->name, label, label, vi->desc->libraryEnv);
  pthread_mutex_lock(&vi->userOpsLock);
  vi->userOps[vi->nUserOps++] = (gbVendorUserOp_t){made, dt};
  pthread_mutex_unlock(&vi->userOpsLock);
  *op = (gbRedOp_t)made;
  GB_TRACE(GB_LOG_COLL, "%s: PreMulSum op %d (%s, %s scalar)", name, made, gbDtypeName(dt),
           where == GB_VENDOR_SCALAR_DEVICE ? "device" : "host");
  return gbSuccess;
}

/* The library lets an op go once the last call using it was enqueued, which
 * is when the island's callers return. */
static gbResult_t redOpDestroy(gbIsland_t* is, gbRedOp_t op) {
  gbVendorIsland_t* vi = is->impl;
  const char* name = gbIslandVendorGroupName(vi);
  if ((int)op >= 0 && op < gbNumOps)
    return gbErrorSet(gbInvalidArgument, "%s op destroy: op %d is built in; only PreMulSum ops are destroyed", name,
                      (int)op);
  pthread_mutex_lock(&vi->userOpsLock);
  int i = (int)op < 0 ? -1 : findUserOp(vi, op);
  if (i >= 0) vi->userOps[i] = vi->userOps[--vi->nUserOps];
  pthread_mutex_unlock(&vi->userOpsLock);
  if (i < 0)
    return gbErrorSet(gbInvalidArgument, "%s op destroy: op %d is not a live PreMulSum op of this %s island "
                      "(destroyed already, or made for another communicator)", name, (int)op, vi->desc->label);
  if (vi->comm == NULL) return gbSuccess; /* aborted: its ops went with it */
  GB_CHECK(gbIslandVendorMakeCurrent(vi));
  gbVendorResult_t r = vi->api->ncclRedOpDestroy(vendorOp(op), vi->comm);
  if (r != GB_VENDOR_SUCCESS)
    return gbIslandVendorCallFailed(vi, vi->comm, r, "%s ncclRedOpDestroy%s%s%s of op %d", name, GB_VENDOR_TAG(vi),
                                    (int)op);
  return gbSuccess;
}

void gbIslandVendorUserOpsFree(gbVendorIsland_t* vi) {
  free(vi->userOps);
  vi->userOps = NULL;
  vi->nUserOps = vi->capUserOps = 0;
}

void gbIslandVendorCollOps(gbIslandOps_t* ops) {
  ops->allReduce = allReduce;
  ops->reduce = reduce;
  ops->broadcast = broadcast;
  ops->allGather = allGather;
  ops->reduceScatter = reduceScatter;
  ops->sendRecv = sendRecv;
  ops->preMulSumCreate = preMulSumCreate;
  ops->redOpDestroy = redOpDestroy;
}
