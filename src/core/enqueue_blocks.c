/* The block collectives: all-gather, reduce-scatter and all-to-all. In one
 * island under native they are the island's own calls. Across islands they
 * run flat (docs/REDUCTION_ORDER.md): chunk k holds elements [k*m, k*m+len)
 * of every rank's block, laid out [rank][len] in a staging slot, crosses in
 * one host collective over all ranks, and is copied back block by block;
 * chunks are pipelined over the slots as in enqueue.c. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/shared_slots.h"
#include "core/trace.h"
#include "plan/plan.h"

typedef struct {
  gbComm_t comm;
  gbColl_t coll;
  const char* send;
  char* recv;
  size_t count;      /* per rank block */
  gbDataType_t dt;
  size_t es;
  gbCommOps_t ops;
  void* stream;
  size_t m;          /* elements of each block per chunk */
  int depth;
  gbSharedSlots_t* shared; /* every rank on this host: the world's shared slots (core/shared_slots.h) */
  gbSlot_t slotOf[64];
} blocks_t;

static size_t lenOf(const blocks_t* b, size_t i) {
  size_t left = b->count - i * b->m;
  return left < b->m ? left : b->m;
}

static gbResult_t copy(blocks_t* b, void* dst, const void* src, size_t elems) {
  return b->comm->dev->copyAsync(dst, src, elems * b->es, b->stream);
}

/* Chunk i of my send buffer into a slot: my block's part (all-gather, at
 * slot + me*len, or at slot itself over shared slots, where the slot is
 * mine alone), or every block's, laid out [rank][len]; over shared slots
 * (shared: their copy stream, which copies) without my own block, which
 * only I read, from my send buffer. */
static gbResult_t stageOut(blocks_t* b, char* slot, size_t i, int mineAt, void* shared) {
  size_t len = lenOf(b, i), at = i * b->m, es = b->es;
  void* on = shared ? shared : b->stream;
  if (b->coll == GB_COLL_ALLGATHER)
    return b->comm->dev->copyAsync(slot + (size_t)mineAt * len * es, b->send + at * es, len * es, on);
  for (int r = 0; r < b->comm->nranks; r++)
    if (!shared || r != b->comm->rank)
      GB_CHECK(b->comm->dev->copyAsync(slot + (size_t)r * len * es, b->send + ((size_t)r * b->count + at) * es,
                                       len * es, on));
  return gbSuccess;
}

static gbResult_t front(blocks_t* b, size_t i) {
  gbComm_t c = b->comm;
  int n = c->nranks, me = c->rank;
  size_t len = lenOf(b, i);
  gbSlot_t* s = &b->slotOf[i % (size_t)b->depth];
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  if (b->shared) {
    op.seq = c->seq;
    op.group = &c->world.algo;
    gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, (uint32_t)i, (uint32_t)((b->count + b->m - 1) / b->m));
    void* out = NULL;
    GB_CHECK(gbSharedSlotsTake(c, b->shared, b->stream, s, &out));
    GB_CHECK(stageOut(b, s->buf, i, 0, out));
    /* Sent: what the others read (every block but mine, or my block to all). */
    size_t sent = (b->coll == GB_COLL_ALLGATHER ? 1 : (size_t)(n - 1)) * len * b->es;
    return gbSharedSlotsStaged(c, b->shared, s, sent, &op);
  }
  GB_CHECK(gbCommSlotAcquire(c, b->stream, s));
  char* slot = s->buf;
  GB_CHECK(stageOut(b, slot, i, me, NULL));
  GB_CHECK(gbCommSlotStaged(c, s, b->stream));
  op.kind = b->coll == GB_COLL_ALLGATHER ? GB_PROXY_ALLGATHER
            : b->coll == GB_COLL_REDUCESCATTER ? GB_PROXY_REDUCESCATTER : GB_PROXY_ALLTOALL;
  op.group = &c->world.algo;
  op.buf = slot;
  op.out = slot + (size_t)n * len * b->es;
  op.count = len;
  op.dtype = b->dt;
  op.op = b->ops.host;
  op.divisor = b->ops.divisor;
  op.scale = b->ops.scale;
  op.ready = gbCommSlotStagedFlag(c, s);
  op.readyValue = s->use;
  op.done = gbCommSlotDoneFlag(c, s);
  op.doneValue = s->use;
  op.seq = c->seq;
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, (uint32_t)i, (uint32_t)((b->count + b->m - 1) / b->m));
  return gbProxyPost(c->proxy, &op);
}

/* Over shared slots every rank's chunk is read where it lies: block j of
 * rank r's part (all-to-all: j = me; reduce-scatter: all ranks' part of my
 * block, folded x_0 op ... op x_(n-1) in rank order), my own from my send
 * buffer. */
static gbResult_t backShared(blocks_t* b, const gbSlot_t* s, size_t i) {
  gbComm_t c = b->comm;
  int n = c->nranks, me = c->rank;
  size_t len = lenOf(b, i), at = i * b->m, es = b->es;
  size_t mineAt = b->coll == GB_COLL_ALLGATHER ? 0 : (size_t)me * len; /* in each rank's part */
  GB_CHECK(gbSharedSlotsArrived(c, b->shared, s, b->stream));
  if (b->coll == GB_COLL_REDUCESCATTER) {
    gbReduceArgs_t red = {.dst = b->recv + at * es, .nsrc = n, .count = len, .dtype = b->dt, .op = b->ops.host,
                          .divisor = b->ops.divisor};
    gbResult_t res = gbSuccess;
    for (int r = 0; r < n; r++)
      red.src[r] = r == me ? (const void*)(b->send + ((size_t)me * b->count + at) * es)
                           : gbSharedSlotsFetch(c, b->shared, r, s, mineAt * es, len * es, b->stream, &res);
    GB_CHECK(res);
    GB_CHECK(c->dev->reduceAsync(&red, b->stream));
  } else {
    for (int r = 0; r < n; r++) {
      const char* mine = b->send + ((b->coll == GB_COLL_ALLGATHER ? 0 : (size_t)r * b->count) + at) * es;
      const char* from = r == me ? mine : gbSharedSlotsAt(b->shared, r, s) + mineAt * es;
      GB_CHECK(copy(b, b->recv + ((size_t)r * b->count + at) * es, from, len));
    }
  }
  return gbSharedSlotsRead(c, b->shared, s, b->stream);
}

static gbResult_t back(blocks_t* b, size_t i) {
  gbComm_t c = b->comm;
  int n = c->nranks, me = c->rank;
  size_t len = lenOf(b, i), at = i * b->m;
  gbSlot_t* s = &b->slotOf[i % (size_t)b->depth];
  if (b->shared) return backShared(b, s, i);
  GB_CHECK(gbCommSlotAwait(c, s, b->stream));
  char* slot = s->buf;
  if (b->coll == GB_COLL_REDUCESCATTER) {
    GB_CHECK(copy(b, b->recv + at * b->es, slot + (size_t)me * len * b->es, len));
  } else {
    const char* from = b->coll == GB_COLL_ALLTOALL ? slot + (size_t)n * len * b->es : slot;
    for (int r = 0; r < n; r++)
      GB_CHECK(copy(b, b->recv + ((size_t)r * b->count + at) * b->es, from + (size_t)r * len * b->es, len));
  }
  return gbCommSlotRelease(c, s, b->stream);
}

static gbResult_t frontFn(void* b, size_t i) { return front(b, i); }
static gbResult_t backFn(void* b, size_t i) { return back(b, i); }

/* All-to-all inside one island: one fused group of sends and receives. */
static gbResult_t islandAllToAll(blocks_t* b) {
  gbIsland_t* is = b->comm->islandComm;
  int n = is->size;
  gbIslandP2p_t* ops = calloc(2 * (size_t)n, sizeof(gbIslandP2p_t));
  if (!ops) return gbErrorSet(gbSystemError, "out of memory for an all-to-all of %d ranks", n);
  for (int r = 0; r < n; r++) {
    ops[2 * r] = (gbIslandP2p_t){r, 1, (void*)(b->send + (size_t)r * b->count * b->es), b->count, b->dt};
    ops[2 * r + 1] = (gbIslandP2p_t){r, 0, b->recv + (size_t)r * b->count * b->es, b->count, b->dt};
  }
  gbResult_t res = is->ops->sendRecv(is, ops, 2 * n, b->stream);
  free(ops);
  return res;
}

static gbResult_t runNative(blocks_t* b) {
  gbIsland_t* is = b->comm->islandComm;
  /* The recorder's island bytes: this rank's input to the island call. */
  gbTraceAddIslandBytes(b->comm, b->count * b->es * (b->coll == GB_COLL_ALLGATHER ? 1 : (size_t)is->size));
  if (b->coll == GB_COLL_ALLGATHER) return is->ops->allGather(is, b->send, b->recv, b->count, b->dt, b->stream);
  if (b->coll == GB_COLL_REDUCESCATTER)
    return is->ops->reduceScatter(is, b->send, b->recv, b->count, b->dt, b->ops.island, b->stream);
  return islandAllToAll(b);
}

static gbResult_t enqueueBlocks(gbComm_t c, gbColl_t coll, const void* send, void* recv, size_t count,
                                gbDataType_t dt, gbRedOp_t op, int hasOp, void* stream) {
  blocks_t b;
  memset(&b, 0, sizeof(b));
  b.comm = c;
  b.coll = coll;
  b.send = send;
  b.recv = recv;
  b.count = count;
  b.dt = dt;
  b.es = gbDtypeSize(dt);
  b.stream = stream;
  if (hasOp) GB_CHECK(gbCommResolveOp(c, op, dt, &b.ops));
  gbCommCall_t call = {coll, count, dt, hasOp ? (int)op : -1, -1};
  if (count == 0) return gbCommEnqueueEmpty(c, &call, stream);
  gbPlanInput_t in;
  memset(&in, 0, sizeof(in));
  in.coll = coll;
  in.dtype = dt;
  in.count = count;
  in.policy = c->settings.policy;
  in.topo = &c->topo;
  in.thresholds = &c->thresholds;
  int policy = gbPlanCallPolicy(&in, count * b.es * (size_t)c->nranks);
  int factor = coll == GB_COLL_ALLTOALL ? 2 : 1;
  if (policy != gbPolicyNative) {
    size_t per = c->staging.slotBytes / (b.es * (size_t)c->nranks * (size_t)factor);
    if (per == 0)
      return gbErrorSet(gbInvalidUsage, "%s: one element per rank (%d ranks, %zu bytes) does not fit a %zu-byte "
                        "staging slot; raise GPUBRIDGE_CHUNK_BYTES", gbPlanCollName(coll), c->nranks, b.es,
                        c->staging.slotBytes);
    b.m = per;
    b.depth = c->settings.stagingSlots < 64 ? c->settings.stagingSlots : 64;
    if (!(hasOp && b.ops.scale)) b.shared = c->world.slots; /* a PreMulSum contribution is scaled by the proxy */
  }
  c->seq++;
  gbTraceBegin(c, coll, count, dt, call.op, -1);
  gbTraceSetPlan(c, policy, policy == gbPolicyNative ? 0 : (int)((count + b.m - 1) / b.m));
  uint64_t checks = c->checksPosted;
  gbResult_t res = gbCommCheckCall(c, &call, stream);
  int queued = c->checksPosted != checks;
  if (res == gbSuccess && policy == gbPolicyNative) {
    res = runNative(&b);
    queued = 1;
  } else if (res == gbSuccess) {
    if (hasOp) res = gbCommStageScalar(c, &b.ops, stream);
    if (res == gbSuccess) {
      queued = 1;
      res = gbCommPipeline((count + b.m - 1) / b.m, b.depth, frontFn, backFn, &b);
    }
  }
  return gbCommEnqueueEnd(c, stream, queued, res);
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
