/* A send/recv group, carried out as plan/p2p.c schedules it: messages to
 * peers in my island through the island's own fused group (unless the
 * policy is flat), the others through the host. When every rank runs on
 * this host (the world's shared staging slots), through the send/recv
 * channels (core/shared_p2p.h): each peer's messages as one byte stream in
 * chunks, pipelined, sends on the slots' copy stream and receives on the
 * caller's. Otherwise every outgoing message is staged whole into one host
 * buffer, one proxy step moves them all at once (so two ranks may send each
 * other large messages in one group), and the incoming ones are copied
 * back. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/shared_p2p.h"
#include "core/trace.h"
#include "plan/p2p.h"

_Static_assert(GB_REDUCE_MAX_SRCS <= GB_PLAN_P2P_MAX_PEERS,
               "a world with send/recv channels (at most GB_REDUCE_MAX_SRCS ranks) must fit the plan's streams");

/* The bulk buffer for bytes; a bigger one replaces an outgrown one (which
 * stays allocated: queued work may still use it). */
static gbResult_t bulkFor(gbComm_t c, size_t bytes, gbBulk_t** out) {
  if (c->bulk && c->bulk->bytes >= bytes) {
    *out = c->bulk;
    return gbSuccess;
  }
  gbBulk_t* b = calloc(1, sizeof(*b));
  if (!b) return gbErrorSet(gbSystemError, "out of memory for send/recv staging");
  size_t want = c->bulk && c->bulk->bytes * 2 > bytes ? c->bulk->bytes * 2 : bytes;
  gbResult_t res = c->dev->hostAlloc(&b->base, want ? want : 64);
  if (res == gbSuccess) res = c->dev->hostAlloc((void**)&b->flags, 3 * sizeof(gbFlag_t));
  if (res != gbSuccess) {
    if (b->base) c->dev->hostFree(b->base);
    free(b);
    return res;
  }
  gbCommFlagsInit(c, b->flags, 3);
  b->bytes = want;
  b->older = c->bulk;
  c->bulk = b;
  *out = b;
  return gbSuccess;
}

/* The group's schedule, from the facts plan/p2p.c takes. */
static gbResult_t planOf(gbComm_t c, const gbCommP2p_t* ops, int nops, gbPlanP2p_t* p) {
  gbPlanP2pMsg_t* msgs = calloc((size_t)nops + 1, sizeof(gbPlanP2pMsg_t));
  if (!msgs) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", nops);
  for (int i = 0; i < nops; i++)
    msgs[i] = (gbPlanP2pMsg_t){ops[i].peer, ops[i].isSend, ops[i].count * gbDtypeSize(ops[i].dt)};
  gbPlanP2pInput_t in;
  memset(&in, 0, sizeof(in));
  in.topo = &c->topo;
  in.policy = c->settings.policy;
  in.msgs = msgs;
  in.nmsgs = nops;
  if (c->world.slots) {
    in.channelBytes = gbSharedP2pChunkBytes(c->world.slots);
    in.channelDepth = gbSharedP2pDepth(c->world.slots);
  }
  in.stagingSlots = c->settings.stagingSlots;
  gbResult_t res = gbPlanP2pBuild(&in, p);
  free(msgs);
  return res;
}

static gbResult_t islandPart(gbComm_t c, const gbCommP2p_t* ops, const gbPlanP2p_t* p, void* stream, int* queued) {
  if (p->nisland == 0) return gbSuccess;
  gbIslandP2p_t* is = calloc((size_t)p->nisland, sizeof(gbIslandP2p_t));
  if (!is) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
  int n = 0;
  uint64_t sent = 0;
  for (int i = 0; i < p->nops; i++) {
    if (!p->ops[i].viaIsland) continue;
    is[n++] = (gbIslandP2p_t){c->topo.indexInIsland[ops[i].peer], ops[i].isSend, ops[i].buf, ops[i].count,
                              ops[i].dt};
    if (ops[i].isSend) sent += p->ops[i].msg.bytes;
  }
  gbResult_t res = c->islandComm->ops->sendRecv(c->islandComm, is, n, stream);
  *queued = 1;
  gbTraceAddIslandBytes(c, sent);
  free(is);
  return res;
}

/* ----------------------------------------------- through the channels */

typedef struct {
  gbComm_t comm;
  gbSharedSlots_t* sh;
  const gbCommP2p_t* ops;
  const gbPlanP2p_t* plan;
  void* stream;
  uint32_t posted;                        /* flight-recorder steps so far */
  gbP2pChunk_t lastSent[GB_PLAN_P2P_MAX_PEERS];
} channels_t;

/* Chunk k of peer's stream one way (isSend), copied to or from the slot buf
 * on stream: piece by piece over the messages it spans. */
static gbResult_t copyChunk(const channels_t* w, int peer, int isSend, size_t k, char* buf, void* stream) {
  for (int i = 0; i < w->plan->nops; i++) {
    const gbPlanP2pMsg_t* msg = &w->plan->ops[i].msg;
    if (msg->peer != peer || msg->isSend != isSend) continue;
    size_t from, into, n = gbPlanP2pPiece(w->plan, i, k, &from, &into);
    if (n == 0) continue;
    char* user = (char*)w->ops[i].buf + from;
    GB_CHECK(w->comm->dev->copyAsync(isSend ? buf + into : user, isSend ? user : buf + into, n, stream));
  }
  return gbSuccess;
}

static gbProxyOp_t taggedOp(channels_t* w) {
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.seq = w->comm->seq;
  op.group = &w->comm->world.algo;
  gbTraceTagOp(w->comm, &op, GB_TRACE_ROLE_HOST, w->posted++, (uint32_t)w->plan->hostSteps);
  return op;
}

/* Chunk k of every stream out. */
static gbResult_t sendChunk(void* arg, size_t k) {
  channels_t* w = arg;
  for (int p = 0; p < w->comm->nranks; p++) {
    size_t at, len;
    gbPlanP2pChunk(w->plan, p, 1, k, &at, &len);
    if (len == 0) continue;
    gbP2pChunk_t ch;
    void* copyStream = NULL;
    GB_CHECK(gbSharedP2pSendTake(w->comm, w->sh, p, w->stream, len, &ch, &copyStream));
    GB_CHECK(copyChunk(w, p, 1, k, ch.buf, copyStream));
    w->lastSent[p] = ch;
    gbProxyOp_t op = taggedOp(w);
    GB_CHECK(gbSharedP2pSendStaged(w->comm, w->sh, &ch, len, &op));
  }
  return gbSuccess;
}

/* Chunk k of every stream in. */
static gbResult_t recvChunk(void* arg, size_t k) {
  channels_t* w = arg;
  for (int p = 0; p < w->comm->nranks; p++) {
    size_t at, len;
    gbPlanP2pChunk(w->plan, p, 0, k, &at, &len);
    if (len == 0) continue;
    gbP2pChunk_t ch;
    gbProxyOp_t op = taggedOp(w);
    GB_CHECK(gbSharedP2pRecvArrived(w->comm, w->sh, p, w->stream, &ch, &op));
    GB_CHECK(copyChunk(w, p, 0, k, ch.buf, w->stream));
    GB_CHECK(gbSharedP2pRecvRead(w->comm, w->sh, &ch, w->stream));
  }
  return gbSuccess;
}

static gbResult_t channelsPart(gbComm_t c, const gbCommP2p_t* ops, const gbPlanP2p_t* p, void* stream,
                               int* queued) {
  channels_t w;
  memset(&w, 0, sizeof(w));
  w.comm = c;
  w.sh = c->world.slots;
  w.ops = ops;
  w.plan = p;
  w.stream = stream;
  gbTraceSetPlan(c, -1, (int)p->hostSteps);
  *queued = 1;
  /* My messages to myself: straight from the send buffers to the receive buffers. */
  for (int i = 0; i < p->nops; i++)
    for (int j = 0; j < p->nops; j++) {
      size_t from, into, n = gbPlanP2pSelf(p, i, j, &from, &into);
      if (n > 0) GB_CHECK(c->dev->copyAsync((char*)ops[i].buf + into, (const char*)ops[j].buf + from, n, stream));
    }
  GB_CHECK(gbCommPipeline(p->nchunks, p->depth, sendChunk, recvChunk, &w));
  /* The copy stream reads the send buffers: the group ends when it did. */
  for (int r = 0; r < c->nranks; r++)
    if (r != c->rank && p->sendBytes[r] > 0) GB_CHECK(gbSharedP2pSendDone(c, w.sh, &w.lastSent[r], stream));
  return gbSuccess;
}

/* ------------------------------------------- through one host buffer */

static gbResult_t bulkPart(gbComm_t c, const gbCommP2p_t* ops, const gbPlanP2p_t* p, void* stream, int* queued) {
  gbTraceSetPlan(c, -1, (int)p->hostSteps);
  gbBulk_t* b = NULL;
  GB_CHECK(bulkFor(c, p->bulkBytes, &b));
  gbAlgoP2p_t* list = calloc((size_t)p->nhost, sizeof(gbAlgoP2p_t));
  if (!list) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
  uint64_t use = ++b->uses;
  *queued = 1;
  gbResult_t res = c->dev->flagWait(&b->flags[2], use - 1, stream);
  int k = 0;
  for (int i = 0; i < p->nops && res == gbSuccess; i++) {
    const gbPlanP2pOp_t* op = &p->ops[i];
    if (op->viaIsland) continue;
    char* area = (char*)b->base + op->bulkAt;
    list[k++] = (gbAlgoP2p_t){op->msg.peer, op->msg.isSend, area, op->msg.bytes};
    if (op->msg.isSend && op->msg.bytes) res = c->dev->copyAsync(area, ops[i].buf, op->msg.bytes, stream);
  }
  if (res == gbSuccess) res = c->dev->flagWrite(&b->flags[0], use, stream);
  if (res != gbSuccess) {
    free(list);
    return res;
  }
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.kind = GB_PROXY_SENDRECV;
  op.group = &c->world.algo;
  op.p2p = list;
  op.np2p = p->nhost;
  op.ready = &b->flags[0];
  op.readyValue = use;
  op.done = &b->flags[1];
  op.doneValue = use;
  op.seq = c->seq;
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, 0, 1);
  res = gbProxyPost(c->proxy, &op);
  if (res != gbSuccess) {
    free(list); /* not queued: still this walker's */
    return res;
  }
  GB_CHECK(c->dev->flagWait(&b->flags[1], use, stream));
  for (int i = 0; i < p->nops; i++) {
    const gbPlanP2pOp_t* in = &p->ops[i];
    if (!in->viaIsland && !in->msg.isSend && in->msg.bytes)
      GB_CHECK(c->dev->copyAsync(ops[i].buf, (char*)b->base + in->bulkAt, in->msg.bytes, stream));
  }
  return c->dev->flagWrite(&b->flags[2], use, stream);
}

static gbResult_t hostPart(gbComm_t c, const gbCommP2p_t* ops, const gbPlanP2p_t* p, void* stream, int* queued) {
  if (p->nhost == 0) return gbSuccess; /* (messages to myself alone take no host step, but still a copy) */
  return p->channels ? channelsPart(c, ops, p, stream, queued) : bulkPart(c, ops, p, stream, queued);
}

gbResult_t gbCommEnqueueSendRecv(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream) {
  c->p2pSeq++;
  gbTraceBeginP2p(c, ops, nops);
  uint64_t checks = c->checksPosted;
  gbResult_t res = gbCommCheckSendRecv(c, ops, nops, stream);
  int queued = c->checksPosted != checks;
  gbPlanP2p_t plan;
  memset(&plan, 0, sizeof(plan));
  if (res == gbSuccess) res = planOf(c, ops, nops, &plan);
  if (res == gbSuccess) res = islandPart(c, ops, &plan, stream, &queued);
  if (res == gbSuccess) res = hostPart(c, ops, &plan, stream, &queued);
  gbPlanP2pFree(&plan);
  return gbCommEnqueueEnd(c, stream, queued, res);
}
