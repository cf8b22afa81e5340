/* A send/recv group, carried out as plan/p2p.c schedules it: messages to
 * peers in my island through the island's own fused group (unless the
 * policy is flat), the others through the host, by the stage the plan
 * picks: the world's send/recv channels when every rank runs on this host
 * (stage/channels.c), else the bulk buffer (stage/bulk.c). */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/trace.h"
#include "plan/p2p.h"


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
  if (c->p2p[1]) {
    in.channelBytes = gbStageChannelBytes(c->p2p[1]);
    in.channelDepth = gbStageChannelDepth(c->p2p[1]);
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

/* The host part through the stage plan/p2p.c chose, chunk by chunk. */
typedef struct {
  gbStage_t* stage;
  gbStageP2p_t group;
} hostWalk_t;

static gbResult_t outOf(void* arg, size_t k) {
  hostWalk_t* h = arg;
  return h->stage->ops->p2pOut(h->stage, &h->group, k);
}

static gbResult_t inOf(void* arg, size_t k) {
  hostWalk_t* h = arg;
  return h->stage->ops->p2pIn(h->stage, &h->group, k);
}

static gbResult_t hostPart(gbComm_t c, const gbCommP2p_t* ops, const gbPlanP2p_t* p, void* stream, int* queued) {
  if (p->nhost == 0) return gbSuccess; /* (messages to myself alone take no host step, but still a copy) */
  void** bufs = calloc((size_t)p->nops + 1, sizeof(void*));
  if (!bufs) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
  for (int i = 0; i < p->nops; i++) bufs[i] = ops[i].buf;
  hostWalk_t h;
  memset(&h, 0, sizeof(h));
  h.stage = c->p2p[p->channels];
  h.group.plan = p;
  h.group.bufs = bufs;
  h.group.stream = stream;
  h.group.tag.seq = c->seq;
  h.group.tag.group = &c->world.algo;
  gbTraceTagOp(c, &h.group.tag, GB_TRACE_ROLE_HOST, 0, (uint32_t)p->hostSteps);
  gbTraceSetPlan(c, -1, (int)p->hostSteps);
  *queued = 1;
  gbResult_t res = gbSuccess;
  /* My messages to myself (plan/p2p.c lists them where the stage does not
   * carry them): straight from the send buffers to the receive buffers. */
  for (int j = 0; j < p->nselfCopies && res == gbSuccess; j++) {
    const gbPlanP2pSelfCopy_t* x = &p->selfCopies[j];
    res = c->dev->copyAsync((char*)ops[x->recvOp].buf + x->into, (const char*)ops[x->sendOp].buf + x->from, x->bytes,
                            stream);
  }
  if (res == gbSuccess) res = gbCommPipeline(p->nchunks, p->depth, outOf, inOf, &h);
  if (res == gbSuccess) res = h.stage->ops->p2pEnd(h.stage, &h.group);
  free(bufs);
  return res;
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
