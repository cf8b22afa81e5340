/* Send/recv channels in the world's shared segment (shared_p2p.h): the
 * chunk steps on the streams and the proxy. */
#include "core/shared_p2p.h"

#include <string.h>

#include "base/result.h"
#include "core/shared_slots_impl.h"

size_t gbSharedP2pChunkBytes(const gbSharedSlots_t* sh) { return sh->p2pDepth > 0 ? sh->p2pBytes : 0; }
int gbSharedP2pDepth(const gbSharedSlots_t* sh) { return sh->p2pDepth; }

/* The channel's k-th use (from 1): its slot, and the use of that slot. */
static void place(const gbSharedSlots_t* sh, int peer, uint64_t k, gbP2pChunk_t* out) {
  out->peer = peer;
  out->slot = (size_t)((k - 1) % (uint64_t)sh->p2pDepth);
  out->use = (k - 1) / (uint64_t)sh->p2pDepth + 1;
}

static gbProxyOp_t plainOp(gbComm_t c) {
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.seq = c->seq;
  return op;
}

gbResult_t gbSharedP2pSendTake(gbComm_t c, gbSharedSlots_t* sh, int peer, void* stream, size_t bytes,
                               gbP2pChunk_t* out, void** copyStream) {
  place(sh, peer, ++sh->p2pSent[peer], out);
  out->buf = gbSharedP2pAt(sh, sh->me, peer, out->slot);
  out->on = bytes < GB_SHARED_SIDE_STREAM_BYTES ? stream : sh->copyStream; /* as gbSharedSlotsTake */
  *copyStream = out->on;
  if (out->on != stream) {
    gbFlag_t* input = gbSharedP2pFlag(sh, P2P_INPUT, peer, out->slot);
    GB_CHECK(c->dev->flagWrite(input, out->use, stream));
    GB_CHECK(c->dev->flagWait(input, out->use, out->on));
  }
  if (out->use == 1) return gbSuccess;
  /* The slot's last use: the receiver's read of it frees it. */
  gbSharedStep_t st = {.sh = sh, .slot = out->slot, .use = out->use - 1, .nwait = 1, .who = {peer},
                       .wait = {&gbSharedCtl(sh, peer)->got[sh->me][out->slot]}, .what = "to finish reading"};
  gbFlag_t* freed = gbSharedP2pFlag(sh, P2P_FREED, peer, out->slot);
  gbProxyOp_t op = plainOp(c);
  GB_CHECK(gbSharedPostStep(c, &st, &op, NULL, 0, freed, out->use - 1));
  return c->dev->flagWait(freed, out->use - 1, out->on);
}

gbResult_t gbSharedP2pSendStaged(gbComm_t c, gbSharedSlots_t* sh, const gbP2pChunk_t* ch, uint64_t bytes,
                                 gbProxyOp_t* op) {
  gbFlag_t* staged = gbSharedP2pFlag(sh, P2P_STAGED, ch->peer, ch->slot);
  GB_CHECK(c->dev->flagWrite(staged, ch->use, ch->on));
  gbSharedStep_t st = {.sh = sh, .slot = ch->slot, .use = ch->use, .what = "",
                       .publish = &gbSharedCtl(sh, sh->me)->sent[ch->peer][ch->slot], .group = op->group,
                       .bytes = bytes};
  return gbSharedPostStep(c, &st, op, staged, ch->use, gbSharedP2pFlag(sh, P2P_SENT, ch->peer, ch->slot), ch->use);
}

gbResult_t gbSharedP2pSendDone(gbComm_t c, gbSharedSlots_t* sh, const gbP2pChunk_t* ch, void* stream) {
  return c->dev->flagWait(gbSharedP2pFlag(sh, P2P_SENT, ch->peer, ch->slot), ch->use, stream);
}

gbResult_t gbSharedP2pRecvArrived(gbComm_t c, gbSharedSlots_t* sh, int peer, void* stream, gbP2pChunk_t* out,
                                  gbProxyOp_t* op) {
  place(sh, peer, ++sh->p2pGot[peer], out);
  out->buf = gbSharedP2pAt(sh, peer, sh->me, out->slot);
  gbSharedStep_t st = {.sh = sh, .slot = out->slot, .use = out->use, .nwait = 1, .who = {peer},
                       .wait = {&gbSharedCtl(sh, peer)->sent[sh->me][out->slot]}, .what = "to stage"};
  gbFlag_t* arrived = gbSharedP2pFlag(sh, P2P_ARRIVED, peer, out->slot);
  GB_CHECK(gbSharedPostStep(c, &st, op, NULL, 0, arrived, out->use));
  return c->dev->flagWait(arrived, out->use, stream);
}

gbResult_t gbSharedP2pRecvRead(gbComm_t c, gbSharedSlots_t* sh, const gbP2pChunk_t* ch, void* stream) {
  gbFlag_t* consumed = gbSharedP2pFlag(sh, P2P_CONSUMED, ch->peer, ch->slot);
  GB_CHECK(c->dev->flagWrite(consumed, ch->use, stream));
  gbSharedStep_t st = {.sh = sh, .slot = ch->slot, .use = ch->use, .what = "",
                       .publish = &gbSharedCtl(sh, sh->me)->got[ch->peer][ch->slot]};
  gbProxyOp_t op = plainOp(c);
  return gbSharedPostStep(c, &st, &op, consumed, ch->use, NULL, 0);
}
