/* A chunk's way through shared or remote slots (slots_impl.h): take, stage
 * out, the proxy's step, arrived, the copy or reduction from the members'
 * parts, read; the shared and remote stages' ops. Wire format: member m's
 * part of a slot holds m's chunk (all-reduce, broadcast, reduce), m's block
 * (all-gather), or m's block for each member k at k * len (reduce-scatter,
 * all-to-all: a member's own block is read from its input and never
 * staged). Compressed (w->wire, stage/codec.c): the chunk or blocks in that
 * wire, k * gbStageWireBytes apart, a member's own block staged too, and
 * every member folds the staged parts, its own included. */
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "base/wire.h"
#include "stage/slots_impl.h"

/* The bytes of my part a chunk fills. */
static size_t partBytes(const gbSharedSlots_t* sh, const gbStageWork_t* w) {
  return gbStageWireBytes(w) * (gbSharedBlockPerMember(w->coll) ? (size_t)sh->n : 1);
}

/* The copy stream waits for the caller's stream before it reads a chunk's
 * input, unless it already did in this call and the input was ready then:
 * the walker's later steps on the caller's stream (the reductions of earlier
 * chunks) need not finish before the next chunk goes out. */
static gbResult_t awaitInput(gbSharedSlots_t* sh, const gbStageWork_t* w, void* stream, uint64_t seq,
                             const gbStageSlot_t* s) {
  const gbDeviceOps* dev = sh->ctx.dev;
  if (w->inputReady && sh->inputSeq == seq) return gbSuccess;
  GB_CHECK(dev->flagWrite(gbSharedFlag(sh, FLAG_INPUT, s->slot), s->use, stream));
  GB_CHECK(dev->flagWait(gbSharedFlag(sh, FLAG_INPUT, s->slot), s->use, s->on));
  sh->inputSeq = seq;
  return gbSuccess;
}

/* Take: the next slot for a chunk, on the copy stream (sideStreams) or the caller's. */
static gbResult_t take(gbSharedSlots_t* sh, const gbStageWork_t* w, void* stream, uint64_t seq, int sideStreams,
                       gbStageSlot_t* out) {
  const gbDeviceOps* dev = sh->ctx.dev;
  out->slot = sh->next++ % (size_t)sh->nslots;
  out->use = ++sh->uses[out->slot];
  out->buf = gbSharedAt(sh, sh->me, out->slot);
  void* on = sideStreams ? sh->copyStream : stream;
  out->on = on;
  if (on != stream) GB_CHECK(awaitInput(sh, w, stream, seq, out));
  if (sh->remote) return dev->flagWait(gbSharedFlag(sh, FLAG_FREED, out->slot), out->use - 1, on);
  /* Shared: every other member read the slot's last use, and so did I (on
   * whichever stream that call ran). */
  GB_CHECK(dev->flagWait(gbSharedFlag(sh, FLAG_CONSUMED, out->slot), out->use - 1, on));
  return gbSharedAwait(sh, SIGNAL_READ, out->slot, out->use - 1, on);
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
  if (gbSharedBlockPerMember(w->coll)) return readers * gbStageWireBytes(w);
  return readers > 0 ? partBytes(sh, w) : 0;
}

/* Member k's device scratch of a slot (made at the first part that needs
 * it; NULL with *res set when it cannot be). */
static char* scratchAt(gbSharedSlots_t* sh, size_t slot, int member, gbResult_t* res) {
  if (!sh->scratch) {
    gbResult_t r = sh->ctx.dev->memAlloc((void**)&sh->scratch, gbSharedScratchBytes(sh));
    if (r != gbSuccess) {
      *res = gbErrorSet(r, "%s: no device memory for the shared slots' scratch (%zu MiB, made at the first chunk "
                        "of %zu KiB or more): %s", sh->name, gbSharedScratchBytes(sh) >> 20,
                        GB_PLAN_SIDE_STREAM_BYTES >> 10, gbErrorLast());
      return NULL;
    }
    gbStageMemoryAdd(&sh->ctx, GB_STAGE_MEM_DEVICE, (int64_t)gbSharedScratchBytes(sh));
  }
  return sh->scratch + (slot * (size_t)sh->n + (size_t)member) * sh->slotBytes;
}

/* Where a GPU encodes my compressed part of a large chunk first: my device
 * scratch of the slot, from which one copy moves the narrowed bytes out (the
 * copy engine; a kernel's stores to host memory cross the bus slowly) and my
 * own fold reads it. NULL: encode straight into the slot (the host device, a
 * small part, or uncompressed). */
static char* encodedAt(gbSharedSlots_t* sh, const gbStageWork_t* w, const gbStageSlot_t* s, gbResult_t* res) {
  if (w->wire == GB_WIRE_PLAIN || sh->ctx.dev->hostMemory || !gbPlanOnSideStreams(partBytes(sh, w))) return NULL;
  return scratchAt(sh, s->slot, sh->me, res);
}

/* My part into the slot, on the copy stream (compressed: my own block too). */
static gbResult_t copyOut(gbSharedSlots_t* sh, const gbStageWork_t* w, const gbStageSlot_t* s) {
  size_t bytes = gbStageWireBytes(w);
  if (!w->stageOut || gbSharedSendsInput(sh, w)) return gbSuccess;
  gbResult_t res = gbSuccess;
  char* first = encodedAt(sh, w, s, &res);
  GB_CHECK(res);
  int blocks = gbSharedBlockPerMember(w->coll);
  for (int r = 0; r < (blocks ? sh->n : 1); r++) {
    if (blocks && r == sh->me && w->wire == GB_WIRE_PLAIN) continue;
    char* to = s->buf + (size_t)r * bytes;
    GB_CHECK(gbStageCodecOut(&sh->ctx, w, to, first ? first + (size_t)r * bytes : gbSharedDevOf(sh, to),
                             blocks ? gbStageMyBlock(w, r) : w->src, s->on));
  }
  return first ? sh->ctx.dev->copyAsync(s->buf, first, partBytes(sh, w), s->on) : gbSuccess;
}

/* Across hosts the others read their own copies: once I read mine, the
 * proxy frees the slot (a step in the proxy's order, waiting for nobody). */
static gbResult_t postRemoteRead(gbSharedSlots_t* sh, const gbProxyOp_t* tag, const gbStageSlot_t* s) {
  gbSharedStep_t st = {.sh = sh, .slot = s->slot, .use = s->use, .what = "to finish reading"};
  return gbSharedPostStep(&st, tag, gbSharedFlag(sh, FLAG_CONSUMED, s->slot), s->use,
                          gbSharedFlag(sh, FLAG_FREED, s->slot), s->use);
}

/* Take, copy out, mark staged (on one host: tell the members first): the
 * front both stages share. */
static gbResult_t stageChunk(gbSharedSlots_t* sh, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                             gbStageSlot_t* s) {
  GB_CHECK(take(sh, w, stream, tag->seq, gbPlanOnSideStreams(partBytes(sh, w)), s));
  s->queued = 1;
  s->seq = tag->seq;
  GB_CHECK(copyOut(sh, w, s));
  if (!sh->remote) GB_CHECK(gbSharedSignal(sh, SIGNAL_FULL, s->slot, s->use, s->on));
  return sh->ctx.dev->flagWrite(gbSharedFlag(sh, FLAG_STAGED, s->slot), s->use, s->on);
}

/* On one host the streams hand chunks over themselves; the proxy watches. */
static gbResult_t sharedOut(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                            gbStageSlot_t* s) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  GB_CHECK(stageChunk(sh, w, stream, tag, s));
  return gbSharedPostWatch(sh, tag, SIGNAL_FULL, s->slot, s->use, sentBytes(sh, w), gbSharedFlag(sh, FLAG_STAGED, s->slot),
                           gbSharedFlag(sh, FLAG_FULL, s->slot));
}

/* The stream waits until every member staged this use of the slot. */
static gbResult_t awaitFull(const gbSharedSlots_t* sh, const gbStageSlot_t* s, void* stream) {
  if (sh->remote) return sh->ctx.dev->flagWait(gbSharedFlag(sh, FLAG_FULL, s->slot), s->use, stream);
  return gbSharedAwait(sh, SIGNAL_FULL, s->slot, s->use, stream);
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
  if (dev->hostMemory || !gbPlanOnSideStreams(bytes)) return gbSharedDeviceAt(sh, member, s->slot) + offset;
  char* to = scratchAt(sh, s->slot, member, res);
  if (!to) return NULL;
  /* For this use's first part the fetch stream waits until every member
   * staged it and this member reduced the scratch's last use. */
  gbResult_t r = gbSuccess;
  if (sh->fetchUse[s->slot] != s->use) {
    sh->fetchUse[s->slot] = s->use;
    r = awaitFull(sh, s, sh->fetchStream);
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

/* The fold of every member's part (or block `at`) into dst, mine from my
 * input (compressed: from my staged part, as every member folds it). */
static gbResult_t reduceParts(gbStage_t* st, const gbStageWork_t* w, const gbStageSlot_t* s, const void* mine,
                              size_t at, int ring, void* stream) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  size_t bytes = gbStageWireBytes(w);
  const void* parts[GB_REDUCE_MAX_SRCS];
  gbResult_t res = gbSuccess;
  char* encoded = encodedAt(sh, w, s, &res); /* my compressed part, where my copy out encoded it */
  for (int m = 0; m < sh->n && res == gbSuccess; m++)
    parts[m] = m != sh->me ? fetch(sh, m, s, at, bytes, stream, &res) : w->wire == GB_WIRE_PLAIN ? mine
               : encoded ? (const void*)(encoded + at) : fetch(sh, m, s, at, bytes, stream, &res);
  GB_CHECK(res);
  return gbStageCodecFold(&sh->ctx, w, parts, sh->n, ring, stream);
}

/* The members' parts arrived: reduce them (all-reduce, reduce on its root,
 * reduce-scatter: my block of every part), or copy what I need (the root's
 * part, every member's block), then let the slot go. */
static gbResult_t slotsIn(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbStageSlot_t* s) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  const gbDeviceOps* dev = sh->ctx.dev;
  size_t bytes = w->len * w->esize, mineAt = gbSharedBlockPerMember(w->coll) ? (size_t)sh->me * gbStageWireBytes(w) : 0;
  GB_CHECK(awaitFull(sh, s, stream));
  /* My copy out on the side stream read my input, which the result may overwrite (remote: implied by full). */
  if (!sh->remote && s->on != stream) GB_CHECK(dev->flagWait(gbSharedFlag(sh, FLAG_STAGED, s->slot), s->use, stream));
  if (!w->stageIn) {
  } else if (w->coll == GB_COLL_BROADCAST && w->root == sh->me) {
    /* The root's part is its input (the stream waited for the others, not for its own copy out). */
    if (w->dst != w->src) GB_CHECK(dev->copyAsync(w->dst, w->src, bytes, stream));
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
  if (!sh->remote) GB_CHECK(gbSharedSignal(sh, SIGNAL_READ, s->slot, s->use, stream));
  GB_CHECK(dev->flagWrite(gbSharedFlag(sh, FLAG_CONSUMED, s->slot), s->use, stream));
  gbProxyOp_t plain;
  memset(&plain, 0, sizeof(plain));
  plain.seq = s->seq;
  if (!sh->remote)
    return gbSharedPostWatch(sh, &plain, SIGNAL_READ, s->slot, s->use, 0, gbSharedFlag(sh, FLAG_CONSUMED, s->slot),
                             gbSharedFlag(sh, FLAG_FREED, s->slot));
  return postRemoteRead(sh, &plain, s);
}

const gbStageOps_t gbStageSharedOps = {.name = "shared", .kind = GB_STAGE_SHARED, .out = sharedOut, .in = slotsIn, .fail = gbSlotsFail,
                                       .destroy = gbSlotsViewDestroy};
const gbStageOps_t gbStageRemoteOps = {.name = "remote", .kind = GB_STAGE_REMOTE, .out = remoteOut, .in = slotsIn, .fail = gbSlotsFail,
                                       .destroy = gbSlotsViewDestroy};
