/* A chunk's way through shared or remote slots (slots_impl.h): take, stage
 * out, the proxy's step, arrived, the copy or reduction from the members'
 * parts, read; the shared and remote stages' ops. Wire format: member m's
 * part of a slot holds m's chunk (all-reduce, broadcast, reduce), m's block
 * (all-gather), or m's block for each member k at k * len (reduce-scatter,
 * all-to-all: a member's own block is read from its input and never
 * staged). */
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "stage/slots_impl.h"

/* A part holds a block for each member (reduce-scatter, all-to-all). */
/* The bytes of my part a chunk fills. */
static size_t partBytes(const gbSharedSlots_t* sh, const gbStageWork_t* w) {
  return w->len * w->esize * (gbSharedBlockPerMember(w->coll) ? (size_t)sh->n : 1);
}

gbResult_t gbSharedTake(gbSharedSlots_t* sh, void* stream, int sideStreams, gbStageSlot_t* out) {
  const gbDeviceOps* dev = sh->ctx.dev;
  out->slot = sh->next++ % (size_t)sh->nslots;
  out->use = ++sh->uses[out->slot];
  out->buf = gbSharedAt(sh, sh->me, out->slot);
  void* on = sideStreams ? sh->copyStream : stream;
  out->on = on;
  if (on != stream) {
    GB_CHECK(dev->flagWrite(gbSharedFlag(sh, FLAG_INPUT, out->slot), out->use, stream));
    GB_CHECK(dev->flagWait(gbSharedFlag(sh, FLAG_INPUT, out->slot), out->use, on));
  }
  return dev->flagWait(gbSharedFlag(sh, FLAG_FREED, out->slot), out->use - 1, on);
}

int gbSharedNeeds(const gbStageWork_t* w, int k, int from) {
  if (k == from) return 0;
  if (w->coll == GB_COLL_BROADCAST) return from == w->root;
  if (w->coll == GB_COLL_REDUCE) return k == w->root;
  return 1;
}

/* What this member staged for the others: the traffic counter's "sent" on
 * one host (each block another member reads, or the part once). */
static uint64_t sentBytes(const gbSharedSlots_t* sh, const gbStageWork_t* w) {
  uint64_t readers = 0;
  for (int k = 0; k < sh->n; k++) readers += (uint64_t)gbSharedNeeds(w, k, sh->me);
  if (gbSharedBlockPerMember(w->coll)) return readers * w->len * w->esize;
  return readers > 0 ? partBytes(sh, w) : 0;
}

/* My part into the slot, on the copy stream. */
static gbResult_t copyOut(const gbSharedSlots_t* sh, const gbStageWork_t* w, const gbStageSlot_t* s) {
  size_t bytes = w->len * w->esize;
  if (!w->stageOut) return gbSuccess;
  if (!gbSharedBlockPerMember(w->coll)) return sh->ctx.dev->copyAsync(s->buf, w->src, bytes, s->on);
  for (int r = 0; r < sh->n; r++)
    if (r != sh->me) GB_CHECK(sh->ctx.dev->copyAsync(s->buf + (size_t)r * bytes, gbStageMyBlock(w, r), bytes, s->on));
  return gbSuccess;
}

/* The group's step on a slot: publish my full (or read) counter, wait for
 * every other member's. Remote, a read step waits for nobody (the others
 * read their own copies) and only frees the slot. */
static gbResult_t postStep(gbSharedSlots_t* sh, const gbProxyOp_t* tag, const gbStageSlot_t* s, int read,
                           uint64_t bytes) {
  gbSharedStep_t st = {.sh = sh, .slot = s->slot, .use = s->use, .what = read ? "to finish reading" : "to stage",
                       .group = read ? NULL : tag->group, .bytes = bytes};
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  st.publish = read ? &mine->read[s->slot] : &mine->full[s->slot];
  for (int k = 0; k < sh->n && !sh->remote; k++) {
    if (k == sh->me) continue;
    gbSharedCtl_t* m = gbSharedCtl(sh, k);
    st.who[st.nwait] = k;
    st.wait[st.nwait++] = read ? &m->read[s->slot] : &m->full[s->slot];
  }
  return gbSharedPostStep(&st, tag, gbSharedFlag(sh, read ? FLAG_CONSUMED : FLAG_STAGED, s->slot), s->use,
                          gbSharedFlag(sh, read ? FLAG_FREED : FLAG_FULL, s->slot), s->use);
}

/* Take, copy out, mark staged: the front both stages share. */
static gbResult_t stageChunk(gbSharedSlots_t* sh, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                             gbStageSlot_t* s) {
  GB_CHECK(gbSharedTake(sh, stream, gbPlanOnSideStreams(partBytes(sh, w)), s));
  s->queued = 1;
  s->seq = tag->seq;
  GB_CHECK(copyOut(sh, w, s));
  return sh->ctx.dev->flagWrite(gbSharedFlag(sh, FLAG_STAGED, s->slot), s->use, s->on);
}

static gbResult_t sharedOut(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                            gbStageSlot_t* s) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  GB_CHECK(stageChunk(sh, w, stream, tag, s));
  return postStep(sh, tag, s, 0, sentBytes(sh, w));
}

static gbResult_t remoteOut(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                            gbStageSlot_t* s) {
  GB_CHECK(stageChunk(gbSlotsOf(st), w, stream, tag, s));
  return gbSharedPostMoves(st, w, s, tag);
}

/* Bytes [offset, offset + bytes) of member k's part where this device's
 * reduction reads them: in place on the host device, and on a GPU for a
 * small part (mapped host memory: a copy in first costs one operation
 * more); else the fetch stream first copies them into the slot's device
 * scratch, so chunk k comes in while the caller's stream reduces chunk
 * k - 1, and the caller's stream waits for the copy. A failed copy sets
 * *res (left alone on success). */
static const void* fetch(gbSharedSlots_t* sh, int member, const gbStageSlot_t* s, size_t offset, size_t bytes,
                         void* stream, gbResult_t* res) {
  const gbDeviceOps* dev = sh->ctx.dev;
  if (!sh->scratch || !gbPlanOnSideStreams(bytes)) return gbSharedDeviceAt(sh, member, s->slot) + offset;
  char* to = sh->scratch + (s->slot * (size_t)sh->n + (size_t)member) * sh->slotBytes;
  /* For this use's first part the fetch stream waits until every member
   * staged it and this member reduced the scratch's last use. */
  gbResult_t r = gbSuccess;
  if (sh->fetchUse[s->slot] != s->use) {
    sh->fetchUse[s->slot] = s->use;
    r = dev->flagWait(gbSharedFlag(sh, FLAG_FULL, s->slot), s->use, sh->fetchStream);
    if (r == gbSuccess) r = dev->flagWait(gbSharedFlag(sh, FLAG_CONSUMED, s->slot), s->use - 1, sh->fetchStream);
  }
  uint64_t fetched = ++sh->fetches[s->slot];
  gbFlag_t* flag = gbSharedFlag(sh, FLAG_FETCHED, s->slot);
  if (r == gbSuccess) r = dev->copyAsync(to, gbSharedAt(sh, member, s->slot) + offset, bytes, sh->fetchStream);
  if (r == gbSuccess) r = dev->flagWrite(flag, fetched, sh->fetchStream);
  if (r == gbSuccess) r = dev->flagWait(flag, fetched, stream);
  if (r != gbSuccess) *res = r;
  return to;
}

/* The reduction of every member's part (or block `at`) into dst, mine from my input. */
static gbResult_t reduceParts(gbStage_t* st, const gbStageWork_t* w, const gbStageSlot_t* s, const void* mine,
                              size_t at, int ring, void* stream) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  size_t bytes = w->len * w->esize;
  gbReduceArgs_t red = {.dst = w->dst, .nsrc = sh->n, .count = w->len, .dtype = w->dtype, .op = w->op,
                        .divisor = w->divisor, .ring = ring};
  gbResult_t res = gbSuccess;
  for (int m = 0; m < sh->n; m++) red.src[m] = m == sh->me ? mine : fetch(sh, m, s, at, bytes, stream, &res);
  GB_CHECK(res);
  return sh->ctx.dev->reduceAsync(&red, stream);
}

/* The members' parts arrived: reduce them (all-reduce, reduce on its root,
 * reduce-scatter: my block of every part), or copy what I need (the root's
 * part, every member's block), then let the slot go. */
static gbResult_t slotsIn(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbStageSlot_t* s) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  const gbDeviceOps* dev = sh->ctx.dev;
  size_t bytes = w->len * w->esize, mineAt = gbSharedBlockPerMember(w->coll) ? (size_t)sh->me * bytes : 0;
  GB_CHECK(dev->flagWait(gbSharedFlag(sh, FLAG_FULL, s->slot), s->use, stream));
  if (!w->stageIn) {
  } else if (w->coll == GB_COLL_BROADCAST) {
    GB_CHECK(dev->copyAsync(w->dst, gbSharedAt(sh, w->root, s->slot), bytes, stream));
  } else if (w->coll == GB_COLL_ALLREDUCE || w->coll == GB_COLL_REDUCE) {
    GB_CHECK(reduceParts(st, w, s, w->src, 0, gbAlgoFoldsRing(st->group, bytes), stream));
  } else if (w->coll == GB_COLL_REDUCESCATTER) {
    GB_CHECK(reduceParts(st, w, s, gbStageMyBlock(w, sh->me), mineAt, 0, stream));
  } else {
    for (int r = 0; r < sh->n; r++) {
      const char* from = r == sh->me ? gbStageMyBlock(w, r) : gbSharedAt(sh, r, s->slot) + mineAt;
      GB_CHECK(dev->copyAsync(w->dst + (size_t)r * w->dstStride, from, bytes, stream));
    }
  }
  GB_CHECK(dev->flagWrite(gbSharedFlag(sh, FLAG_CONSUMED, s->slot), s->use, stream));
  gbProxyOp_t plain;
  memset(&plain, 0, sizeof(plain));
  plain.seq = s->seq;
  return postStep(sh, &plain, s, 1, 0);
}

const gbStageOps_t gbStageSharedOps = {.name = "shared", .kind = GB_STAGE_SHARED, .out = sharedOut, .in = slotsIn, .fail = gbSlotsFail,
                                       .destroy = gbSlotsViewDestroy};
const gbStageOps_t gbStageRemoteOps = {.name = "remote", .kind = GB_STAGE_REMOTE, .out = remoteOut, .in = slotsIn, .fail = gbSlotsFail,
                                       .destroy = gbSlotsViewDestroy};
