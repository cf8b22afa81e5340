/* Walks a block collective's plan (plan/blocks.c): all-gather,
 * reduce-scatter and all-to-all. Under native, the island's own call.
 * Otherwise flat (docs/REDUCTION_ORDER.md): chunk k holds elements
 * [k*m, k*m+len) of every rank's block, laid out [rank][len] in a staging
 * slot, crosses in one host collective over all ranks, and is copied back
 * block by block; enqueue_walk.c pipelines the chunks over the slots. */
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"
#include "core/enqueue_walk.h"
#include "core/shared_slots.h"
#include "core/trace.h"
#include "plan/plan.h"

typedef struct {
  gbCommWalk_t walk;   /* first: front and back get it; walk.in.count is the per rank block */
  const char* send;
  char* recv;
} blocks_t;

static gbResult_t copy(blocks_t* b, void* dst, const void* src, size_t elems) {
  return b->walk.comm->dev->copyAsync(dst, src, elems * b->walk.esize, b->walk.stream);
}

/* Chunk i of my send buffer into a slot: my block's part (all-gather, at
 * slot + me*len, or at slot itself over shared slots, where the slot is
 * mine alone), or every block's, laid out [rank][len]; over shared slots
 * (shared: their copy stream, which copies) without my own block, which
 * only I read, from my send buffer. */
static gbResult_t stageOut(blocks_t* b, char* slot, size_t i, int mineAt, void* shared) {
  const gbCommWalk_t* cw = &b->walk;
  size_t len = gbPlanChunkLen(&cw->plan, i), at = i * cw->plan.chunkCount, es = cw->esize;
  void* on = shared ? shared : cw->stream;
  if (cw->in.coll == GB_COLL_ALLGATHER)
    return cw->comm->dev->copyAsync(slot + (size_t)mineAt * len * es, b->send + at * es, len * es, on);
  for (int r = 0; r < cw->comm->nranks; r++)
    if (!shared || r != cw->comm->rank)
      GB_CHECK(cw->comm->dev->copyAsync(slot + (size_t)r * len * es,
                                        b->send + ((size_t)r * cw->in.count + at) * es, len * es, on));
  return gbSuccess;
}

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

static gbResult_t front(gbCommWalk_t* cw, size_t i) {
  blocks_t* b = (blocks_t*)cw;
  const gbPlan_t* p = &cw->plan;
  cw->queued = 1; /* a failure from here on may leave work queued */
  if (p->policy == gbPolicyNative) return runNative(b);
  gbComm_t c = cw->comm;
  int n = c->nranks, me = c->rank;
  size_t len = gbPlanChunkLen(p, i);
  gbSlot_t* s = &cw->slotOf[i % (size_t)p->depth];
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  if (cw->shared) {
    op.seq = c->seq;
    op.group = &cw->hostGroup->algo;
    gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, (uint32_t)i, (uint32_t)p->hostSteps);
    /* All-gather: my block to every member; else block k of my part to member k. */
    size_t block = len * cw->esize;
    gbSharedChunk_t what = {cw->in.coll == GB_COLL_ALLGATHER ? GB_MOVE_ALL : GB_MOVE_BLOCKS, -1,
                            cw->in.coll == GB_COLL_ALLGATHER ? block : (size_t)n * block, block};
    void* out = NULL;
    GB_CHECK(gbSharedSlotsTake(c, cw->shared, cw->stream, what.part, s, &out));
    GB_CHECK(stageOut(b, s->buf, i, 0, out));
    return gbSharedSlotsStaged(c, cw->shared, s, &what, &op);
  }
  GB_CHECK(gbCommSlotAcquire(c, cw->stream, s));
  char* slot = s->buf;
  GB_CHECK(stageOut(b, slot, i, me, NULL));
  GB_CHECK(gbCommSlotStaged(c, s, cw->stream));
  op.kind = cw->in.coll == GB_COLL_ALLGATHER       ? GB_PROXY_ALLGATHER
            : cw->in.coll == GB_COLL_REDUCESCATTER ? GB_PROXY_REDUCESCATTER
                                                   : GB_PROXY_ALLTOALL;
  op.group = &cw->hostGroup->algo;
  op.buf = slot;
  op.out = slot + (size_t)n * len * cw->esize;
  op.count = len;
  op.dtype = cw->in.dtype;
  op.op = cw->ops.host;
  op.divisor = cw->ops.divisor;
  op.scale = cw->ops.scale;
  op.ready = gbCommSlotStagedFlag(c, s);
  op.readyValue = s->use;
  op.done = gbCommSlotDoneFlag(c, s);
  op.doneValue = s->use;
  op.seq = c->seq;
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, (uint32_t)i, (uint32_t)p->hostSteps);
  return gbProxyPost(c->proxy, &op);
}

/* Over shared slots every rank's chunk is read where it lies: block j of
 * rank r's part (all-to-all: j = me; reduce-scatter: all ranks' part of my
 * block, folded x_0 op ... op x_(n-1) in rank order), my own from my send
 * buffer. */
static gbResult_t backShared(blocks_t* b, const gbSlot_t* s, size_t i) {
  const gbCommWalk_t* cw = &b->walk;
  gbComm_t c = cw->comm;
  int n = c->nranks, me = c->rank;
  gbColl_t coll = cw->in.coll;
  size_t count = cw->in.count, len = gbPlanChunkLen(&cw->plan, i), at = i * cw->plan.chunkCount, es = cw->esize;
  size_t mineAt = coll == GB_COLL_ALLGATHER ? 0 : (size_t)me * len; /* in each rank's part */
  GB_CHECK(gbSharedSlotsArrived(c, cw->shared, s, cw->stream));
  if (coll == GB_COLL_REDUCESCATTER) {
    gbReduceArgs_t red = {.dst = b->recv + at * es, .nsrc = n, .count = len, .dtype = cw->in.dtype,
                          .op = cw->ops.host, .divisor = cw->ops.divisor};
    gbResult_t res = gbSuccess;
    for (int r = 0; r < n; r++)
      red.src[r] = r == me ? (const void*)(b->send + ((size_t)me * count + at) * es)
                           : gbSharedSlotsFetch(c, cw->shared, r, s, mineAt * es, len * es, cw->stream, &res);
    GB_CHECK(res);
    GB_CHECK(c->dev->reduceAsync(&red, cw->stream));
  } else {
    for (int r = 0; r < n; r++) {
      const char* mine = b->send + ((coll == GB_COLL_ALLGATHER ? 0 : (size_t)r * count) + at) * es;
      const char* from = r == me ? mine : gbSharedSlotsAt(cw->shared, r, s) + mineAt * es;
      GB_CHECK(copy(b, b->recv + ((size_t)r * count + at) * es, from, len));
    }
  }
  return gbSharedSlotsRead(c, cw->shared, s, cw->stream);
}

static gbResult_t back(gbCommWalk_t* cw, size_t i) {
  blocks_t* b = (blocks_t*)cw;
  const gbPlan_t* p = &cw->plan;
  if (p->policy == gbPolicyNative) return gbSuccess;
  gbComm_t c = cw->comm;
  int n = c->nranks, me = c->rank;
  size_t count = cw->in.count, len = gbPlanChunkLen(p, i), at = i * p->chunkCount, es = cw->esize;
  gbSlot_t* s = &cw->slotOf[i % (size_t)p->depth];
  if (cw->shared) return backShared(b, s, i);
  GB_CHECK(gbCommSlotAwait(c, s, cw->stream));
  char* slot = s->buf;
  if (cw->in.coll == GB_COLL_REDUCESCATTER) {
    GB_CHECK(copy(b, b->recv + at * es, slot + (size_t)me * len * es, len));
  } else {
    const char* from = cw->in.coll == GB_COLL_ALLTOALL ? slot + (size_t)n * len * es : slot;
    for (int r = 0; r < n; r++)
      GB_CHECK(copy(b, b->recv + ((size_t)r * count + at) * es, from + (size_t)r * len * es, len));
  }
  return gbCommSlotRelease(c, s, cw->stream);
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
  gbCommCall_t call = {coll, count, dt, hasOp ? (int)op : -1, -1};
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
