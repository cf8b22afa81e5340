/* A send/recv group's schedule: each message's way (island or host), the
 * host part's path (channels or one bulk buffer) and, on the channels, the
 * per-peer byte streams and their chunks. See plan/p2p.h. */
#include "plan/p2p.h"

#include <stdlib.h>
#include <string.h>

#include "base/result.h"

static int viaIsland(const gbPlanP2pInput_t* in, int peer) {
  return in->topo->islandOfRank[peer] == in->topo->island && in->policy != gbPolicyFlat;
}

/* The channels carry the host part when the world has them (few enough
 * ranks to keep a stream per peer). Facts every rank shares decide it, so a
 * pair of ranks never disagrees (a message to oneself is copied directly). */
static int channelsFit(const gbPlanP2pInput_t* in) {
  return in->channelBytes > 0 && in->topo->nranks <= GB_PLAN_P2P_MAX_PEERS;
}

static size_t chunksOf(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

/* Each peer's host messages, in the group's order, one stream each way. */
static void planChannels(const gbPlanP2pInput_t* in, gbPlanP2p_t* p) {
  p->chunkBytes = in->channelBytes;
  for (int i = 0; i < p->nops; i++) {
    gbPlanP2pOp_t* op = &p->ops[i];
    if (op->viaIsland) continue;
    size_t* total = op->msg.isSend ? &p->sendBytes[op->msg.peer] : &p->recvBytes[op->msg.peer];
    op->streamAt = *total;
    *total += op->msg.bytes;
  }
  for (int r = 0; r < in->topo->nranks; r++) {
    if (r == in->topo->rank) continue; /* my stream to myself: copied directly (gbPlanP2pSelf) */
    size_t s = chunksOf(p->sendBytes[r], p->chunkBytes), n = chunksOf(p->recvBytes[r], p->chunkBytes);
    p->hostSteps += s + n;
    if (s > p->nchunks) p->nchunks = s;
    if (n > p->nchunks) p->nchunks = n;
  }
  p->depth = in->stagingSlots < in->channelDepth ? in->stagingSlots : in->channelDepth;
}

/* Every host message whole, each at an aligned place of one buffer. */
static void planBulk(gbPlanP2p_t* p) {
  const size_t mask = GB_PLAN_P2P_BULK_ALIGN - 1;
  for (int i = 0; i < p->nops; i++) {
    gbPlanP2pOp_t* op = &p->ops[i];
    if (op->viaIsland) continue;
    op->bulkAt = p->bulkBytes;
    p->bulkBytes += (op->msg.bytes + mask) & ~mask;
  }
  p->hostSteps = p->nhost > 0;
  p->nchunks = p->hostSteps; /* one chunk: every message whole */
  p->depth = 1;
}

gbResult_t gbPlanP2pBuild(const gbPlanP2pInput_t* in, gbPlanP2p_t* p) {
  memset(p, 0, sizeof(*p));
  p->ops = calloc((size_t)in->nmsgs + 1, sizeof(gbPlanP2pOp_t));
  if (!p->ops) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", in->nmsgs);
  p->nops = in->nmsgs;
  for (int i = 0; i < p->nops; i++) {
    gbPlanP2pOp_t* op = &p->ops[i];
    op->msg = in->msgs[i];
    op->viaIsland = viaIsland(in, op->msg.peer);
    if (op->viaIsland) p->nisland++;
    else p->nhost++;
  }
  p->me = in->topo->rank;
  p->channels = channelsFit(in);
  if (p->channels) planChannels(in, p);
  else planBulk(p);
  return gbSuccess;
}

void gbPlanP2pFree(gbPlanP2p_t* p) {
  free(p->ops);
  p->ops = NULL;
  p->nops = 0;
}

void gbPlanP2pChunk(const gbPlanP2p_t* p, int peer, int isSend, size_t k, size_t* off, size_t* len) {
  *off = *len = 0;
  if (!p->channels || peer == p->me) return;
  size_t total = isSend ? p->sendBytes[peer] : p->recvBytes[peer];
  if (k >= chunksOf(total, p->chunkBytes)) return;
  *off = k * p->chunkBytes;
  *len = total - *off < p->chunkBytes ? total - *off : p->chunkBytes;
}

size_t gbPlanP2pPiece(const gbPlanP2p_t* p, int i, size_t k, size_t* from, size_t* into) {
  const gbPlanP2pOp_t* op = &p->ops[i];
  *from = *into = 0;
  if (!p->channels || op->viaIsland) return 0;
  size_t off, len;
  gbPlanP2pChunk(p, op->msg.peer, op->msg.isSend, k, &off, &len);
  size_t begin = off > op->streamAt ? off : op->streamAt;
  size_t end = off + len < op->streamAt + op->msg.bytes ? off + len : op->streamAt + op->msg.bytes;
  if (begin >= end) return 0;
  *from = begin - op->streamAt;
  *into = begin - off;
  return end - begin;
}

size_t gbPlanP2pSelf(const gbPlanP2p_t* p, int recvOp, int sendOp, size_t* from, size_t* into) {
  const gbPlanP2pOp_t* r = &p->ops[recvOp];
  const gbPlanP2pOp_t* s = &p->ops[sendOp];
  *from = *into = 0;
  if (!p->channels || r->viaIsland || s->viaIsland || r->msg.isSend || !s->msg.isSend || r->msg.peer != p->me ||
      s->msg.peer != p->me)
    return 0;
  size_t begin = r->streamAt > s->streamAt ? r->streamAt : s->streamAt;
  size_t rEnd = r->streamAt + r->msg.bytes, sEnd = s->streamAt + s->msg.bytes;
  size_t end = rEnd < sEnd ? rEnd : sEnd;
  if (begin >= end) return 0;
  *from = begin - s->streamAt;
  *into = begin - r->streamAt;
  return end - begin;
}
