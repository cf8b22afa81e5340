/* A send/recv group: peers in my island are reached through the island's
 * own fused group (unless the policy is flat); the others through the host:
 * every outgoing message is staged whole into one host buffer, one proxy
 * step moves them all at once (so two ranks may send each other large
 * messages in one group), and the incoming ones are copied back. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/trace.h"

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

static int viaIsland(gbComm_t c, int peer) {
  return c->topo.islandOfRank[peer] == c->topo.island && c->settings.policy != gbPolicyFlat;
}

static gbResult_t islandPart(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream, int* queued) {
  gbIslandP2p_t* is = calloc((size_t)nops + 1, sizeof(gbIslandP2p_t));
  if (!is) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", nops);
  int n = 0;
  for (int i = 0; i < nops; i++)
    if (viaIsland(c, ops[i].peer))
      is[n++] = (gbIslandP2p_t){c->topo.indexInIsland[ops[i].peer], ops[i].isSend, ops[i].buf, ops[i].count,
                                ops[i].dt};
  gbResult_t res = gbSuccess;
  if (n > 0) {
    res = c->islandComm->ops->sendRecv(c->islandComm, is, n, stream);
    *queued = 1;
    uint64_t sent = 0;
    for (int i = 0; i < n; i++)
      if (is[i].isSend) sent += is[i].count * gbDtypeSize(is[i].dt);
    gbTraceAddIslandBytes(c, sent);
  }
  free(is);
  return res;
}

static gbResult_t hostPart(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream, int* queued) {
  size_t total = 0;
  int n = 0;
  for (int i = 0; i < nops; i++)
    if (!viaIsland(c, ops[i].peer)) {
      total += (ops[i].count * gbDtypeSize(ops[i].dt) + 63) & ~(size_t)63;
      n++;
    }
  if (n == 0) return gbSuccess;
  gbTraceSetPlan(c, -1, 1);
  gbBulk_t* b = NULL;
  GB_CHECK(bulkFor(c, total, &b));
  gbAlgoP2p_t* list = calloc((size_t)n, sizeof(gbAlgoP2p_t));
  if (!list) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", nops);
  uint64_t use = ++b->uses;
  *queued = 1;
  gbResult_t res = c->dev->flagWait(&b->flags[2], use - 1, stream);
  size_t at = 0;
  int k = 0;
  for (int i = 0; i < nops && res == gbSuccess; i++) {
    if (viaIsland(c, ops[i].peer)) continue;
    size_t bytes = ops[i].count * gbDtypeSize(ops[i].dt);
    char* area = (char*)b->base + at;
    list[k++] = (gbAlgoP2p_t){ops[i].peer, ops[i].isSend, area, bytes};
    if (ops[i].isSend && bytes) res = c->dev->copyAsync(area, ops[i].buf, bytes, stream);
    at += (bytes + 63) & ~(size_t)63;
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
  op.np2p = n;
  op.ready = &b->flags[0];
  op.readyValue = use;
  op.done = &b->flags[1];
  op.doneValue = use;
  op.seq = c->seq;
  gbTraceTagOp(c, &op, GB_TRACE_ROLE_HOST, 0, 1);
  GB_CHECK(gbProxyPost(c->proxy, &op));
  GB_CHECK(c->dev->flagWait(&b->flags[1], use, stream));
  at = 0;
  for (int i = 0; i < nops; i++) {
    if (viaIsland(c, ops[i].peer)) continue;
    size_t bytes = ops[i].count * gbDtypeSize(ops[i].dt);
    if (!ops[i].isSend && bytes) GB_CHECK(c->dev->copyAsync(ops[i].buf, (char*)b->base + at, bytes, stream));
    at += (bytes + 63) & ~(size_t)63;
  }
  return c->dev->flagWrite(&b->flags[2], use, stream);
}

gbResult_t gbCommEnqueueSendRecv(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream) {
  c->p2pSeq++;
  gbTraceBeginP2p(c, ops, nops);
  uint64_t checks = c->checksPosted;
  gbResult_t res = gbCommCheckSendRecv(c, ops, nops, stream);
  int queued = c->checksPosted != checks;
  if (res == gbSuccess) res = islandPart(c, ops, nops, stream, &queued);
  if (res == gbSuccess) res = hostPart(c, ops, nops, stream, &queued);
  return gbCommEnqueueEnd(c, stream, queued, res);
}
