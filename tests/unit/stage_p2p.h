/* A send/recv group through a stage (stage_rig.h), as core's walker runs
 * it: every member sends every member (itself too) a message of its own
 * length and bytes, plan/p2p.c schedules the group (policy flat: every
 * message over the host), the stage's chunks are pipelined, and every
 * received byte is compared with what its sender wrote. */
#ifndef GB_TESTS_UNIT_STAGE_P2P_H
#define GB_TESTS_UNIT_STAGE_P2P_H

#include "unit/plan_layout.h"
#include "unit/stage_rig.h"

/* Bytes from member `from` to member `to` in round r: several chunks of a
 * channel, and never the same length twice. */
static inline size_t p2pBytes(int from, int to, int r) { return 20000 + 37011 * (size_t)(from + 2 * to) + 4099 * (size_t)r; }
static inline uint8_t p2pByte(int from, int to, size_t j) { return (uint8_t)(from * 31 + to * 7 + j * 13); }

typedef struct {
  gbStage_t* st;
  gbStageP2p_t g;
} p2pWalk_t;

/* One group over st; channelBytes/channelDepth as plan/p2p.c takes them
 * (0: bulk). Round r changes the lengths. */
static inline int p2pGroup(rigMember_t* m, gbStage_t* st, size_t channelBytes, int channelDepth, int r) {
  int n = m->n, nops = 2 * n, ok = 0;
  layout_t l;
  int ones[RIG_MAX];
  for (int k = 0; k < n; k++) ones[k] = 1;
  makeLayout(&l, ones, n, m->me);
  gbPlanP2pMsg_t msgs[2 * RIG_MAX];
  void* bufs[2 * RIG_MAX] = {0};
  for (int p = 0; p < n; p++) {
    msgs[2 * p] = (gbPlanP2pMsg_t){p, 1, p2pBytes(m->me, p, r)};
    msgs[2 * p + 1] = (gbPlanP2pMsg_t){p, 0, p2pBytes(p, m->me, r)};
  }
  gbPlanP2pInput_t in = {.topo = &l.topo, .policy = gbPolicyFlat, .msgs = msgs, .nmsgs = nops,
                         .channelBytes = channelBytes, .channelDepth = channelDepth, .stagingSlots = 2};
  gbPlanP2p_t plan;
  memset(&plan, 0, sizeof plan);
  for (int i = 0; i < nops; i++) {
    bufs[i] = calloc(1, msgs[i].bytes);
    if (!bufs[i]) {
      rigFail(m->rig, "member %d: out of memory", m->me);
      goto done;
    }
    if (msgs[i].isSend)
      for (size_t j = 0; j < msgs[i].bytes; j++) ((uint8_t*)bufs[i])[j] = p2pByte(m->me, msgs[i].peer, j);
  }
  if (gbPlanP2pBuild(&in, &plan) != gbSuccess || plan.channels != (channelBytes > 0)) {
    rigFail(m->rig, "member %d: the plan (channels %d): %s", m->me, plan.channels, gbErrorLast());
    goto done;
  }
  p2pWalk_t w = {.st = st};
  w.g.plan = &plan;
  w.g.bufs = bufs;
  w.g.stream = m->stream;
  w.g.tag.group = &m->g;
  w.g.tag.seq = (uint64_t)r + 1;
  gbResult_t res = gbSuccess;
  for (int j = 0; j < plan.nselfCopies && res == gbSuccess; j++) {
    const gbPlanP2pSelfCopy_t* x = &plan.selfCopies[j];
    res = m->ctx.dev->copyAsync((char*)bufs[x->recvOp] + x->into, (const char*)bufs[x->sendOp] + x->from, x->bytes,
                                m->stream);
  }
  size_t d = (size_t)plan.depth;
  for (size_t k = 0; k < plan.nchunks + d - 1 && res == gbSuccess; k++) {
    if (k < plan.nchunks) res = st->ops->p2pOut(st, &w.g, k);
    if (res == gbSuccess && k + 1 >= d) res = st->ops->p2pIn(st, &w.g, k + 1 - d);
  }
  if (res == gbSuccess) res = st->ops->p2pEnd(st, &w.g);
  if (res != gbSuccess) {
    rigFail(m->rig, "member %d: %s group: %s", m->me, st->ops->name, gbErrorLast());
    goto done;
  }
  if (!rigSync(m)) goto done;
  for (int i = 0; i < nops; i++) {
    if (msgs[i].isSend) continue;
    m->checks++; /* one per message: every byte compared */
    for (size_t j = 0; j < msgs[i].bytes; j++) {
      uint8_t got = ((uint8_t*)bufs[i])[j], want = p2pByte(msgs[i].peer, m->me, j);
      if (got != want) {
        rigFail(m->rig, "member %d: %s, round %d: byte %zu from %d is %u, want %u", m->me, st->ops->name, r, j,
                msgs[i].peer, got, want);
        goto done;
      }
    }
  }
  ok = 1;
done:
  gbPlanP2pFree(&plan);
  for (int i = 0; i < nops; i++) free(bufs[i]);
  return ok;
}

#endif
