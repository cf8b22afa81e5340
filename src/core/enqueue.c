/* Walks a plan onto the caller's stream and the proxy: per chunk, the island
 * step, stage out, the host step, stage in, the island step. Chunks are
 * software-pipelined over the staging slots, so while chunk k crosses the
 * bridge, chunk k+1 is staged out and chunk k-1 staged back in. Every rank of
 * an island issues its island steps in the same order (the depth is an agreed
 * setting), so island collectives always match. All-reduce, broadcast and
 * reduce; the block collectives and send/recv have their own walkers. plan/
 * decides the schedule and its staging; enqueue_walk.c runs the call around
 * front() and back() here. */
#include <string.h>

#include "base/result.h"
#include "core/comm.h"
#include "core/enqueue_walk.h"
#include "core/shared_slots.h"
#include "core/trace.h"
#include "plan/plan.h"

typedef struct {
  gbCommWalk_t walk;       /* first: front and back get it */
  const char* send;
  char* recv;
  uint32_t posted;         /* host steps posted so far (the flight recorder's chunk k of n) */
} walk_t;

static gbResult_t islandCall(walk_t* w, gbIslandStep_t step, int root, const void* src, void* dst, size_t n) {
  const gbCommWalk_t* cw = &w->walk;
  gbIsland_t* is = cw->comm->islandComm;
  gbRedOp_t reduceOp = cw->plan.policy == gbPolicyNative ? cw->ops.island : cw->ops.partial;
  switch (step) {
    case GB_ISLAND_NONE:
      return gbSuccess;
    case GB_ISLAND_ALLREDUCE:
      return is->ops->allReduce(is, src, dst, n, cw->in.dtype, cw->ops.island, cw->stream);
    case GB_ISLAND_REDUCE:
      return is->ops->reduce(is, src, dst, n, cw->in.dtype, reduceOp, root, cw->stream);
    case GB_ISLAND_BCAST:
      return is->ops->broadcast(is, src, dst, n, cw->in.dtype, root, cw->stream);
  }
  return gbErrorSet(gbInternalError, "unknown island step %d", step);
}

static gbResult_t islandStep(walk_t* w, gbIslandStep_t step, int root, const void* src, void* dst, size_t n) {
  if (n == 0) return gbSuccess;
  GB_CHECK(islandCall(w, step, root, src, dst, n));
  if (step != GB_ISLAND_NONE) {
    w->walk.queued = 1;
    gbTraceAddIslandBytes(w->walk.comm, n * w->walk.esize);
  }
  return gbSuccess;
}

static gbResult_t islandSteps(walk_t* w, size_t i, gbIslandStep_t step, int root, int fromSend) {
  const gbPlan_t* p = &w->walk.plan;
  size_t es = w->walk.esize;
  size_t off = i * p->chunkCount, n = gbPlanChunkLen(p, i);
  const char* src = (fromSend ? w->send : w->recv) + off * es;
  char* dst = w->recv + off * es;
  if (p->rails == 0) return islandStep(w, step, root, src, dst, n);
  for (int r = 0; r < p->rails; r++) {
    size_t b, len;
    gbPlanRailSlice(p, n, r, &b, &len);
    GB_CHECK(islandStep(w, step, r, src + b * es, dst + b * es, len));
  }
  return gbSuccess;
}

static gbProxyKind_t proxyKind(gbColl_t coll) {
  if (coll == GB_COLL_ALLREDUCE) return GB_PROXY_ALLREDUCE;
  if (coll == GB_COLL_REDUCE) return GB_PROXY_REDUCE;
  return GB_PROXY_BCAST;
}

/* Which members' parts of a slot each member needs (shared_slots.h). */
static gbSharedMove_t moveOf(gbColl_t coll) {
  if (coll == GB_COLL_ALLREDUCE) return GB_MOVE_ALL;
  return coll == GB_COLL_REDUCE ? GB_MOVE_TO_ROOT : GB_MOVE_FROM_ROOT;
}

/* Island step, then hand the chunk to the proxy. */
static gbResult_t front(gbCommWalk_t* cw, size_t i) {
  walk_t* w = (walk_t*)cw;
  const gbPlan_t* p = &cw->plan;
  gbComm_t c = cw->comm;
  GB_CHECK(islandSteps(w, i, p->before, p->beforeRoot, 1));
  if (p->host == GB_HOST_NONE) return gbSuccess;
  size_t off, n;
  gbPlanStagedPart(p, i, &off, &n);
  if (n == 0) return gbSuccess;
  gbSlot_t* s = &cw->slotOf[i % (size_t)p->depth];
  size_t bytes = n * cw->esize;
  const char* src = (p->before != GB_ISLAND_NONE ? w->recv : w->send) + off * cw->esize;
  if (cw->shared) {
    gbProxyOp_t op;
    memset(&op, 0, sizeof(op));
    op.seq = c->seq;
    op.group = &cw->hostGroup->algo;
    gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, w->posted++, (uint32_t)p->hostSteps);
    void* out = NULL;
    GB_CHECK(gbSharedSlotsTake(c, cw->shared, cw->stream, bytes, s, &out));
    cw->queued = 1;
    if (p->stageOut) GB_CHECK(c->dev->copyAsync(s->buf, src, bytes, out));
    gbSharedChunk_t what = {moveOf(cw->in.coll), p->hostRoot, bytes, 0};
    return gbSharedSlotsStaged(c, cw->shared, s, &what, &op);
  }
  GB_CHECK(gbCommSlotAcquire(c, cw->stream, s));
  cw->queued = 1;
  void* buf = p->direct ? (void*)(w->recv + off * cw->esize) : s->buf;
  const void* scale = p->host == GB_HOST_WORLD ? cw->ops.scale : NULL; /* elsewhere the island step scaled */
  /* The proxy reads a direct all-reduce's input where it is, unless it must
   * scale it first (never in the caller's send buffer). */
  const void* input = NULL;
  if (p->stageOut && src != buf) {
    if (p->direct && !scale) input = src;
    else GB_CHECK(c->dev->copyAsync(buf, src, bytes, cw->stream));
  }
  GB_CHECK(gbCommSlotStaged(c, s, cw->stream));
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.kind = proxyKind(cw->in.coll);
  op.group = &cw->hostGroup->algo;
  op.buf = buf;
  op.src = input;
  op.count = n;
  op.chunkCount = p->hostChunk;
  op.dtype = cw->in.dtype;
  op.op = cw->ops.host;
  op.divisor = cw->ops.divisor;
  op.root = p->hostRoot;
  op.scale = scale;
  op.ready = gbCommSlotStagedFlag(c, s);
  op.readyValue = s->use;
  op.done = gbCommSlotDoneFlag(c, s);
  op.doneValue = s->use;
  op.seq = c->seq;
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, w->posted++, (uint32_t)p->hostSteps);
  return gbProxyPost(c->proxy, &op);
}

/* Over shared slots: the members' chunks arrived; reduce them (all-reduce,
 * and reduce on its root) or copy the root's (broadcast), then let the
 * slot go. */
static gbResult_t backShared(walk_t* w, const gbSlot_t* s, size_t off, size_t n) {
  const gbCommWalk_t* cw = &w->walk;
  const gbPlan_t* p = &cw->plan;
  gbComm_t c = cw->comm;
  gbSharedSlots_t* sh = cw->shared;
  size_t es = cw->esize;
  char* dst = w->recv + off * es;
  GB_CHECK(gbSharedSlotsArrived(c, sh, s, cw->stream));
  if (p->stageIn && cw->in.coll == GB_COLL_BROADCAST) {
    GB_CHECK(c->dev->copyAsync(dst, gbSharedSlotsAt(sh, p->hostRoot, s), n * es, cw->stream));
  } else if (p->stageIn) {
    const char* mine = (p->before != GB_ISLAND_NONE ? w->recv : w->send) + off * es;
    gbReduceArgs_t red = {.dst = dst, .nsrc = gbSharedSlotsMembers(sh), .count = n, .dtype = cw->in.dtype,
                          .op = cw->ops.host, .divisor = cw->ops.divisor,
                          .ring = gbAlgoFoldsRing(&cw->hostGroup->algo, n * es)};
    gbResult_t res = gbSuccess;
    for (int m = 0; m < red.nsrc; m++)
      red.src[m] = m == gbSharedSlotsMe(sh) ? (const void*)mine
                                            : gbSharedSlotsFetch(c, sh, m, s, 0, n * es, cw->stream, &res);
    GB_CHECK(res);
    GB_CHECK(c->dev->reduceAsync(&red, cw->stream));
  }
  return gbSharedSlotsRead(c, sh, s, cw->stream);
}

/* Take the proxy's result back, then the second island step. */
static gbResult_t back(gbCommWalk_t* cw, size_t i) {
  walk_t* w = (walk_t*)cw;
  const gbPlan_t* p = &cw->plan;
  gbComm_t c = cw->comm;
  size_t off, n;
  gbPlanStagedPart(p, i, &off, &n);
  gbSlot_t* s = &cw->slotOf[i % (size_t)p->depth];
  if (cw->shared && n > 0) {
    GB_CHECK(backShared(w, s, off, n));
  } else if (p->host != GB_HOST_NONE && n > 0) {
    GB_CHECK(gbCommSlotAwait(c, s, cw->stream));
    if (p->stageIn && !p->direct)
      GB_CHECK(c->dev->copyAsync(w->recv + off * cw->esize, s->buf, n * cw->esize, cw->stream));
    GB_CHECK(gbCommSlotRelease(c, s, cw->stream));
  }
  return islandSteps(w, i, p->after, p->afterRoot, 0);
}

static gbResult_t enqueue(gbComm_t c, const gbCommCall_t* call, const gbCommOps_t* ops, const void* send,
                          void* recv, void* stream) {
  walk_t w;
  memset(&w, 0, sizeof(w));
  w.walk.front = front;
  w.walk.back = back;
  w.send = send;
  w.recv = recv;
  return gbCommWalkRun(&w.walk, c, call, ops, stream);
}

gbResult_t gbCommEnqueueAllReduce(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  gbRedOp_t op, void* stream) {
  gbCommOps_t ops;
  GB_CHECK(gbCommResolveOp(c, op, dt, &ops));
  gbCommCall_t call = {GB_COLL_ALLREDUCE, count, dt, (int)op, -1};
  return enqueue(c, &call, &ops, send, recv, stream);
}

gbResult_t gbCommEnqueueReduce(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                               gbRedOp_t op, int root, void* stream) {
  gbCommOps_t ops;
  GB_CHECK(gbCommResolveOp(c, op, dt, &ops));
  gbCommCall_t call = {GB_COLL_REDUCE, count, dt, (int)op, root};
  return enqueue(c, &call, &ops, send, recv, stream);
}

gbResult_t gbCommEnqueueBroadcast(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt, int root,
                                  void* stream) {
  gbCommCall_t call = {GB_COLL_BROADCAST, count, dt, -1, root};
  return enqueue(c, &call, NULL, send, recv, stream);
}
