/* Shared staging slots (shared_slots.h): the layout, and the steps of a
 * chunk on the streams and the proxy (set-up: shared_slots_setup.c). */
#include "core/shared_slots.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/result.h"
#include "core/shared_slots_impl.h"
#include "os/backoff.h"

#define PAGE 4096u
/* Pid checks while waiting on a peer's counter: every this many looks. */
#define LIVENESS_EVERY 64

/* A member's control area: its counters, page-rounded. */
#define CTL_BYTES ((sizeof(gbSharedCtl_t) + PAGE - 1) / PAGE * PAGE)

static gbFlag_t* flagOf(const gbSharedSlots_t* sh, int which, size_t slot) {
  return &sh->flags[(size_t)which * (size_t)sh->nslots + slot];
}

gbFlag_t* gbSharedP2pFlag(const gbSharedSlots_t* sh, int which, int member, size_t slot) {
  size_t perFlag = (size_t)sh->n * (size_t)sh->p2pDepth;
  return &sh->flags[NFLAGS * (size_t)sh->nslots + (size_t)which * perFlag + (size_t)member * (size_t)sh->p2pDepth + slot];
}

static size_t roundPage(size_t b) { return (b + PAGE - 1) / PAGE * PAGE; }

gbSharedCtl_t* gbSharedCtl(const gbSharedSlots_t* sh, int k) {
  return (gbSharedCtl_t*)(sh->base + PAGE + CTL_BYTES * (size_t)k);
}

static size_t slotsStart(const gbSharedSlots_t* sh) { return PAGE + CTL_BYTES * (size_t)sh->n; }

static size_t slotOffset(const gbSharedSlots_t* sh, int member, size_t slot) {
  return slotsStart(sh) + ((size_t)member * (size_t)sh->nslots + slot) * sh->slotBytes;
}

char* gbSharedP2pAt(const gbSharedSlots_t* sh, int from, int to, size_t slot) {
  size_t channel = (size_t)from * (size_t)(sh->n - 1) + (size_t)(to < from ? to : to - 1);
  size_t start = slotsStart(sh) + (size_t)sh->n * (size_t)sh->nslots * sh->slotBytes;
  return sh->base + start + (channel * (size_t)sh->p2pDepth + slot) * sh->p2pBytes;
}
size_t gbSharedRoundPage(size_t b) { return roundPage(b); }

size_t gbSharedLayoutBytes(const gbSharedSlots_t* sh) {
  return slotsStart(sh) + (size_t)sh->n * (size_t)sh->nslots * sh->slotBytes +
         (size_t)sh->n * (size_t)(sh->n - 1) * (size_t)sh->p2pDepth * sh->p2pBytes;
}

/* ---------------------------------------------------------- counter steps */

/* Whether member k's process still runs: it exists and is no zombie (a
 * killed rank its launcher has not reaped yet). No descriptor is kept per
 * peer: a job near its descriptor limit (a listener under a flood) keeps
 * them all. */
static int alive(const gbSharedSlots_t* sh, int k) {
  if (kill(sh->pid[k], 0) != 0 && errno == ESRCH) return 0;
  char path[64], stat[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", sh->pid[k]);
  FILE* f = fopen(path, "re");
  if (!f) return errno != ENOENT;
  size_t n = fread(stat, 1, sizeof(stat) - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char* close = strrchr(stat, ')'); /* "pid (comm) S ...": the state follows the name */
  return !(close && close[1] == ' ' && close[2] == 'Z');
}

/* Notes whom the failure just set blames, as the transports do, so the
 * cause this rank tells its peers names that rank (net.h). */
static gbResult_t blame(gbResult_t res, const gbNetCause_t* cause) {
  gbNetNoteFailure(gbErrorLast(), cause);
  return res;
}

/* Why waiting on member k cannot go on (gbSuccess: it can). */
static gbResult_t peerProblem(const gbSharedSlots_t* sh, int k, int checkLife, const gbSharedStep_t* st) {
  gbSharedCtl_t* m = gbSharedCtl(sh, k);
  if (atomic_load_explicit(&m->failed, memory_order_acquire)) {
    gbNetCause_t cause;
    memcpy(&cause, &m->cause, sizeof(cause));
    char msg[512];
    if (!gbNetCauseSanitize(&cause)) cause = (gbNetCause_t){.faultRank = sh->ranks[k], .seenBy = -1};
    gbNetCauseText(msg, sizeof(msg), sh->name, sh->ranks[k], &cause, " (shared staging slots)");
    return blame(gbErrorSet(gbRemoteError, "%s", msg), &cause);
  }
  if (checkLife && !alive(sh, k)) {
    gbResult_t res = gbErrorSet(gbRemoteError, "%s: rank %d died or was killed while this rank waited for it %s chunk "
                                               "use %llu of staging slot %zu (shared staging slots; see its log)",
                                sh->name, sh->ranks[k], st->what, (unsigned long long)st->use, st->slot);
    return blame(res, &(gbNetCause_t){.faultRank = sh->ranks[k], .seenBy = -1, .code = gbRemoteError});
  }
  return gbSuccess;
}

static gbResult_t counterStep(void* arg) {
  const gbSharedStep_t* st = arg;
  gbSharedSlots_t* sh = st->sh;
  if (st->publish) atomic_store_explicit(st->publish, st->use, memory_order_release);
  int64_t start = gbClockNowNs(), deadline = start + (int64_t)(sh->timeoutSec * 1e9);
  for (int looks = 0;; looks++) {
    int waiting = -1;
    for (int i = 0; i < st->nwait && waiting < 0; i++)
      if (atomic_load_explicit(st->wait[i], memory_order_acquire) < st->use) waiting = st->who[i];
    if (waiting < 0) {
      if (st->group) st->group->bytesSent += st->bytes;
      return gbSuccess;
    }
    GB_CHECK(peerProblem(sh, waiting, looks % LIVENESS_EVERY == LIVENESS_EVERY - 1, st));
    if (sh->abortFlag && __atomic_load_n(sh->abortFlag, __ATOMIC_ACQUIRE))
      return gbErrorSet(gbRemoteError, "%s: the communicator was aborted", sh->name);
    int64_t now = gbClockNowNs();
    if (now > deadline) {
      /* Worded as the transports word a stall, so a reader (or a test) sees one kind of failure. */
      gbResult_t res = gbErrorSet(gbTimeout, "%s: no progress from rank %d within %.0f s while waiting for it %s its "
                                             "chunk in staging slot %zu (is it stopped or overloaded? GPUBRIDGE_TIMEOUT "
                                             "sets the limit; shared staging slots)",
                                  sh->name, sh->ranks[waiting], sh->timeoutSec, st->what, st->slot);
      return blame(res, &(gbNetCause_t){.faultRank = sh->ranks[waiting], .seenBy = -1, .code = gbTimeout});
    }
    gbOsBackoff(now - start, GB_OS_YIELD_UNWOKEN_NS, sh->pollNs);
  }
}

gbResult_t gbSharedPostStep(gbComm_t c, const gbSharedStep_t* step, gbProxyOp_t* op, gbFlag_t* ready,
                            uint64_t readyValue, gbFlag_t* done, uint64_t doneValue) {
  gbSharedStep_t* st = malloc(sizeof(*st));
  if (!st) return gbErrorSet(gbSystemError, "%s: out of memory for a proxy step", step->sh->name);
  *st = *step;
  op->kind = GB_PROXY_CALL;
  op->fn = counterStep;
  op->arg = st;
  op->freeArg = free;
  op->ready = ready;
  op->readyValue = readyValue;
  op->done = done;
  op->doneValue = doneValue;
  gbResult_t res = gbProxyPost(c->proxy, op); /* takes st */
  if (res != gbSuccess) free(st);
  return res;
}

/* The group's step on slot s: publish my full (or read) counter, wait for
 * every other member's. Remote, a read step waits for nobody (the others
 * read their own copies) and only frees the slot. */
static gbResult_t postStep(gbComm_t c, gbSharedSlots_t* sh, gbProxyOp_t* op, size_t slot, uint64_t use, int read,
                           uint64_t bytes) {
  gbSharedStep_t st = {.sh = sh, .slot = slot, .use = use, .what = read ? "to finish reading" : "to stage",
                       .group = read ? NULL : op->group, .bytes = bytes};
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  st.publish = read ? &mine->read[slot] : &mine->full[slot];
  for (int k = 0; k < sh->n && !sh->remote; k++) {
    if (k == sh->me) continue;
    gbSharedCtl_t* m = gbSharedCtl(sh, k);
    st.who[st.nwait] = k;
    st.wait[st.nwait++] = read ? &m->read[slot] : &m->full[slot];
  }
  return gbSharedPostStep(c, &st, op, flagOf(sh, read ? FLAG_CONSUMED : FLAG_STAGED, slot), use,
                          flagOf(sh, read ? FLAG_FREED : FLAG_FULL, slot), use);
}

gbResult_t gbSharedSlotsTake(gbComm_t c, gbSharedSlots_t* sh, void* stream, size_t bytes, gbSlot_t* out,
                             void** copyStream) {
  out->slot = sh->next++ % (size_t)sh->nslots;
  out->use = ++sh->uses[out->slot];
  out->buf = gbSharedSlotsAt(sh, sh->me, out);
  /* A small chunk is copied out on the caller's stream: a hand-over to the
   * copy stream would cost more than the overlap gains. */
  void* on = bytes < GB_SHARED_SIDE_STREAM_BYTES ? stream : sh->copyStream;
  sh->stagedOn[out->slot] = on;
  *copyStream = on;
  if (on != stream) {
    GB_CHECK(c->dev->flagWrite(flagOf(sh, FLAG_INPUT, out->slot), out->use, stream));
    GB_CHECK(c->dev->flagWait(flagOf(sh, FLAG_INPUT, out->slot), out->use, on));
  }
  return c->dev->flagWait(flagOf(sh, FLAG_FREED, out->slot), out->use - 1, on);
}

/* Whether member k needs bytes of member from's part (the whole part, or
 * its block k), as chunk says. */
static int needs(const gbSharedChunk_t* ch, int k, int from) {
  if (k == from) return 0;
  if (ch->move == GB_MOVE_FROM_ROOT) return from == ch->root;
  if (ch->move == GB_MOVE_TO_ROOT) return k == ch->root;
  return 1;
}

/* What this member staged for the others: the traffic counter's "sent" on
 * one host (each block another member reads, or the part once). */
static uint64_t sentBytes(const gbSharedSlots_t* sh, const gbSharedChunk_t* ch) {
  uint64_t blocks = 0;
  for (int k = 0; k < sh->n; k++) blocks += (uint64_t)needs(ch, k, sh->me);
  if (ch->move == GB_MOVE_BLOCKS) return blocks * ch->block;
  return blocks > 0 ? ch->part : 0;
}

/* Remote: the proxy sends this member's part (or block k of it) to each
 * member k that needs it, and receives theirs into their parts of this
 * member's copy, in one list over the group's transport. */
static gbResult_t postMoves(gbComm_t c, gbSharedSlots_t* sh, const gbSlot_t* s, const gbSharedChunk_t* ch,
                            gbProxyOp_t* op) {
  gbAlgoP2p_t* list = calloc(2 * (size_t)sh->n, sizeof(gbAlgoP2p_t));
  if (!list) return gbErrorSet(gbSystemError, "%s: out of memory for a proxy step", sh->name);
  int n = 0;
  int blocks = ch->move == GB_MOVE_BLOCKS;
  size_t bytes = blocks ? ch->block : ch->part;
  for (int k = 0; k < sh->n; k++) {
    if (needs(ch, k, sh->me))
      list[n++] = (gbAlgoP2p_t){k, 1, gbSharedSlotsAt(sh, sh->me, s) + (blocks ? (size_t)k * bytes : 0), bytes};
    if (needs(ch, sh->me, k))
      list[n++] = (gbAlgoP2p_t){k, 0, gbSharedSlotsAt(sh, k, s) + (blocks ? (size_t)sh->me * bytes : 0), bytes};
  }
  op->kind = GB_PROXY_SENDRECV;
  op->p2p = list;
  op->np2p = n;
  op->ready = flagOf(sh, FLAG_STAGED, s->slot);
  op->readyValue = s->use;
  op->done = flagOf(sh, FLAG_FULL, s->slot);
  op->doneValue = s->use;
  gbResult_t res = gbProxyPost(c->proxy, op); /* takes list */
  if (res != gbSuccess) free(list);
  return res;
}

gbResult_t gbSharedSlotsStaged(gbComm_t c, gbSharedSlots_t* sh, const gbSlot_t* s, const gbSharedChunk_t* chunk,
                               gbProxyOp_t* op) {
  GB_CHECK(c->dev->flagWrite(flagOf(sh, FLAG_STAGED, s->slot), s->use, sh->stagedOn[s->slot]));
  if (sh->remote) return postMoves(c, sh, s, chunk, op);
  return postStep(c, sh, op, s->slot, s->use, 0, sentBytes(sh, chunk));
}

gbResult_t gbSharedSlotsArrived(gbComm_t c, gbSharedSlots_t* sh, const gbSlot_t* s, void* stream) {
  return c->dev->flagWait(flagOf(sh, FLAG_FULL, s->slot), s->use, stream);
}

gbResult_t gbSharedSlotsRead(gbComm_t c, gbSharedSlots_t* sh, const gbSlot_t* s, void* stream) {
  GB_CHECK(c->dev->flagWrite(flagOf(sh, FLAG_CONSUMED, s->slot), s->use, stream));
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.seq = c->seq;
  return postStep(c, sh, &op, s->slot, s->use, 1, 0);
}

char* gbSharedSlotsAt(const gbSharedSlots_t* sh, int member, const gbSlot_t* s) {
  return sh->base + slotOffset(sh, member, s->slot);
}

static const char* deviceAt(const gbSharedSlots_t* sh, int member, const gbSlot_t* s) {
  return sh->devBase + slotOffset(sh, member, s->slot);
}

const void* gbSharedSlotsFetch(gbComm_t c, gbSharedSlots_t* sh, int member, const gbSlot_t* s, size_t offset,
                               size_t bytes, void* stream, gbResult_t* res) {
  /* Host memory, or small: the reduction reads the part where it lies (on a
   * GPU mapped host memory: a copy in first costs one operation more). */
  if (!sh->scratch || bytes < GB_SHARED_SIDE_STREAM_BYTES) return deviceAt(sh, member, s) + offset;
  char* to = sh->scratch + (s->slot * (size_t)sh->n + (size_t)member) * sh->slotBytes;
  /* The fetch stream copies the part in while the caller's stream still
   * reduces the chunk before; for this use's first part it waits until
   * every member staged it and this member reduced the scratch's last use. */
  gbResult_t r = gbSuccess;
  if (sh->fetchUse[s->slot] != s->use) {
    sh->fetchUse[s->slot] = s->use;
    r = c->dev->flagWait(flagOf(sh, FLAG_FULL, s->slot), s->use, sh->fetchStream);
    if (r == gbSuccess) r = c->dev->flagWait(flagOf(sh, FLAG_CONSUMED, s->slot), s->use - 1, sh->fetchStream);
  }
  uint64_t fetched = ++sh->fetches[s->slot];
  gbFlag_t* flag = flagOf(sh, FLAG_FETCHED, s->slot);
  if (r == gbSuccess) r = c->dev->copyAsync(to, gbSharedSlotsAt(sh, member, s) + offset, bytes, sh->fetchStream);
  if (r == gbSuccess) r = c->dev->flagWrite(flag, fetched, sh->fetchStream);
  if (r == gbSuccess) r = c->dev->flagWait(flag, fetched, stream);
  if (r != gbSuccess) *res = r;
  return to;
}

int gbSharedSlotsMembers(const gbSharedSlots_t* sh) { return sh->n; }
int gbSharedSlotsMe(const gbSharedSlots_t* sh) { return sh->me; }
