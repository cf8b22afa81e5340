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
static gbResult_t listPieces(gbPlanP2p_t* p);

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
    if (r == in->topo->rank) continue; /* my stream to myself: copied directly (selfCopies) */
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
  if (!p->channels) {
    planBulk(p);
    return gbSuccess;
  }
  planChannels(in, p);
  return listPieces(p);
}

void gbPlanP2pFree(gbPlanP2p_t* p) {
  free(p->ops);
  free(p->pieces);
  free(p->chunkPieces);
  free(p->selfCopies);
  p->ops = NULL;
  p->pieces = NULL;
  p->chunkPieces = NULL;
  p->selfCopies = NULL;
  p->nops = p->nselfCopies = 0;
}

void gbPlanP2pChunk(const gbPlanP2p_t* p, int peer, int isSend, size_t k, size_t* off, size_t* len) {
  *off = *len = 0;
  if (!p->channels || peer == p->me) return;
  size_t total = isSend ? p->sendBytes[peer] : p->recvBytes[peer];
  if (k >= chunksOf(total, p->chunkBytes)) return;
  *off = k * p->chunkBytes;
  *len = total - *off < p->chunkBytes ? total - *off : p->chunkBytes;
}

/* A host message of mine to myself, one way. */
static int toSelf(const gbPlanP2p_t* p, const gbPlanP2pOp_t* op, int isSend) {
  return !op->viaIsland && op->msg.peer == p->me && op->msg.isSend == isSend;
}

/* My stream to myself is copied directly: each receive gets the bytes at
 * its offsets of the send stream. */
static gbResult_t listSelfCopies(gbPlanP2p_t* p) {
  for (int pass = 0; pass < 2; pass++) {
    int n = 0;
    for (int r = 0; r < p->nops; r++)
      for (int s = 0; s < p->nops; s++) {
        const gbPlanP2pOp_t *ro = &p->ops[r], *so = &p->ops[s];
        if (!toSelf(p, ro, 0) || !toSelf(p, so, 1)) continue;
        size_t begin = ro->streamAt > so->streamAt ? ro->streamAt : so->streamAt;
        size_t rEnd = ro->streamAt + ro->msg.bytes, sEnd = so->streamAt + so->msg.bytes;
        size_t end = rEnd < sEnd ? rEnd : sEnd;
        if (begin >= end) continue;
        if (pass == 1) p->selfCopies[n] = (gbPlanP2pSelfCopy_t){r, s, begin - so->streamAt, begin - ro->streamAt,
                                                                end - begin};
        n++;
      }
    if (pass == 0) {
      p->selfCopies = calloc((size_t)n + 1, sizeof(gbPlanP2pSelfCopy_t));
      if (!p->selfCopies) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
    }
    p->nselfCopies = n;
  }
  return gbSuccess;
}

/* Whether op takes a channel to another rank: it has pieces. */
static int chunked(const gbPlanP2p_t* p, const gbPlanP2pOp_t* op) {
  return !op->viaIsland && op->msg.peer != p->me && op->msg.bytes > 0;
}

/* Lists every piece once, chunk by chunk (a counting sort over the chunks
 * each message spans), then my copies to myself. */
static gbResult_t listPieces(gbPlanP2p_t* p) {
  size_t c = p->chunkBytes;
  p->chunkPieces = calloc(p->nchunks + 2, sizeof(size_t));
  if (!p->chunkPieces) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
  for (int i = 0; i < p->nops; i++) {
    const gbPlanP2pOp_t* op = &p->ops[i];
    if (!chunked(p, op)) continue;
    for (size_t k = op->streamAt / c; k <= (op->streamAt + op->msg.bytes - 1) / c; k++) p->chunkPieces[k + 1]++;
  }
  for (size_t k = 0; k < p->nchunks; k++) p->chunkPieces[k + 1] += p->chunkPieces[k];
  p->pieces = calloc(p->chunkPieces[p->nchunks] + 1, sizeof(gbPlanP2pPiece_t));
  size_t* next = calloc(p->nchunks + 1, sizeof(size_t));
  if (!p->pieces || !next) {
    free(next);
    return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
  }
  memcpy(next, p->chunkPieces, p->nchunks * sizeof(size_t));
  for (int i = 0; i < p->nops; i++) {
    const gbPlanP2pOp_t* op = &p->ops[i];
    if (!chunked(p, op)) continue;
    size_t end = op->streamAt + op->msg.bytes;
    for (size_t k = op->streamAt / c; k * c < end; k++) {
      size_t begin = k * c > op->streamAt ? k * c : op->streamAt;
      size_t stop = (k + 1) * c < end ? (k + 1) * c : end;
      p->pieces[next[k]++] = (gbPlanP2pPiece_t){i, k, begin - op->streamAt, begin - k * c, stop - begin};
    }
  }
  free(next);
  return listSelfCopies(p);
}

size_t gbPlanP2pPiece(const gbPlanP2p_t* p, int i, size_t k, size_t* from, size_t* into) {
  *from = *into = 0;
  if (!p->channels || k >= p->nchunks) return 0;
  for (size_t j = p->chunkPieces[k]; j < p->chunkPieces[k + 1]; j++)
    if (p->pieces[j].op == i) {
      *from = p->pieces[j].from;
      *into = p->pieces[j].into;
      return p->pieces[j].bytes;
    }
  return 0;
}

size_t gbPlanP2pSelf(const gbPlanP2p_t* p, int recvOp, int sendOp, size_t* from, size_t* into) {
  *from = *into = 0;
  for (int j = 0; j < p->nselfCopies; j++) {
    const gbPlanP2pSelfCopy_t* x = &p->selfCopies[j];
    if (x->recvOp != recvOp || x->sendOp != sendOp) continue;
    *from = x->from;
    *into = x->into;
    return x->bytes;
  }
  return 0;
}
