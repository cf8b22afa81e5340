/* Shared staging slots (shared_slots.h): the segment, its set-up among a
 * group's members, and the proxy's counter steps. */
#include "core/shared_slots.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "core/shared_slots_impl.h"
#include "os/backoff.h"
#include "os/memfd.h"
#include "os/socket.h"

#define SEGMENT_NAME "gpubridge-slots"
#define PAGE 4096u
/* Pid checks while waiting on a peer's counter: every this many looks. */
#define LIVENESS_EVERY 64

/* A member's control area: its counters, page-rounded. */
#define CTL_BYTES ((sizeof(gbSharedCtl_t) + PAGE - 1) / PAGE * PAGE)
/* The send/recv channels of a world of n members take at most this much
 * host memory together (a slot of each at most a chunk): 2 members with four
 * slots a channel get 16 MiB slots, 8 get 512 KiB. */
#define P2P_BUDGET_BYTES ((size_t)128 << 20)

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

/* The world's channels: p2pDepth slots of p2pBytes; two more than the
 * pipeline's depth, as the group's slots, so that a sender rarely waits for
 * the receiver's read of the slot's last use to travel through the proxies. */
static void sizeChannels(gbComm_t c, gbSharedSlots_t* sh) {
  sh->p2pDepth = c->settings.stagingSlots + 2;
  size_t channels = (size_t)sh->n * (size_t)(sh->n - 1) * (size_t)sh->p2pDepth;
  size_t each = P2P_BUDGET_BYTES / channels;
  if (each > (size_t)c->settings.chunkBytes) each = (size_t)c->settings.chunkBytes;
  sh->p2pBytes = roundPage(each);
}

/* ---------------------------------------------------------------- set-up */

typedef struct {
  int32_t pid, fd; /* fd -1: member 0 has no segment to offer */
  uint64_t bytes;
  uint8_t nonce[GB_MEMFD_NONCE_BYTES];
} offer_t;

enum { PLACE_NONE, PLACE_SHARED, PLACE_REMOTE };

/* Whether g gets slots, and which kind (shared_slots.h). */
static int placement(gbComm_t c, const gbCommGroup_t* g, const gbProbe_t* probes) {
  if (!g->active || c->settings.bridgeSlots == 0 || !c->dev->reduceAsync || !c->dev->hostRegister) return PLACE_NONE;
  if (g->algo.n < 2 || c->settings.stagingSlots + 2 > GB_SHARED_SLOTS_MAX) return PLACE_NONE;
  int oneHost = 1;
  for (int k = 0; k < g->algo.n; k++) oneHost &= probes[g->ranks[k]].hostId == probes[g->ranks[0]].hostId;
  if (oneHost) return g->algo.n <= GB_REDUCE_MAX_SRCS ? PLACE_SHARED : PLACE_NONE;
  return g->algo.n <= GB_REMOTE_SLOTS_MAX ? PLACE_REMOTE : PLACE_NONE;
}

/* Releases what sh holds (any part of it), and sh. */
static void unmap(gbComm_t c, gbSharedSlots_t* sh, int registered) {
  if (sh->copyStream) c->dev->streamDestroy(sh->copyStream); /* drains it first: its tasks use the flags */
  if (sh->fetchStream) c->dev->streamDestroy(sh->fetchStream);
  if (sh->flags) c->dev->hostFree(sh->flags);
  if (sh->scratch) c->dev->memFree(sh->scratch);
  if (registered) c->dev->hostUnregister(sh->base);
  /* The shared segment's mapping, or remote memory (mapped the same way). */
  if (sh->base) munmap(sh->base, sh->bytes);
  free(sh);
}

/* Maps the memory: remote, this member's own; shared, the offered segment
 * (member 0 made it). 1 if it worked. */
static int mapSlots(gbSharedSlots_t* sh, const offer_t* o, void* made) {
  if (sh->remote) {
    void* mem = mmap(NULL, sh->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sh->base = mem == MAP_FAILED ? NULL : mem;
    if (!sh->base) GB_INFO(GB_LOG_NET, "%s: no memory for staging slots (%zu bytes)", sh->name, sh->bytes);
    return sh->base != NULL;
  }
  const char* why = "";
  sh->base = made ? made : gbMemfdOpenPeer(SEGMENT_NAME, o->pid, o->fd, sh->bytes, o->nonce, &why);
  if (!sh->base)
    GB_INFO(GB_LOG_NET, "%s: cannot open member 0's staging segment (/proc/%d/fd/%d: %s)", sh->name, (int)o->pid,
            (int)o->fd, why);
  return sh->base != NULL;
}

/* Maps the memory and registers it with the device; 1 if both worked. */
static int attach(gbComm_t c, gbSharedSlots_t* sh, const offer_t* o, void* made, int* registered) {
  if (!mapSlots(sh, o, made)) return 0;
  void* dev = NULL;
  if (c->dev->hostRegister(sh->base, sh->bytes, &dev) != gbSuccess) {
    GB_INFO(GB_LOG_NET, "%s: cannot register the staging segment with the device: %s", sh->name, gbErrorLast());
    return 0;
  }
  *registered = 1;
  sh->devBase = dev;
  /* A reduction of nothing loads the device's kernels (a GPU compiles them
   * once per process), so that cost is paid here and a device that cannot
   * reduce is found before any member relies on it. */
  gbReduceArgs_t warm = {.dst = dev, .src = {dev}, .nsrc = 1, .count = 0, .dtype = gbFloat32, .op = gbSum};
  if (c->dev->reduceAsync(&warm, NULL) != gbSuccess) {
    GB_INFO(GB_LOG_NET, "%s: the device cannot run the bridge's reduction: %s", sh->name, gbErrorLast());
    return 0;
  }
  return 1;
}

static int sameMembers(const gbCommGroup_t* a, const gbCommGroup_t* b) {
  if (!a->active || !b->active || a->algo.n != b->algo.n) return 0;
  return memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->algo.n) == 0;
}

gbResult_t gbSharedSlotsSetup(gbComm_t c, gbCommGroup_t* g, const gbProbe_t* probes, const gbCommGroup_t* same) {
  int place = placement(c, g, probes);
  if (place == PLACE_NONE) return gbSuccess;
  if (same && same->slots && sameMembers(g, same)) {
    g->slots = same->slots;
    g->slots->groups++;
    return gbSuccess;
  }
  gbSharedSlots_t* sh = calloc(1, sizeof(*sh));
  if (!sh) return gbErrorSet(gbSystemError, "%s: out of memory for shared staging slots", g->name);
  sh->remote = place == PLACE_REMOTE;
  sh->n = g->algo.n;
  sh->me = g->algo.me;
  sh->ranks = g->ranks;
  sh->name = g->name;
  /* Two more than the pipeline's depth: the slot a chunk takes was last
   * read two chunks before the one just reduced, so taking it does not wait
   * for the members' last reads to travel through the proxies. */
  sh->nslots = c->settings.stagingSlots + 2;
  sh->groups = 1;
  sh->slotBytes = roundPage((size_t)c->settings.chunkBytes);
  if (g == &c->world && !sh->remote) sizeChannels(c, sh);
  sh->bytes = slotsStart(sh) + (size_t)sh->n * (size_t)sh->nslots * sh->slotBytes +
              (size_t)sh->n * (size_t)(sh->n - 1) * (size_t)sh->p2pDepth * sh->p2pBytes;
  sh->timeoutSec = c->settings.timeoutSec;
  sh->pollNs = c->dev->hostMemory ? 0 : GB_OS_SLEEP_POLL_NS; /* a GPU bridge's hand-overs wait on each other */
  sh->abortFlag = &c->abortFlag;
  /* What this member lacks (memory) it says with ok = 0 below, so every
   * member falls back together instead of the others waiting for it. */
  size_t nflags = NFLAGS * (size_t)sh->nslots + NP2PFLAGS * (size_t)sh->n * (size_t)sh->p2pDepth;
  int local = c->dev->hostAlloc((void**)&sh->flags, nflags * sizeof(gbFlag_t)) == gbSuccess;
  if (local) gbCommFlagsInit(c, sh->flags, nflags);
  if (local) local = c->dev->streamCreate(&sh->copyStream) == gbSuccess;
  /* A GPU reduces from device memory: a copy engine brings each other
   * member's part over (measured faster than a kernel reading mapped host
   * memory, docs/PERFORMANCE.md). */
  if (local && !c->dev->hostMemory)
    local = c->dev->memAlloc((void**)&sh->scratch, (size_t)sh->nslots * (size_t)sh->n * sh->slotBytes) == gbSuccess &&
            c->dev->streamCreate(&sh->fetchStream) == gbSuccess;
  if (!local) GB_INFO(GB_LOG_NET, "%s: no memory for shared staging slots: %s", g->name, gbErrorLast());
  for (int k = 0; k < sh->n; k++) {
    sh->pid[k] = probes[g->ranks[k]].pid;
  }
  offer_t o;
  memset(&o, 0, sizeof(o));
  o.fd = -1;
  o.bytes = sh->bytes;
  void* made = NULL;
  if (!sh->remote && sh->me == 0 && local && gbRandomBytes(o.nonce, sizeof(o.nonce)) == gbSuccess) {
    const char* why = "";
    o.fd = gbMemfdCreate(SEGMENT_NAME, sh->bytes, o.nonce, &made, &why);
    if (o.fd < 0) GB_INFO(GB_LOG_NET, "%s: no staging segment of %zu bytes (%s)", g->name, sh->bytes, why);
    o.pid = (int32_t)getpid();
  }
  uint64_t sentBefore = g->algo.bytesSent; /* the set-up is no payload: the traffic counters leave it out */
  gbResult_t res = sh->remote ? gbSuccess : gbAlgoBroadcast(&g->algo, &o, sizeof(o), 0);
  int registered = 0;
  int32_t ok = local && res == gbSuccess && (sh->remote || (o.fd >= 0 && o.bytes == sh->bytes)) &&
               attach(c, sh, &o, made, &registered);
  int32_t all = 0;
  const char* step = "the offer from member 0";
  if (res == gbSuccess) {
    step = "the agreement";
    res = gbAlgoAllReduce(&g->algo, &ok, &all, 1, gbInt32, gbMin, 0);
  }
  if (res != gbSuccess) GB_WARN("%s: setting up shared staging slots, %s failed: %s", g->name, step, gbErrorLast());
  if (made) close(o.fd); /* every member mapped it (or never will): the mappings keep it */
  g->algo.bytesSent = sentBefore;
  if (res != gbSuccess || !all) {
    unmap(c, sh, registered);
    if (res == gbSuccess)
      GB_INFO(GB_LOG_NET, "%s: a member could not set up the shared staging slots (its INFO log says why): chunks cross "
                          "over the host transport",
              g->name);
    return res;
  }
  g->slots = sh;
  char channels[96] = "";
  if (sh->p2pDepth > 0)
    snprintf(channels, sizeof(channels), ", and %d of %zu KiB per send/recv channel", sh->p2pDepth, sh->p2pBytes >> 10);
  if (sh->remote)
    GB_INFO(GB_LOG_NET, "%s: %d members on several hosts move %d staging slots of %zu KiB each in registered memory",
            g->name, sh->n, sh->nslots, sh->slotBytes >> 10);
  else
    GB_INFO(GB_LOG_NET, "%s: %d members on this host share %d staging slots of %zu KiB each%s", g->name, sh->n,
            sh->nslots, sh->slotBytes >> 10, channels);
  return gbSuccess;
}

void gbSharedSlotsFree(gbComm_t c, gbCommGroup_t* g) {
  if (!g->slots) return;
  if (--g->slots->groups == 0) unmap(c, g->slots, 1);
  g->slots = NULL;
}

void gbSharedSlotsFail(gbComm_t c, gbCommGroup_t* g) {
  gbSharedSlots_t* sh = g->slots;
  if (!sh) return;
  gbSharedCtl_t* m = gbSharedCtl(sh, sh->me);
  if (atomic_load_explicit(&m->failed, memory_order_relaxed)) return;
  memcpy(&m->cause, &c->cause, sizeof(m->cause));
  atomic_store_explicit(&m->failed, 1, memory_order_release);
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
  return gbProxyPost(c->proxy, op); /* takes st */
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
  return gbProxyPost(c->proxy, op); /* takes list */
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
  if (!sh->scratch) return deviceAt(sh, member, s) + offset;
  char* to = sh->scratch + (s->slot * (size_t)sh->n + (size_t)member) * sh->slotBytes;
  if (bytes < GB_SHARED_SIDE_STREAM_BYTES) { /* small: on the caller's stream, as in Take */
    gbResult_t r = c->dev->copyAsync(to, gbSharedSlotsAt(sh, member, s) + offset, bytes, stream);
    if (r != gbSuccess) *res = r;
    return to;
  }
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
