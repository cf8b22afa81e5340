/* A send/recv group: peers in my island are reached through the island's
 * own fused group (unless the policy is flat); the others through the host.
 * When every rank runs on this host (the world's shared staging slots),
 * through the send/recv channels (core/shared_p2p.h): each peer's messages
 * as one byte stream in chunks, pipelined, sends on the slots' copy stream
 * and receives on the caller's. Otherwise every outgoing message is staged
 * whole into one host buffer, one proxy step moves them all at once (so two
 * ranks may send each other large messages in one group), and the incoming
 * ones are copied back. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "core/shared_p2p.h"
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

/* ----------------------------------------------- through the channels */

typedef struct {
  gbComm_t comm;
  gbSharedSlots_t* sh;
  const gbCommP2p_t* ops;
  int nops;
  void* stream;
  size_t chunk;                           /* bytes per chunk */
  size_t sendBytes[GB_REDUCE_MAX_SRCS];   /* per peer: the byte stream each way */
  size_t recvBytes[GB_REDUCE_MAX_SRCS];
  uint32_t posted, nposts;                /* flight-recorder steps */
  gbP2pChunk_t lastSent[GB_REDUCE_MAX_SRCS];
} channels_t;

static size_t opBytes(const gbCommP2p_t* op) { return op->count * gbDtypeSize(op->dt); }
static size_t chunksOf(const channels_t* w, size_t bytes) { return (bytes + w->chunk - 1) / w->chunk; }

/* Bytes [at, at + len) of peer's stream one way (isSend), copied to or from
 * the slot buf on stream: piece by piece over the messages it spans. */
static gbResult_t copySpan(const channels_t* w, int peer, int isSend, size_t at, size_t len, char* buf,
                           void* stream) {
  size_t base = 0;
  for (int i = 0; i < w->nops && len > 0; i++) {
    const gbCommP2p_t* op = &w->ops[i];
    if (op->peer != peer || op->isSend != isSend || viaIsland(w->comm, peer)) continue;
    size_t bytes = opBytes(op);
    if (at < base + bytes) {
      size_t from = at - base, n = bytes - from < len ? bytes - from : len;
      char* user = (char*)op->buf + from;
      GB_CHECK(w->comm->dev->copyAsync(isSend ? buf : user, isSend ? user : buf, n, stream));
      buf += n;
      at += n;
      len -= n;
    }
    base += bytes;
  }
  return gbSuccess;
}

static gbProxyOp_t taggedOp(channels_t* w) {
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.seq = w->comm->seq;
  op.group = &w->comm->world.algo;
  gbTraceTagOp(w->comm, &op, GB_TRACE_ROLE_HOST, w->posted++, w->nposts);
  return op;
}

/* Chunk k of every stream out. */
static gbResult_t sendChunk(void* arg, size_t k) {
  channels_t* w = arg;
  for (int p = 0; p < w->comm->nranks; p++) {
    if (k >= chunksOf(w, w->sendBytes[p])) continue;
    size_t at = k * w->chunk, len = w->sendBytes[p] - at < w->chunk ? w->sendBytes[p] - at : w->chunk;
    gbP2pChunk_t ch;
    void* copyStream = NULL;
    GB_CHECK(gbSharedP2pSendTake(w->comm, w->sh, p, w->stream, &ch, &copyStream));
    GB_CHECK(copySpan(w, p, 1, at, len, ch.buf, copyStream));
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
    if (k >= chunksOf(w, w->recvBytes[p])) continue;
    size_t at = k * w->chunk, len = w->recvBytes[p] - at < w->chunk ? w->recvBytes[p] - at : w->chunk;
    gbP2pChunk_t ch;
    gbProxyOp_t op = taggedOp(w);
    GB_CHECK(gbSharedP2pRecvArrived(w->comm, w->sh, p, w->stream, &ch, &op));
    GB_CHECK(copySpan(w, p, 0, at, len, ch.buf, w->stream));
    GB_CHECK(gbSharedP2pRecvRead(w->comm, w->sh, &ch, w->stream));
  }
  return gbSuccess;
}

/* Whether the host part can take the channels: the world shares a segment
 * with channels, and no message is to or from this rank itself. */
static int channelsFit(gbComm_t c, const gbCommP2p_t* ops, int nops) {
  if (!c->world.slots || gbSharedP2pChunkBytes(c->world.slots) == 0) return 0;
  for (int i = 0; i < nops; i++)
    if (!viaIsland(c, ops[i].peer) && ops[i].peer == c->rank) return 0;
  return 1;
}

static gbResult_t channelsPart(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream, int* queued) {
  channels_t w;
  memset(&w, 0, sizeof(w));
  w.comm = c;
  w.sh = c->world.slots;
  w.ops = ops;
  w.nops = nops;
  w.stream = stream;
  w.chunk = gbSharedP2pChunkBytes(w.sh);
  for (int i = 0; i < nops; i++) {
    if (viaIsland(c, ops[i].peer)) continue;
    size_t* total = ops[i].isSend ? &w.sendBytes[ops[i].peer] : &w.recvBytes[ops[i].peer];
    *total += opBytes(&ops[i]);
  }
  size_t nchunks = 0;
  for (int p = 0; p < c->nranks; p++) {
    size_t s = chunksOf(&w, w.sendBytes[p]), r = chunksOf(&w, w.recvBytes[p]);
    w.nposts += (uint32_t)(s + r);
    if (s > nchunks) nchunks = s;
    if (r > nchunks) nchunks = r;
  }
  if (nchunks == 0) return gbSuccess;
  gbTraceSetPlan(c, -1, (int)w.nposts);
  *queued = 1;
  int depth = c->settings.stagingSlots < gbSharedP2pDepth(w.sh) ? c->settings.stagingSlots : gbSharedP2pDepth(w.sh);
  GB_CHECK(gbCommPipeline(nchunks, depth, sendChunk, recvChunk, &w));
  /* The copy stream reads the send buffers: the group ends when it did. */
  for (int p = 0; p < c->nranks; p++)
    if (w.sendBytes[p] > 0) GB_CHECK(gbSharedP2pSendDone(c, w.sh, &w.lastSent[p], stream));
  return gbSuccess;
}

/* ------------------------------------------- through one host buffer */

static gbResult_t hostPart(gbComm_t c, const gbCommP2p_t* ops, int nops, void* stream, int* queued) {
  if (channelsFit(c, ops, nops)) return channelsPart(c, ops, nops, stream, queued);
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
