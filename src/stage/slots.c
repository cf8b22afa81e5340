/* Shared and remote slots (slots_impl.h): the layout, and the proxy's
 * counter step with its liveness checks (a chunk's steps: slots_chunk.c;
 * set-up: slots_setup.c). */

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/result.h"
#include "stage/slots_impl.h"
#include "os/backoff.h"

#define PAGE 4096u
/* Pid checks while waiting on a peer's counter: every this many looks. */
#define LIVENESS_EVERY 64

/* A member's control area: its counters, page-rounded. */
#define CTL_BYTES ((sizeof(gbSharedCtl_t) + PAGE - 1) / PAGE * PAGE)

gbFlag_t* gbSharedFlag(const gbSharedSlots_t* sh, int which, size_t slot) {
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

char* gbSharedAt(const gbSharedSlots_t* sh, int member, size_t slot) { return sh->base + slotOffset(sh, member, slot); }

const char* gbSharedDeviceAt(const gbSharedSlots_t* sh, int member, size_t slot) {
  return sh->devBase + slotOffset(sh, member, slot);
}

static size_t exchangeStart(const gbSharedSlots_t* sh) {
  return slotsStart(sh) + (size_t)sh->n * (size_t)sh->nslots * sh->slotBytes +
         (size_t)sh->n * (size_t)(sh->n - 1) * (size_t)sh->p2pDepth * sh->p2pBytes;
}

size_t gbSharedExchangeOffset(const gbSharedSlots_t* sh, int member, uint64_t use) {
  return exchangeStart(sh) + ((size_t)member * 2 + (size_t)(use & 1)) * sh->exchangeBytes;
}

size_t gbSharedLayoutBytes(const gbSharedSlots_t* sh) {
  return exchangeStart(sh) + (size_t)sh->n * 2 * sh->exchangeBytes;
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
  /* Life first, then the failure: a member writes its cause before it can
   * exit, so one that failed, told and exited between the two looks is
   * heard with its cause, not taken for dead. */
  int dead = checkLife && !alive(sh, k);
  if (atomic_load_explicit(&m->failed, memory_order_acquire)) {
    gbNetCause_t cause;
    memcpy(&cause, &m->cause, sizeof(cause));
    char msg[512];
    if (!gbNetCauseSanitize(&cause)) cause = (gbNetCause_t){.faultRank = sh->ranks[k], .seenBy = -1};
    gbNetCauseText(msg, sizeof(msg), sh->name, sh->ranks[k], &cause, " (shared staging slots)");
    return blame(gbErrorSet(gbRemoteError, "%s", msg), &cause);
  }
  if (dead) {
    gbResult_t res = gbErrorSet(gbRemoteError, "%s: rank %d died or was killed while this rank waited for it %s chunk "
                                               "use %llu of staging slot %zu (shared staging slots; see its log)",
                                sh->name, sh->ranks[k], st->what, (unsigned long long)st->use, st->slot);
    return blame(res, &(gbNetCause_t){.faultRank = sh->ranks[k], .seenBy = -1, .code = gbRemoteError});
  }
  return gbSuccess;
}

static gbResult_t counterStep(void* arg) {
  gbSharedStep_t* st = arg;
  gbSharedSlots_t* sh = st->sh;
  if (st->looks == 0) {
    if (st->publish) atomic_store_explicit(st->publish, st->use, memory_order_release);
    st->start = gbClockNowNs();
  }
  int64_t deadline = st->start + (int64_t)(sh->ctx.timeoutSec * 1e9);
  for (;; st->looks++) {
    int waiting = -1;
    for (int i = 0; i < st->nwait && waiting < 0; i++)
      for (int j = 0; j < (st->span > 1 ? st->span : 1) && waiting < 0; j++) {
        _Atomic uint64_t* c = (_Atomic uint64_t*)((char*)st->wait[i] + (size_t)j * sizeof(gbFlag_t));
        if (atomic_load_explicit(c, memory_order_acquire) < st->use) waiting = st->who[i];
      }
    if (waiting < 0) {
      if (st->group) st->group->bytesSent += st->bytes;
      st->passed = 1;
      return gbSuccess;
    }
    GB_CHECK(peerProblem(sh, waiting, st->looks % LIVENESS_EVERY == LIVENESS_EVERY - 1, st));
    if (sh->ctx.abortFlag && atomic_load_explicit(sh->ctx.abortFlag, memory_order_acquire))
      return gbErrorSet(gbRemoteError, "%s: the communicator was aborted", sh->name);
    int64_t now = gbClockNowNs();
    if (now > deadline) {
      /* Worded as the transports word a stall, so a reader (or a test) sees one kind of failure. */
      gbResult_t res = gbErrorSet(gbTimeout, "%s: no progress from rank %d within %.0f s while waiting for it %s its "
                                             "chunk in staging slot %zu (is it stopped or overloaded? GPUBRIDGE_TIMEOUT "
                                             "sets the limit; shared staging slots)",
                                  sh->name, sh->ranks[waiting], sh->ctx.timeoutSec, st->what, st->slot);
      return blame(res, &(gbNetCause_t){.faultRank = sh->ranks[waiting], .seenBy = -1, .code = gbTimeout});
    }
    if (st->watch) {
      st->looks++;
      return gbInProgress; /* the proxy looks again (proxy.h) */
    }
    gbOsBackoff(now - st->start, GB_OS_YIELD_UNWOKEN_NS, sh->ctx.pollNs);
  }
}

/* A watch that failed, or never ran after an earlier failure, lets this
 * member's streams go. */
static void freeStep(void* arg) {
  gbSharedStep_t* st = arg;
  if (st->watch && !st->passed) gbSharedRelease(st->sh, gbRemoteError);
  free(st);
}

gbResult_t gbSharedPostStep(const gbSharedStep_t* step, const gbProxyOp_t* tag, gbFlag_t* ready,
                            uint64_t readyValue, gbFlag_t* done, uint64_t doneValue) {
  gbSharedStep_t* st = malloc(sizeof(*st));
  if (!st) {
    if (step->watch) gbSharedRelease(step->sh, gbSystemError);
    return gbErrorSet(gbSystemError, "%s: out of memory for a proxy step", step->sh->name);
  }
  *st = *step;
  st->passed = 0;
  st->looks = 0;
  gbProxyOp_t op = *tag;
  op.watch = step->watch;
  gbResult_t res = gbStagePost(&step->sh->ctx, &op, counterStep, st, freeStep, ready, readyValue, done, doneValue);
  if (res != gbSuccess) freeStep(st);
  return res;
}

/* ---------------------------------------------------------------- signals */

/* What a release stores: at or above every use a wait asks for, in 64 bits
 * and in the low 32 (a GPU's 32-bit wait compares that word cyclically, so
 * device/gpu/flag.c keeps 32-bit values below 2^30). */
#define RELEASED 0x3FFFFFFF3FFFFFFFull

static gbFlag_t* signalOf(const gbSharedSlots_t* sh, int to, int which, int from, size_t slot) {
  gbSharedCtl_t* c = gbSharedCtl(sh, to);
  return which == SIGNAL_FULL ? &c->inFull[from][slot] : &c->inRead[from][slot];
}

gbResult_t gbSharedSignal(const gbSharedSlots_t* sh, int which, size_t slot, uint64_t use, void* stream) {
  const gbDeviceOps* dev = sh->ctx.dev;
  for (int k = 0; k < sh->n; k++) {
    if (k == sh->me) continue;
    gbFlag_t* f = signalOf(sh, k, which, sh->me, slot);
    if (dev->flagWriteMapped) /* the segment is one mapped range: no lookup per write */
      GB_CHECK(dev->flagWriteMapped(f, gbSharedDevOf(sh, f), use, stream));
    else
      GB_CHECK(dev->flagWrite(f, use, stream));
  }
  return gbSuccess;
}

gbResult_t gbSharedAwait(const gbSharedSlots_t* sh, int which, size_t slot, uint64_t use, void* stream) {
  if (use == 0) return gbSuccess;
  for (int k = 0; k < sh->n; k++)
    if (k != sh->me) GB_CHECK(sh->ctx.dev->flagWait(signalOf(sh, sh->me, which, k, slot), use, stream));
  return gbSuccess;
}

void gbSharedRelease(const gbSharedSlots_t* sh, gbResult_t error) {
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  for (int k = 0; k < sh->n; k++) {
    for (int s = 0; s < sh->nslots; s++) {
      gbFlagSetHost(signalOf(sh, sh->me, SIGNAL_FULL, k, (size_t)s), RELEASED, (int)error);
      gbFlagSetHost(signalOf(sh, sh->me, SIGNAL_READ, k, (size_t)s), RELEASED, (int)error);
    }
    for (int b = 0; b < GB_STAGE_EXCHANGE_BLOCKS; b++) gbFlagSetHost(&mine->exchange[k][b], RELEASED, (int)error);
  }
  for (int b = 0; b < GB_STAGE_EXCHANGE_BLOCKS; b++) gbFlagSetHost(&mine->exchangeDone[b], RELEASED, (int)error);
  /* Members write my flags without looking: one's late write may lower a
   * released flag again. The stop word only this member sets. */
  atomic_store_explicit(&mine->exchangeStop, 1, memory_order_release);
}

gbResult_t gbSharedPostWatch(gbSharedSlots_t* sh, const gbProxyOp_t* tag, int which, size_t slot, uint64_t use,
                             uint64_t bytes, gbFlag_t* ready, gbFlag_t* done) {
  gbSharedStep_t st = {.sh = sh, .slot = slot, .use = use, .what = which == SIGNAL_READ ? "to finish reading" : "to stage",
                       .group = which == SIGNAL_READ ? NULL : tag->group, .bytes = bytes, .watch = 1};
  for (int k = 0; k < sh->n; k++) {
    if (k == sh->me) continue;
    st.who[st.nwait] = k;
    st.wait[st.nwait++] = &signalOf(sh, sh->me, which, k, slot)->value;
  }
  return gbSharedPostStep(&st, tag, ready, use, done, use);
}
