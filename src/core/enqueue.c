/* Walks a plan onto the caller's stream and the proxy: per chunk, the island
 * step, stage out, the host step, stage in, the island step. Chunks are
 * software-pipelined over the staging slots, so while chunk k crosses the
 * bridge, chunk k+1 is staged out and chunk k-1 staged back in. Every rank of
 * an island issues its island steps in the same order (the depth is an agreed
 * setting), so island collectives always match. */
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "plan/plan.h"

typedef struct {
  gbComm_t comm;
  const gbPlan_t* plan;
  gbPlanInput_t in;
  const char* send;
  char* recv;
  size_t esize;
  void* stream;
  gbAlgoGroup_t* hostGroup;
  int depth;
  int queued;          /* something reached the stream or the proxy */
  size_t slotOf[64];
  uint64_t useOf[64];
} walk_t;

/* The last stream task of each collective counts it done (also when the
 * stream drops it after an error), so teardown knows when no stream work
 * still points into the communicator. */
static gbResult_t markerRun(void* arg) {
  (void)arg;
  return gbSuccess;
}
static void markerDone(void* arg) { __atomic_add_fetch(&((gbComm_t)arg)->streamDone->value, 1, __ATOMIC_RELEASE); }

static gbResult_t markStreamWork(gbComm_t c, void* stream) {
  if (!c->dev->launchHostFn) return gbSuccess;
  GB_CHECK(c->dev->launchHostFn(stream, markerRun, c, markerDone));
  c->streamPosted++;
  return gbSuccess;
}

static gbResult_t islandCall(walk_t* w, gbIslandStep_t step, int root, const void* src, void* dst, size_t n) {
  gbIsland_t* is = w->comm->islandComm;
  switch (step) {
    case GB_ISLAND_NONE:
      return gbSuccess;
    case GB_ISLAND_ALLREDUCE:
      return is->ops->allReduce(is, src, dst, n, w->in.dtype, w->in.op, w->stream);
    case GB_ISLAND_REDUCE:
      return is->ops->reduce(is, src, dst, n, w->in.dtype, w->plan->hostOp, 0, w->stream);
    case GB_ISLAND_BCAST:
      return is->ops->broadcast(is, src, dst, n, w->in.dtype, root, w->stream);
  }
  return gbErrorSet(gbInternalError, "unknown island step %d", step);
}

static gbResult_t islandStep(walk_t* w, gbIslandStep_t step, int root, const void* src, void* dst, size_t n) {
  GB_CHECK(islandCall(w, step, root, src, dst, n));
  if (step != GB_ISLAND_NONE) w->queued = 1;
  return gbSuccess;
}

static size_t chunkLen(const walk_t* w, size_t i) {
  size_t off = i * w->plan->chunkCount;
  size_t left = w->in.count - off;
  return left < w->plan->chunkCount ? left : w->plan->chunkCount;
}

/* Island step, then hand the chunk to the proxy. */
static gbResult_t front(walk_t* w, size_t i) {
  const gbPlan_t* p = w->plan;
  gbComm_t c = w->comm;
  size_t n = chunkLen(w, i), off = i * p->chunkCount * w->esize, bytes = n * w->esize;
  const char* sendC = w->send + off;
  char* recvC = w->recv + off;
  GB_CHECK(islandStep(w, p->before, p->beforeRoot, sendC, recvC, n));
  if (p->host == GB_HOST_NONE) return gbSuccess;
  gbStaging_t* s = &c->staging;
  size_t slot = s->next++ % (size_t)s->nslots;
  uint64_t use = ++s->uses[slot];
  w->slotOf[i % (size_t)w->depth] = slot;
  w->useOf[i % (size_t)w->depth] = use;
  char* buf = (char*)s->base + slot * s->slotBytes;
  GB_CHECK(c->dev->flagWait(&s->freed[slot], use - 1, w->stream));
  w->queued = 1;
  if (p->stageOut) GB_CHECK(c->dev->copyAsync(buf, p->before != GB_ISLAND_NONE ? recvC : sendC, bytes, w->stream));
  GB_CHECK(c->dev->flagWrite(&s->staged[slot], use, w->stream));
  gbProxyOp_t op = {w->in.coll == GB_COLL_ALLREDUCE ? GB_PROXY_ALLREDUCE : GB_PROXY_BCAST,
                    w->hostGroup, buf, n, w->in.dtype, p->hostOp, p->hostDivisor, p->hostRoot,
                    &s->staged[slot], use, &s->done[slot], use, c->seq};
  return gbProxyPost(c->proxy, &op);
}

/* Take the proxy's result back, then the second island step. */
static gbResult_t back(walk_t* w, size_t i) {
  const gbPlan_t* p = w->plan;
  gbComm_t c = w->comm;
  size_t n = chunkLen(w, i), off = i * p->chunkCount * w->esize, bytes = n * w->esize;
  char* recvC = w->recv + off;
  if (p->host != GB_HOST_NONE) {
    gbStaging_t* s = &c->staging;
    size_t slot = w->slotOf[i % (size_t)w->depth];
    uint64_t use = w->useOf[i % (size_t)w->depth];
    GB_CHECK(c->dev->flagWait(&s->done[slot], use, w->stream));
    if (p->stageIn) GB_CHECK(c->dev->copyAsync(recvC, (char*)s->base + slot * s->slotBytes, bytes, w->stream));
    GB_CHECK(c->dev->flagWrite(&s->freed[slot], use, w->stream));
  }
  return islandStep(w, p->after, p->afterRoot, recvC, recvC, n);
}

static gbResult_t walkChunks(walk_t* w) {
  size_t depth = (size_t)w->depth, nchunks = w->plan->nchunks;
  for (size_t i = 0; i < nchunks; i++) {
    GB_CHECK(front(w, i));
    if (i + 1 >= depth) GB_CHECK(back(w, i + 1 - depth));
  }
  size_t first = nchunks >= depth ? nchunks - depth + 1 : 0;
  for (size_t k = first; k < nchunks; k++) GB_CHECK(back(w, k));
  return gbSuccess;
}

/* A call that queued nothing fails alone (a bad stream, say); once part of a
 * schedule is queued, peers would wait on the rest: the comm fails, and the
 * end marker still goes on the stream so teardown waits for what is queued. */
static gbResult_t enqueue(gbComm_t c, const gbPlanInput_t* in, const void* send, void* recv, void* stream) {
  gbPlan_t plan;
  GB_CHECK(gbPlanBuild(in, &plan));
  walk_t w;
  memset(&w, 0, sizeof(w));
  w.comm = c;
  w.plan = &plan;
  w.in = *in;
  w.send = send;
  w.recv = recv;
  w.esize = gbDtypeSize(in->dtype);
  w.stream = stream;
  w.hostGroup = plan.host == GB_HOST_BRIDGE ? &c->bridge.algo : &c->world.algo;
  w.depth = c->settings.stagingSlots < 64 ? c->settings.stagingSlots : 64;
  c->seq++;
  gbResult_t res = walkChunks(&w);
  if (w.queued) {
    gbResult_t marked = markStreamWork(c, stream);
    if (res == gbSuccess) res = marked;
    if (res != gbSuccess) gbCommFail(c, res);
  }
  if (res != gbSuccess) return res;
  GB_TRACE(GB_LOG_COLL, "collective #%llu enqueued: %zu elements in %zu chunks, policy %d",
           (unsigned long long)c->seq, in->count, plan.nchunks, plan.policy);
  return gbSuccess;
}

static void planInput(gbComm_t c, gbPlanInput_t* in, gbColl_t coll, size_t count, gbDataType_t dt) {
  memset(in, 0, sizeof(*in));
  in->coll = coll;
  in->dtype = dt;
  in->count = count;
  in->policy = c->policy;
  in->chunkBytes = (size_t)c->settings.chunkBytes;
  in->topo = &c->topo;
}

gbResult_t gbCommEnqueueAllReduce(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  gbRedOp_t op, void* stream) {
  gbPlanInput_t in;
  planInput(c, &in, GB_COLL_ALLREDUCE, count, dt);
  in.op = op;
  return enqueue(c, &in, send, recv, stream);
}

gbResult_t gbCommEnqueueBroadcast(gbComm_t c, const void* send, void* recv, size_t count, gbDataType_t dt, int root,
                                  void* stream) {
  gbPlanInput_t in;
  planInput(c, &in, GB_COLL_BROADCAST, count, dt);
  in.root = root;
  return enqueue(c, &in, send, recv, stream);
}
