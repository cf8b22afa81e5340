/* Walks a block collective's plan (plan/blocks.c): all-gather,
 * reduce-scatter and all-to-all. Under native, the island's own call.
 * Otherwise flat (docs/REDUCTION_ORDER.md): chunk k holds elements
 * [k*m, k*m+len) of every rank's block and crosses the world's stage in
 * one host step over all ranks (how the blocks lie in a slot is the
 * stage's); enqueue_walk.c pipelines the chunks over the slots. */
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"
#include "core/enqueue_walk.h"
#include "core/trace.h"
#include "plan/plan.h"

typedef struct {
  gbCommWalk_t walk;   /* first: front and back get it; walk.in.count is the per rank block */
  const char* send;
  char* recv;
} blocks_t;

/* All-to-all inside one island: one fused group of sends and receives. */
static gbResult_t islandAllToAll(blocks_t* b) {
  const gbCommWalk_t* cw = &b->walk;
  gbIsland_t* is = cw->comm->islandComm;
  int n = is->size;
  size_t count = cw->in.count;
  gbIslandP2p_t* ops = calloc(2 * (size_t)n, sizeof(gbIslandP2p_t));
  if (!ops) return gbErrorSet(gbSystemError, "out of memory for an all-to-all of %d ranks", n);
  for (int r = 0; r < n; r++) {
    ops[2 * r] = (gbIslandP2p_t){r, 1, (void*)(b->send + (size_t)r * count * cw->esize), count, cw->in.dtype};
    ops[2 * r + 1] = (gbIslandP2p_t){r, 0, b->recv + (size_t)r * count * cw->esize, count, cw->in.dtype};
  }
  gbResult_t res = is->ops->sendRecv(is, ops, 2 * n, cw->stream);
  free(ops);
  return res;
}

/* Native: the island's own call, the plan's one chunk. */
static gbResult_t runNative(blocks_t* b) {
  const gbCommWalk_t* cw = &b->walk;
  gbIsland_t* is = cw->comm->islandComm;
  size_t count = cw->in.count;
  /* The recorder's island bytes: this rank's input to the island call. */
  gbTraceAddIslandBytes(cw->comm, count * cw->esize * (cw->in.coll == GB_COLL_ALLGATHER ? 1 : (size_t)is->size));
  if (cw->in.coll == GB_COLL_ALLGATHER)
    return is->ops->allGather(is, b->send, b->recv, count, cw->in.dtype, cw->stream);
  if (cw->in.coll == GB_COLL_REDUCESCATTER)
    return is->ops->reduceScatter(is, b->send, b->recv, count, cw->in.dtype, cw->ops.island, cw->stream);
  return islandAllToAll(b);
}

/* Chunk i's work for the stage: elements [at, at + len) of every block. */
static void workOf(const blocks_t* b, size_t i, gbStageWork_t* out) {
  const gbCommWalk_t* cw = &b->walk;
  size_t len = gbPlanChunkLen(&cw->plan, i), at = i * cw->plan.chunkCount, es = cw->esize;
  size_t stride = cw->in.count * es;
  *out = (gbStageWork_t){.coll = cw->in.coll, .dtype = cw->in.dtype, .esize = es, .len = len,
                         .src = b->send + at * es, .dst = b->recv + at * es, .srcStride = stride,
                         .dstStride = stride, .stageOut = 1, .stageIn = 1, .root = -1, .op = cw->ops.host,
                         .divisor = cw->ops.divisor, .scale = cw->ops.scale, .wire = cw->plan.wire,
                         .inputReady = i > 0};
}

static gbResult_t front(gbCommWalk_t* cw, size_t i) {
  blocks_t* b = (blocks_t*)cw;
  cw->queued = 1; /* a failure from here on may leave work queued */
  if (cw->plan.policy == gbPolicyNative) return runNative(b);
  gbStageWork_t work;
  workOf(b, i, &work);
  return gbCommWalkOut(cw, i, &work, (uint32_t)i);
}

static gbResult_t back(gbCommWalk_t* cw, size_t i) {
  blocks_t* b = (blocks_t*)cw;
  if (cw->plan.policy == gbPolicyNative) return gbSuccess;
  gbStageWork_t work;
  workOf(b, i, &work);
  return gbCommWalkIn(cw, i, &work);
}

static gbResult_t enqueueBlocks(gbComm_t c, gbColl_t coll, const void* send, void* recv, size_t count,
                                gbDataType_t dt, gbRedOp_t op, int hasOp, void* stream) {
  gbCommOps_t ops;
  if (hasOp) GB_CHECK(gbCommResolveOp(c, op, dt, &ops));
  blocks_t b;
  memset(&b, 0, sizeof(b));
  b.walk.front = front;
  b.walk.back = back;
  b.send = send;
  b.recv = recv;
  gbCommCall_t call = {coll, count, dt, hasOp ? (int)op : -1, -1, 0};
  return gbCommWalkRun(&b.walk, c, &call, hasOp ? &ops : NULL, stream);
}

gbResult_t gbCommEnqueueAllGather(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  void* stream) {
  return enqueueBlocks(c, GB_COLL_ALLGATHER, send, recv, count, dt, gbSum, 0, stream);
}

gbResult_t gbCommEnqueueReduceScatter(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                                      gbRedOp_t op, void* stream) {
  return enqueueBlocks(c, GB_COLL_REDUCESCATTER, send, recv, count, dt, op, 1, stream);
}

gbResult_t gbCommEnqueueAllToAll(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                                 void* stream) {
  return enqueueBlocks(c, GB_COLL_ALLTOALL, send, recv, count, dt, gbSum, 0, stream);
}
