/* Shared staging slots (shared_slots.h): setting them up among a group's
 * members (shared on one host, remote across hosts), and their teardown. */
#include "core/shared_slots.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "base/result.h"
#include "core/shared_slots_impl.h"
#include "os/backoff.h"
#include "os/memfd.h"
#include "os/socket.h"

#define SEGMENT_NAME "gpubridge-slots"
/* The send/recv channels of a world of n members take at most this much
 * host memory together (a slot of each at most a chunk): 2 members with four
 * slots a channel get 16 MiB slots, 8 get 512 KiB. */
#define P2P_BUDGET_BYTES ((size_t)128 << 20)

/* The world's channels: p2pDepth slots of p2pBytes; two more than the
 * pipeline's depth, as the group's slots, so that a sender rarely waits for
 * the receiver's read of the slot's last use to travel through the proxies. */
static void sizeChannels(gbComm_t c, gbSharedSlots_t* sh) {
  sh->p2pDepth = c->settings.stagingSlots + 2;
  size_t channels = (size_t)sh->n * (size_t)(sh->n - 1) * (size_t)sh->p2pDepth;
  size_t each = P2P_BUDGET_BYTES / channels;
  if (each > (size_t)c->settings.chunkBytes) each = (size_t)c->settings.chunkBytes;
  sh->p2pBytes = gbSharedRoundPage(each);
}

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
  sh->slotBytes = gbSharedRoundPage((size_t)c->settings.chunkBytes);
  if (g == &c->world && !sh->remote) sizeChannels(c, sh);
  sh->bytes = gbSharedLayoutBytes(sh);
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
