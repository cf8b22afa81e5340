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

/* Chunk i's work for the stage: the part this rank stages, where its
 * input lies (after the island step, in recv) and where the result goes. */
static size_t workOf(const walk_t* w, size_t i, gbStageWork_t* out) {
  const gbCommWalk_t* cw = &w->walk;
  const gbPlan_t* p = &cw->plan;
  size_t off, n, es = cw->esize;
  gbPlanStagedPart(p, i, &off, &n);
  *out = (gbStageWork_t){.coll = cw->in.coll, .dtype = cw->in.dtype, .esize = es, .len = n,
                         .src = (p->before != GB_ISLAND_NONE ? w->recv : w->send) + off * es,
                         .dst = w->recv + off * es, .stageOut = p->stageOut, .stageIn = p->stageIn,
                         .root = p->hostRoot, .op = cw->ops.host, .divisor = cw->ops.divisor,
                         /* elsewhere the island step scaled */
                         .scale = p->host == GB_HOST_WORLD ? cw->ops.scale : NULL, .direct = p->direct,
                         .hostChunk = p->hostChunk, .wire = p->wire,
                         .inputReady = i > 0 && p->before == GB_ISLAND_NONE};
  return p->host == GB_HOST_NONE ? 0 : n;
}

/* Island step, then the chunk out through the stage. */
static gbResult_t front(gbCommWalk_t* cw, size_t i) {
  walk_t* w = (walk_t*)cw;
  GB_CHECK(islandSteps(w, i, cw->plan.before, cw->plan.beforeRoot, 1));
  gbStageWork_t work;
  if (workOf(w, i, &work) == 0) return gbSuccess;
  return gbCommWalkOut(cw, i, &work, w->posted++);
}

/* The chunk's result in through the stage, then the second island step. */
static gbResult_t back(gbCommWalk_t* cw, size_t i) {
  walk_t* w = (walk_t*)cw;
  gbStageWork_t work;
  if (workOf(w, i, &work) > 0) GB_CHECK(gbCommWalkIn(cw, i, &work));
  return islandSteps(w, i, cw->plan.after, cw->plan.afterRoot, 0);
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
  gbCommCall_t call = {GB_COLL_ALLREDUCE, count, dt, (int)op, -1, 0};
  return enqueue(c, &call, &ops, send, recv, stream);
}

gbResult_t gbCommEnqueueBarrier(gbComm_t c, void* stream) {
  gbCommOps_t ops;
  GB_CHECK(gbCommResolveOp(c, gbSum, gbInt32, &ops));
  gbCommCall_t call = {GB_COLL_ALLREDUCE, 1, gbInt32, (int)gbSum, -1, 1};
  return enqueue(c, &call, &ops, c->scratchDev, c->scratchDev, stream);
}

gbResult_t gbCommEnqueueReduce(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                               gbRedOp_t op, int root, void* stream) {
  gbCommOps_t ops;
  GB_CHECK(gbCommResolveOp(c, op, dt, &ops));
  gbCommCall_t call = {GB_COLL_REDUCE, count, dt, (int)op, root, 0};
  return enqueue(c, &call, &ops, send, recv, stream);
}

gbResult_t gbCommEnqueueBroadcast(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt, int root,
                                  void* stream) {
  gbCommCall_t call = {GB_COLL_BROADCAST, count, dt, -1, root, 0};
  return enqueue(c, &call, NULL, send, recv, stream);
}
