/* Send/recv through the world's shared segment (slots_impl.h), when every
 * rank runs on this host: one channel per ordered pair of members, p2pDepth
 * slots deep. A group's messages to one peer form one byte stream per
 * direction, cut into chunks as plan/p2p.c says; per chunk:
 *
 *  out: the sender takes its channel's next slot. The copy stream waits
 *       for the caller's stream to reach this point and until the receiver
 *       read that slot's last use (a proxy step waits for the receiver's
 *       `got` counter); the chunk's pieces are copied to the slot on the
 *       copy stream (the caller's own for a small chunk); the copy stream
 *       marks it staged; the proxy publishes `sent`.
 *  in:  the receiver's proxy waits for the sender's `sent`; the caller's
 *       stream waits for that, copies the pieces out of the slot, and marks
 *       it read; the proxy publishes `got`.
 *
 * No proxy step waits for anything a later step of its own queue gives, so
 * two ranks may send each other in one group: a sender waits only for
 * reads of uses p2pDepth before, and the walker's pipeline is at most
 * p2pDepth deep, so that read came before in every queue. Waits have the
 * collective's deadline and hear a peer that failed or died, as the group's
 * slots do. */
#include <string.h>

#include "base/result.h"
#include "stage/slots_impl.h"

_Static_assert(GB_REDUCE_MAX_SRCS <= GB_PLAN_P2P_MAX_PEERS,
               "a world with send/recv channels (at most GB_REDUCE_MAX_SRCS ranks) must fit the plan's streams");

size_t gbStageChannelBytes(const gbStage_t* st) {
  const gbSharedSlots_t* sh = gbSlotsOf(st);
  return sh->p2pDepth > 0 ? sh->p2pBytes : 0;
}
int gbStageChannelDepth(const gbStage_t* st) { return gbSlotsOf(st)->p2pDepth; }

/* The channel's k-th use (from 1): its slot, and the use of that slot. */
static void place(const gbSharedSlots_t* sh, uint64_t k, gbStageSlot_t* out) {
  out->slot = (size_t)((k - 1) % (uint64_t)sh->p2pDepth);
  out->use = (k - 1) / (uint64_t)sh->p2pDepth + 1;
}

static gbProxyOp_t plainOp(const gbStageP2p_t* g) {
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.seq = g->tag.seq;
  return op;
}

static gbProxyOp_t taggedOp(gbStageP2p_t* g) {
  gbProxyOp_t op = g->tag;
  op.chunk = g->tag.chunk++;
  return op;
}

/* Chunk k of peer's stream one way (isSend), copied to or from the slot buf
 * on stream: the plan's pieces of it, message by message. */
static gbResult_t copyChunk(const gbSharedSlots_t* sh, const gbStageP2p_t* g, int peer, int isSend, size_t k,
                            char* buf, void* stream) {
  const gbPlanP2p_t* p = g->plan;
  for (size_t j = p->chunkPieces[k]; j < p->chunkPieces[k + 1]; j++) {
    const gbPlanP2pPiece_t* x = &p->pieces[j];
    const gbPlanP2pMsg_t* msg = &p->ops[x->op].msg;
    if (msg->peer != peer || msg->isSend != isSend) continue;
    char* user = (char*)g->bufs[x->op] + x->from;
    GB_CHECK(sh->ctx.dev->copyAsync(isSend ? buf + x->into : user, isSend ? user : buf + x->into, x->bytes, stream));
  }
  return gbSuccess;
}

/* Takes the next slot of my channel to peer for a chunk of bytes. */
static gbResult_t sendTake(gbSharedSlots_t* sh, const gbStageP2p_t* g, int peer, size_t bytes, gbStageSlot_t* out) {
  const gbDeviceOps* dev = sh->ctx.dev;
  place(sh, ++sh->p2pSent[peer], out);
  out->buf = gbSharedP2pAt(sh, sh->me, peer, out->slot);
  out->on = gbPlanOnSideStreams(bytes) ? sh->copyStream : g->stream;
  if (out->on != g->stream) {
    gbFlag_t* input = gbSharedP2pFlag(sh, P2P_INPUT, peer, out->slot);
    GB_CHECK(dev->flagWrite(input, out->use, g->stream));
    GB_CHECK(dev->flagWait(input, out->use, out->on));
  }
  if (out->use == 1) return gbSuccess;
  /* The slot's last use: the receiver's read of it frees it. */
  gbSharedStep_t st = {.sh = sh, .slot = out->slot, .use = out->use - 1, .nwait = 1, .who = {peer},
                       .wait = {&gbSharedCtl(sh, peer)->got[sh->me][out->slot]}, .what = "to finish reading"};
  gbFlag_t* freed = gbSharedP2pFlag(sh, P2P_FREED, peer, out->slot);
  gbProxyOp_t plain = plainOp(g);
  GB_CHECK(gbSharedPostStep(&st, &plain, NULL, 0, freed, out->use - 1));
  return dev->flagWait(freed, out->use - 1, out->on);
}

/* Chunk k of every stream out. */
static gbResult_t channelsOut(gbStage_t* stage, gbStageP2p_t* g, size_t k) {
  gbSharedSlots_t* sh = gbSlotsOf(stage);
  for (int p = 0; p < sh->n; p++) {
    size_t at, len;
    gbPlanP2pChunk(g->plan, p, 1, k, &at, &len);
    if (len == 0) continue;
    gbStageSlot_t ch;
    GB_CHECK(sendTake(sh, g, p, len, &ch));
    GB_CHECK(copyChunk(sh, g, p, 1, k, ch.buf, ch.on));
    g->lastSent[p] = ch;
    gbFlag_t* staged = gbSharedP2pFlag(sh, P2P_STAGED, p, ch.slot);
    GB_CHECK(sh->ctx.dev->flagWrite(staged, ch.use, ch.on));
    gbSharedStep_t st = {.sh = sh, .slot = ch.slot, .use = ch.use, .what = "",
                         .publish = &gbSharedCtl(sh, sh->me)->sent[p][ch.slot], .group = g->tag.group, .bytes = len};
    gbProxyOp_t op = taggedOp(g);
    GB_CHECK(gbSharedPostStep(&st, &op, staged, ch.use, gbSharedP2pFlag(sh, P2P_SENT, p, ch.slot), ch.use));
  }
  return gbSuccess;
}

/* Chunk k of every stream in. */
static gbResult_t channelsIn(gbStage_t* stage, gbStageP2p_t* g, size_t k) {
  gbSharedSlots_t* sh = gbSlotsOf(stage);
  const gbDeviceOps* dev = sh->ctx.dev;
  for (int p = 0; p < sh->n; p++) {
    size_t at, len;
    gbPlanP2pChunk(g->plan, p, 0, k, &at, &len);
    if (len == 0) continue;
    gbStageSlot_t ch;
    place(sh, ++sh->p2pGot[p], &ch);
    ch.buf = gbSharedP2pAt(sh, p, sh->me, ch.slot);
    gbSharedStep_t st = {.sh = sh, .slot = ch.slot, .use = ch.use, .nwait = 1, .who = {p},
                         .wait = {&gbSharedCtl(sh, p)->sent[sh->me][ch.slot]}, .what = "to stage"};
    gbFlag_t* arrived = gbSharedP2pFlag(sh, P2P_ARRIVED, p, ch.slot);
    gbProxyOp_t op = taggedOp(g);
    GB_CHECK(gbSharedPostStep(&st, &op, NULL, 0, arrived, ch.use));
    GB_CHECK(dev->flagWait(arrived, ch.use, g->stream));
    GB_CHECK(copyChunk(sh, g, p, 0, k, ch.buf, g->stream));
    gbFlag_t* consumed = gbSharedP2pFlag(sh, P2P_CONSUMED, p, ch.slot);
    GB_CHECK(dev->flagWrite(consumed, ch.use, g->stream));
    gbSharedStep_t read = {.sh = sh, .slot = ch.slot, .use = ch.use, .what = "",
                           .publish = &gbSharedCtl(sh, sh->me)->got[p][ch.slot]};
    gbProxyOp_t plain = plainOp(g);
    GB_CHECK(gbSharedPostStep(&read, &plain, consumed, ch.use, NULL, 0));
  }
  return gbSuccess;
}

/* The copy stream reads the send buffers: the group ends when it copied
 * each peer's last chunk out and the proxy published it. */
static gbResult_t channelsEnd(gbStage_t* stage, gbStageP2p_t* g) {
  gbSharedSlots_t* sh = gbSlotsOf(stage);
  for (int r = 0; r < sh->n; r++) {
    if (r == sh->me || g->plan->sendBytes[r] == 0) continue;
    const gbStageSlot_t* ch = &g->lastSent[r];
    GB_CHECK(sh->ctx.dev->flagWait(gbSharedP2pFlag(sh, P2P_SENT, r, ch->slot), ch->use, g->stream));
  }
  return gbSuccess;
}

const gbStageOps_t gbStageChannelOps = {.name = "channels", .kind = GB_NUM_STAGES, .p2pOut = channelsOut, .p2pIn = channelsIn,
                                        .p2pEnd = channelsEnd, .fail = gbSlotsFail, .destroy = gbSlotsViewDestroy};
