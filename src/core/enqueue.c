/* Walks a plan onto the caller's stream and the proxy: per chunk, the island
 * step, stage out, the host step, stage in, the island step. Chunks are
 * software-pipelined over the staging slots, so while chunk k crosses the
 * bridge, chunk k+1 is staged out and chunk k-1 staged back in. Every rank of
 * an island issues its island steps in the same order (the depth is an agreed
 * setting), so island collectives always match. All-reduce, broadcast and
 * reduce; the block collectives and send/recv have their own walkers. */
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/shared_slots.h"
#include "core/trace.h"
#include "plan/plan.h"

typedef struct {
  gbComm_t comm;
  const gbPlan_t* plan;
  gbPlanInput_t in;
  gbCommOps_t ops;
  const char* send;
  char* recv;
  size_t esize;
  void* stream;
  gbAlgoGroup_t* hostGroup;
  int depth;
  int queued;          /* something reached the stream or the proxy */
  int direct;          /* all-reduce on host memory: the proxy works in recv, no slot copies */
  size_t hostChunk;    /* > 0: the proxy runs the call's chunks as one step, this many elements each */
  gbSharedSlots_t* shared; /* the host group is on one host: its shared slots (core/shared_slots.h) */
  uint32_t posted, nposts; /* host steps posted so far, and in all (the flight recorder's chunk k of n) */
  gbSlot_t slotOf[64];
} walk_t;

static gbResult_t islandCall(walk_t* w, gbIslandStep_t step, int root, const void* src, void* dst, size_t n) {
  gbIsland_t* is = w->comm->islandComm;
  int native = w->plan->policy == gbPolicyNative;
  switch (step) {
    case GB_ISLAND_NONE:
      return gbSuccess;
    case GB_ISLAND_ALLREDUCE:
      return is->ops->allReduce(is, src, dst, n, w->in.dtype, w->ops.island, w->stream);
    case GB_ISLAND_REDUCE:
      return is->ops->reduce(is, src, dst, n, w->in.dtype, native ? w->ops.island : w->ops.partial, root, w->stream);
    case GB_ISLAND_BCAST:
      return is->ops->broadcast(is, src, dst, n, w->in.dtype, root, w->stream);
  }
  return gbErrorSet(gbInternalError, "unknown island step %d", step);
}

static gbResult_t islandStep(walk_t* w, gbIslandStep_t step, int root, const void* src, void* dst, size_t n) {
  if (n == 0) return gbSuccess;
  GB_CHECK(islandCall(w, step, root, src, dst, n));
  if (step != GB_ISLAND_NONE) {
    w->queued = 1;
    gbTraceAddIslandBytes(w->comm, n * w->esize);
  }
  return gbSuccess;
}

static size_t chunkLen(const walk_t* w, size_t i) {
  size_t off = i * w->plan->chunkCount;
  size_t left = w->in.count - off;
  return left < w->plan->chunkCount ? left : w->plan->chunkCount;
}

/* split-rail: slice r of chunk i (begin and length, in elements). */
static void railSlice(const walk_t* w, size_t n, int r, size_t* begin, size_t* len) {
  int k = w->plan->rails;
  size_t q = n / (size_t)k, rem = n % (size_t)k;
  size_t b = q * (size_t)r + rem * (size_t)r / (size_t)k;
  size_t e = q * (size_t)(r + 1) + rem * (size_t)(r + 1) / (size_t)k;
  *begin = b;
  *len = e - b;
}

/* The part of chunk i this rank stages (its rail's slice under split-rail). */
static void stagedPart(const walk_t* w, size_t i, size_t* off, size_t* n) {
  *off = i * w->plan->chunkCount;
  *n = chunkLen(w, i);
  if (w->plan->rails > 0 && w->plan->myRail >= 0) {
    size_t b, len;
    railSlice(w, *n, w->plan->myRail, &b, &len);
    *off += b;
    *n = len;
  }
}

static gbResult_t islandSteps(walk_t* w, size_t i, gbIslandStep_t step, int root, int fromSend) {
  const gbPlan_t* p = w->plan;
  size_t off = i * p->chunkCount, n = chunkLen(w, i);
  const char* src = (fromSend ? w->send : w->recv) + off * w->esize;
  char* dst = w->recv + off * w->esize;
  if (p->rails == 0) return islandStep(w, step, root, src, dst, n);
  for (int r = 0; r < p->rails; r++) {
    size_t b, len;
    railSlice(w, n, r, &b, &len);
    GB_CHECK(islandStep(w, step, r, src + b * w->esize, dst + b * w->esize, len));
  }
  return gbSuccess;
}

static gbProxyKind_t proxyKind(gbColl_t coll) {
  if (coll == GB_COLL_ALLREDUCE) return GB_PROXY_ALLREDUCE;
  if (coll == GB_COLL_REDUCE) return GB_PROXY_REDUCE;
  return GB_PROXY_BCAST;
}

/* Island step, then hand the chunk to the proxy. */
static gbResult_t front(walk_t* w, size_t i) {
  const gbPlan_t* p = w->plan;
  gbComm_t c = w->comm;
  GB_CHECK(islandSteps(w, i, p->before, p->beforeRoot, 1));
  if (p->host == GB_HOST_NONE) return gbSuccess;
  size_t off, n;
  stagedPart(w, i, &off, &n);
  if (n == 0) return gbSuccess;
  gbSlot_t* s = &w->slotOf[i % (size_t)w->depth];
  size_t bytes = n * w->esize;
  const char* src = (p->before != GB_ISLAND_NONE ? w->recv : w->send) + off * w->esize;
  if (w->shared) {
    gbProxyOp_t op;
    memset(&op, 0, sizeof(op));
    op.seq = c->seq;
    op.group = w->hostGroup;
    gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, w->posted++, w->nposts);
    void* out = NULL;
    GB_CHECK(gbSharedSlotsTake(c, w->shared, w->stream, s, &out));
    w->queued = 1;
    if (p->stageOut) GB_CHECK(c->dev->copyAsync(s->buf, src, bytes, out));
    return gbSharedSlotsStaged(c, w->shared, s, p->stageOut ? bytes : 0, &op);
  }
  GB_CHECK(gbCommSlotAcquire(c, w->stream, s));
  w->queued = 1;
  void* buf = w->direct ? (void*)(w->recv + off * w->esize) : s->buf;
  const void* scale = p->host == GB_HOST_WORLD ? w->ops.scale : NULL; /* elsewhere the island step scaled */
  /* The proxy reads a direct all-reduce's input where it is, unless it must
   * scale it first (never in the caller's send buffer). */
  const void* input = NULL;
  if (p->stageOut && src != buf) {
    if (w->direct && !scale) input = src;
    else GB_CHECK(c->dev->copyAsync(buf, src, bytes, w->stream));
  }
  GB_CHECK(gbCommSlotStaged(c, s, w->stream));
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.kind = proxyKind(w->in.coll);
  op.group = w->hostGroup;
  op.buf = buf;
  op.src = input;
  op.count = n;
  op.chunkCount = w->hostChunk;
  op.dtype = w->in.dtype;
  op.op = w->ops.host;
  op.divisor = w->ops.divisor;
  op.root = p->hostRoot;
  op.scale = scale;
  op.ready = gbCommSlotStagedFlag(c, s);
  op.readyValue = s->use;
  op.done = gbCommSlotDoneFlag(c, s);
  op.doneValue = s->use;
  op.seq = c->seq;
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, w->posted++, w->nposts);
  return gbProxyPost(c->proxy, &op);
}

/* The host steps front() posts: chunks with a staged part. */
static uint32_t hostPosts(const walk_t* w) {
  if (w->plan->host == GB_HOST_NONE) return 0;
  uint32_t k = 0;
  for (size_t i = 0; i < w->plan->nchunks; i++) {
    size_t off, n;
    stagedPart(w, i, &off, &n);
    k += n > 0;
  }
  return k;
}

/* Over shared slots: the members' chunks arrived; reduce them (all-reduce,
 * and reduce on its root) or copy the root's (broadcast), then let the
 * slot go. */
static gbResult_t backShared(walk_t* w, const gbSlot_t* s, size_t off, size_t n) {
  const gbPlan_t* p = w->plan;
  gbComm_t c = w->comm;
  gbSharedSlots_t* sh = w->shared;
  char* dst = w->recv + off * w->esize;
  GB_CHECK(gbSharedSlotsArrived(c, sh, s, w->stream));
  if (p->stageIn && w->in.coll == GB_COLL_BROADCAST) {
    GB_CHECK(c->dev->copyAsync(dst, gbSharedSlotsAt(sh, p->hostRoot, s), n * w->esize, w->stream));
  } else if (p->stageIn) {
    const char* mine = (p->before != GB_ISLAND_NONE ? w->recv : w->send) + off * w->esize;
    gbReduceArgs_t red = {.dst = dst, .nsrc = gbSharedSlotsMembers(sh), .count = n, .dtype = w->in.dtype,
                          .op = w->ops.host, .divisor = w->ops.divisor,
                          .ring = gbAlgoFoldsRing(w->hostGroup, n * w->esize)};
    gbResult_t res = gbSuccess;
    for (int k = 0; k < red.nsrc; k++)
      red.src[k] = k == gbSharedSlotsMe(sh) ? (const void*)mine
                                            : gbSharedSlotsFetch(c, sh, k, s, 0, n * w->esize, w->stream, &res);
    GB_CHECK(res);
    GB_CHECK(c->dev->reduceAsync(&red, w->stream));
  }
  return gbSharedSlotsRead(c, sh, s, w->stream);
}

/* Take the proxy's result back, then the second island step. */
static gbResult_t back(walk_t* w, size_t i) {
  const gbPlan_t* p = w->plan;
  gbComm_t c = w->comm;
  size_t off, n;
  stagedPart(w, i, &off, &n);
  if (w->shared && n > 0) {
    GB_CHECK(backShared(w, &w->slotOf[i % (size_t)w->depth], off, n));
  } else if (p->host != GB_HOST_NONE && n > 0) {
    gbSlot_t* s = &w->slotOf[i % (size_t)w->depth];
    GB_CHECK(gbCommSlotAwait(c, s, w->stream));
    if (p->stageIn && !w->direct)
      GB_CHECK(c->dev->copyAsync(w->recv + off * w->esize, s->buf, n * w->esize, w->stream));
    GB_CHECK(gbCommSlotRelease(c, s, w->stream));
  }
  return islandSteps(w, i, p->after, p->afterRoot, 0);
}

static gbResult_t frontFn(void* w, size_t i) { return front(w, i); }
static gbResult_t backFn(void* w, size_t i) { return back(w, i); }

static gbCommGroup_t* hostGroupOf(gbComm_t c, const gbPlan_t* p) {
  if (p->host == GB_HOST_BRIDGE) return &c->bridge;
  if (p->host == GB_HOST_RAIL) return &c->rails[p->myRail];
  return &c->world;
}

/* A collective whose host group shares staging slots takes them, unless
 * the proxy must scale a PreMulSum contribution first (flat steps). */
static gbSharedSlots_t* sharedSlotsOf(const gbCommGroup_t* g, const gbPlan_t* p, const gbCommOps_t* ops) {
  if (p->host == GB_HOST_NONE || !g->slots) return NULL;
  if (p->host == GB_HOST_WORLD && ops->scale) return NULL;
  return g->slots;
}

/* A count-0 call: a no-op, as in NCCL, unless the call check is on; then it
 * takes part in it (numbered like any call), so a rank that calls count 0
 * where the others call count N is named instead of falling out of step. */
gbResult_t gbCommEnqueueEmpty(gbComm_t c, const gbCommCall_t* call, void* stream) {
  uint64_t checks = c->checksPosted;
  c->seq++;
  gbTraceBegin(c, call->coll, 0, call->dtype, call->op, call->root);
  gbResult_t res = gbCommCheckCall(c, call, stream);
  if (c->checksPosted == checks) {
    c->seq--; /* checks off (or this call failed alone): no number taken */
    gbTraceCancel(c);
    return res;
  }
  return gbCommEnqueueEnd(c, stream, 1, res);
}

static gbResult_t enqueue(gbComm_t c, const gbPlanInput_t* in, const gbCommOps_t* ops, const void* send, void* recv,
                          void* stream) {
  if (in->count == 0) {
    gbCommCall_t call = {in->coll, 0, in->dtype, ops ? (int)in->op : -1, in->root};
    return gbCommEnqueueEmpty(c, &call, stream);
  }
  gbPlan_t plan;
  GB_CHECK(gbPlanBuild(in, &plan));
  walk_t w;
  memset(&w, 0, sizeof(w));
  w.comm = c;
  w.plan = &plan;
  w.in = *in;
  if (ops) w.ops = *ops;
  w.send = send;
  w.recv = recv;
  w.esize = gbDtypeSize(in->dtype);
  w.stream = stream;
  gbCommGroup_t* hostGroup = hostGroupOf(c, &plan);
  w.hostGroup = &hostGroup->algo;
  w.shared = sharedSlotsOf(hostGroup, &plan, &w.ops);
  w.depth = c->settings.stagingSlots < 64 ? c->settings.stagingSlots : 64;
  /* Host memory needs no staging for all-reduce: recv is where the result
   * goes and what every later step reads (the slot still orders the steps).
   * Broadcast and reduce keep the slot: a non-root's recv may be unused. */
  w.direct = c->dev->hostMemory && in->coll == GB_COLL_ALLREDUCE && !w.shared;
  /* With no island step between them, the chunks of a direct all-reduce go
   * to the proxy as one step that runs them back to back: the same host
   * all-reduces in the same order, without a hand-over between threads per
   * chunk, all within the collective's one deadline (the stream's wait for
   * the step is bounded by the same timeout). */
  if (w.direct && plan.before == GB_ISLAND_NONE && plan.after == GB_ISLAND_NONE && plan.rails == 0 &&
      plan.nchunks > 1) {
    w.hostChunk = plan.chunkCount;
    plan.chunkCount = in->count;
    plan.nchunks = 1;
  }
  c->seq++;
  gbCommCall_t call = {in->coll, in->count, in->dtype, ops ? (int)in->op : -1, in->root};
  gbTraceBegin(c, in->coll, in->count, in->dtype, call.op, in->root);
  w.nposts = hostPosts(&w);
  gbTraceSetPlan(c, plan.policy, (int)w.nposts);
  uint64_t checks = c->checksPosted;
  gbResult_t res = gbCommCheckCall(c, &call, stream);
  w.queued = c->checksPosted != checks;
  if (res == gbSuccess) {
    if (ops && plan.host == GB_HOST_WORLD) res = gbCommStageScalar(c, ops, stream);
  }
  if (res == gbSuccess) res = gbCommPipeline(plan.nchunks, w.depth, frontFn, backFn, &w);
  GB_CHECK(gbCommEnqueueEnd(c, stream, w.queued, res));
  GB_TRACE(GB_LOG_COLL, "collective #%llu (%s) enqueued: %zu elements in %zu chunks, policy %s",
           (unsigned long long)c->seq, gbPlanCollName(in->coll), in->count, plan.nchunks,
           gbPlanPolicyName(plan.policy));
  return gbSuccess;
}

static void planInput(gbComm_t c, gbPlanInput_t* in, gbColl_t coll, size_t count, gbDataType_t dt) {
  memset(in, 0, sizeof(*in));
  in->coll = coll;
  in->dtype = dt;
  in->count = count;
  in->policy = c->settings.policy;
  in->chunkBytes = (size_t)c->settings.chunkBytes;
  in->rails = c->nrails;
  in->topo = &c->topo;
  in->thresholds = &c->thresholds;
}

gbResult_t gbCommEnqueueAllReduce(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  gbRedOp_t op, void* stream) {
  gbPlanInput_t in;
  gbCommOps_t ops;
  GB_CHECK(gbCommResolveOp(c, op, dt, &ops));
  planInput(c, &in, GB_COLL_ALLREDUCE, count, dt);
  in.op = op;
  return enqueue(c, &in, &ops, send, recv, stream);
}

gbResult_t gbCommEnqueueReduce(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                               gbRedOp_t op, int root, void* stream) {
  gbPlanInput_t in;
  gbCommOps_t ops;
  GB_CHECK(gbCommResolveOp(c, op, dt, &ops));
  planInput(c, &in, GB_COLL_REDUCE, count, dt);
  in.op = op;
  in.root = root;
  return enqueue(c, &in, &ops, send, recv, stream);
}

gbResult_t gbCommEnqueueBroadcast(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt, int root,
                                  void* stream) {
  gbPlanInput_t in;
  planInput(c, &in, GB_COLL_BROADCAST, count, dt);
  in.root = root;
  return enqueue(c, &in, NULL, send, recv, stream);
}
