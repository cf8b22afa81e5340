/* Shared and remote slots (slots_impl.h): setting them up among a group's
 * members (shared on one host, remote across hosts), their views, failure
 * and teardown. */

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "base/result.h"
#include "stage/slots_impl.h"
#include "os/backoff.h"
#include "os/memfd.h"
#include "os/socket.h"

#define SEGMENT_NAME "gpubridge-slots"

/* The world's channels: as many slots as the group's (spec->nslots), each
 * at most a chunk, all within the budget (plan/ sizes both). */
static void sizeChannels(const gbStageSlotsSpec_t* spec, gbSharedSlots_t* sh) {
  sh->p2pDepth = spec->nslots;
  size_t channels = (size_t)sh->n * (size_t)(sh->n - 1) * (size_t)sh->p2pDepth;
  size_t each = spec->channelBudget / channels;
  if (each > spec->slotBytes) each = spec->slotBytes;
  sh->p2pBytes = gbSharedRoundPage(each);
}

typedef struct {
  int32_t pid, fd; /* fd -1: member 0 has no segment to offer */
  uint64_t bytes;
  uint8_t nonce[GB_MEMFD_NONCE_BYTES];
} offer_t;

enum { PLACE_NONE, PLACE_SHARED, PLACE_REMOTE };

/* Whether the group gets slots, and which kind (stage.h). */
static int placement(const gbStageCtx_t* ctx, const gbStageSlotsSpec_t* spec) {
  int n = spec->group->n;
  if (!spec->enabled || !ctx->dev->reduceAsync || !ctx->dev->hostRegister) return PLACE_NONE;
  if (n < 2 || spec->nslots > GB_STAGE_SLOTS_MAX) return PLACE_NONE;
  int oneHost = 1;
  for (int k = 0; k < n; k++) oneHost &= spec->hostIds[k] == spec->hostIds[0];
  if (oneHost) return n <= GB_REDUCE_MAX_SRCS ? PLACE_SHARED : PLACE_NONE;
  return n <= GB_STAGE_REMOTE_MAX ? PLACE_REMOTE : PLACE_NONE;
}

/* Releases what sh holds (any part of it), and sh. */
static void unmap(gbSharedSlots_t* sh, int registered) {
  const gbDeviceOps* dev = sh->ctx.dev;
  if (sh->copyStream) dev->streamDestroy(sh->copyStream); /* drains it first: its tasks use the flags */
  if (sh->fetchStream) dev->streamDestroy(sh->fetchStream);
  if (sh->flags) dev->hostFree(sh->flags);
  if (sh->scratch) {
    dev->memFree(sh->scratch);
    gbStageMemoryAdd(&sh->ctx, GB_STAGE_MEM_DEVICE, -(int64_t)gbSharedScratchBytes(sh));
  }
  if (sh->counted) {
    gbStageMemoryAdd(&sh->ctx, sh->remote ? GB_STAGE_MEM_PINNED : GB_STAGE_MEM_SEGMENT, -sh->counted);
    gbStageMemoryAdd(&sh->ctx, GB_STAGE_MEM_PINNED, -(int64_t)(gbSharedFlagCount(sh) * sizeof(gbFlag_t)));
  }
  if (sh->netMem) sh->net->memDeregister(sh->netMem);
  if (registered) dev->hostUnregister(sh->base);
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
static int attach(gbSharedSlots_t* sh, const offer_t* o, void* made, int* registered) {
  if (!mapSlots(sh, o, made)) return 0;
  void* dev = NULL;
  if (sh->ctx.dev->hostRegister(sh->base, sh->bytes, &dev) != gbSuccess) {
    GB_INFO(GB_LOG_NET, "%s: cannot register the staging segment with the device: %s", sh->name, gbErrorLast());
    return 0;
  }
  *registered = 1;
  sh->devBase = dev;
  /* Remote slots are the network's source and destination: a transport
   * that registers memory (UCX: RDMA) gets them; unregistered, they still
   * move. */
  if (sh->remote && sh->net && sh->net->memRegister &&
      sh->net->memRegister(sh->base, sh->bytes, &sh->netMem) != gbSuccess)
    GB_INFO(GB_LOG_NET, "%s: staging slots not registered with the %s transport: %s", sh->name, sh->net->name,
            gbErrorLast());
  /* My signals, before any member can write them (they start after the agreement below). */
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  gbStageFlagsInit(&sh->ctx, &mine->inFull[0][0], sizeof(mine->inFull) / sizeof(gbFlag_t));
  gbStageFlagsInit(&sh->ctx, &mine->inRead[0][0], sizeof(mine->inRead) / sizeof(gbFlag_t));
  for (size_t k = 0; k < GB_REDUCE_MAX_SRCS; k++)
    for (size_t s = 0; s < GB_STAGE_SLOTS_MAX; s++) mine->inFull[k][s].foreign = mine->inRead[k][s].foreign = 1;
  gbStageFlagsInit(&sh->ctx, &mine->exchange[0][0], sizeof(mine->exchange) / sizeof(gbFlag_t));
  gbStageFlagsInit(&sh->ctx, &mine->exchangeReady, 1);
  gbStageFlagsInit(&sh->ctx, mine->exchangeDone, GB_STAGE_EXCHANGE_BLOCKS);
  /* A reduction of nothing loads the device's kernels (a GPU compiles them
   * once per process), so that cost is paid here and a device that cannot
   * reduce is found before any member relies on it. */
  gbReduceArgs_t warm = {.dst = dev, .src = {dev}, .nsrc = 1, .count = 0, .dtype = gbFloat32, .op = gbSum};
  if (sh->ctx.dev->reduceAsync(&warm, NULL) != gbSuccess) {
    GB_INFO(GB_LOG_NET, "%s: the device cannot run the bridge's reduction: %s", sh->name, gbErrorLast());
    return 0;
  }
  return 1;
}

/* The sizes of a shared layout, as set-up fills them. */
static void sizeLayout(const gbStageSlotsSpec_t* spec, int n, int exchange, gbSharedSlots_t* sh) {
  sh->n = n;
  sh->nslots = spec->nslots;
  sh->slotBytes = gbSharedRoundPage(spec->slotBytes);
  if (spec->channels) sizeChannels(spec, sh);
  if (exchange) sh->exchangeBytes = gbSharedRoundPage(spec->exchangeBytes);
  sh->bytes = gbSharedLayoutBytes(sh);
}

size_t gbStageSlotsLayoutBytes(const gbStageSlotsSpec_t* spec, int n) {
  gbSharedSlots_t sh;
  memset(&sh, 0, sizeof(sh));
  sizeLayout(spec, n, 1, &sh);
  return sh.bytes;
}

gbResult_t gbStageSlotsSetup(const gbStageCtx_t* ctx, const gbStageSlotsSpec_t* spec, gbStage_t** out) {
  *out = NULL;
  gbAlgoGroup_t* g = spec->group;
  int place = placement(ctx, spec);
  if (place == PLACE_NONE) return gbSuccess;
  const gbDeviceOps* dev = ctx->dev;
  gbSharedSlots_t* sh = calloc(1, sizeof(*sh));
  if (!sh) return gbErrorSet(gbSystemError, "%s: out of memory for shared staging slots", g->name);
  sh->ctx = *ctx;
  sh->remote = place == PLACE_REMOTE;
  sh->n = g->n;
  sh->me = g->me;
  sh->ranks = g->ranks;
  sh->name = g->name;
  sh->net = g->net;
  gbStageSlotsSpec_t sized = *spec;
  sized.channels = spec->channels && !sh->remote;
  sizeLayout(&sized, g->n, !sh->remote && dev->exchangeAsync, sh);
  /* What this member lacks (memory) it says with ok = 0 below, so every
   * member falls back together instead of the others waiting for it. */
  size_t nflags = gbSharedFlagCount(sh);
  int local = dev->hostAlloc((void**)&sh->flags, nflags * sizeof(gbFlag_t)) == gbSuccess;
  if (local) gbStageFlagsInit(ctx, sh->flags, nflags);
  if (local) local = dev->streamCreate(&sh->copyStream) == gbSuccess;
  /* A GPU reduces from device memory: a copy engine brings each other
   * member's part over (measured faster than a kernel reading mapped host
   * memory, docs/PERFORMANCE.md), into scratch made at the first such
   * part (slots_chunk.c). */
  if (local && !dev->hostMemory) local = dev->streamCreate(&sh->fetchStream) == gbSuccess;
  if (!local) GB_INFO(GB_LOG_NET, "%s: no memory for shared staging slots: %s", g->name, gbErrorLast());
  for (int k = 0; k < sh->n; k++) sh->pid[k] = spec->pids[k];
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
  uint64_t sentBefore = g->bytesSent; /* the set-up is no payload: the traffic counters leave it out */
  gbResult_t res = sh->remote ? gbSuccess : gbAlgoBroadcast(g, &o, sizeof(o), 0);
  int registered = 0;
  int32_t ok = local && res == gbSuccess && (sh->remote || (o.fd >= 0 && o.bytes == sh->bytes)) &&
               attach(sh, &o, made, &registered);
  int32_t all = 0;
  const char* step = "the offer from member 0";
  if (res == gbSuccess) {
    step = "the agreement";
    res = gbAlgoAllReduce(g, &ok, &all, 1, gbInt32, gbMin, 0);
  }
  if (res != gbSuccess) GB_WARN("%s: setting up shared staging slots, %s failed: %s", g->name, step, gbErrorLast());
  if (made) close(o.fd); /* every member mapped it (or never will): the mappings keep it */
  if (made && sh->base != made) munmap(made, sh->bytes); /* the offer failed before member 0 attached it */
  g->bytesSent = sentBefore;
  if (res != gbSuccess || !all) {
    unmap(sh, registered);
    if (res == gbSuccess)
      GB_INFO(GB_LOG_NET, "%s: a member could not set up the shared staging slots (its INFO log says why): chunks cross "
                          "over the host transport",
              g->name);
    return res;
  }
  char channels[96] = "";
  if (sh->p2pDepth > 0)
    snprintf(channels, sizeof(channels), ", and %d of %zu KiB per send/recv channel", sh->p2pDepth, sh->p2pBytes >> 10);
  if (sh->remote)
    GB_INFO(GB_LOG_NET, "%s: %d members on several hosts move %d staging slots of %zu KiB each in registered memory",
            g->name, sh->n, sh->nslots, sh->slotBytes >> 10);
  else
    GB_INFO(GB_LOG_NET, "%s: %d members on this host share %d staging slots of %zu KiB each%s", g->name, sh->n,
            sh->nslots, sh->slotBytes >> 10, channels);
  res = gbSlotsViewCreate(sh, sh->remote ? &gbStageRemoteOps : &gbStageSharedOps, g, out);
  if (res != gbSuccess) {
    unmap(sh, 1);
    return res;
  }
  sh->counted = (int64_t)sh->bytes;
  gbStageMemoryAdd(ctx, sh->remote ? GB_STAGE_MEM_PINNED : GB_STAGE_MEM_SEGMENT, sh->counted);
  gbStageMemoryAdd(ctx, GB_STAGE_MEM_PINNED, (int64_t)(nflags * sizeof(gbFlag_t)));
  return res;
}

gbResult_t gbSlotsViewCreate(gbSharedSlots_t* sh, const gbStageOps_t* ops, gbAlgoGroup_t* g, gbStage_t** out) {
  gbSlotsView_t* v = calloc(1, sizeof(*v));
  if (!v) return gbErrorSet(gbSystemError, "%s: out of memory for its staging", g->name);
  v->base = (gbStage_t){.ops = ops, .ctx = sh->ctx, .group = g};
  v->sh = sh;
  sh->views++;
  *out = &v->base;
  return gbSuccess;
}

void gbSlotsViewDestroy(gbStage_t* st) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  if (--sh->views == 0) unmap(sh, 1);
  free(st);
}

gbResult_t gbStageSlotsShare(gbStage_t* slots, gbAlgoGroup_t* g, gbStage_t** out) {
  *out = NULL;
  const gbSharedSlots_t* sh = slots ? gbSlotsOf(slots) : NULL;
  if (!sh || sh->n != g->n || memcmp(sh->ranks, g->ranks, sizeof(int) * (size_t)g->n) != 0) return gbSuccess;
  return gbSlotsViewCreate(gbSlotsOf(slots), slots->ops, g, out);
}

gbResult_t gbStageExchange(gbStage_t* slots, gbAlgoGroup_t* g, gbStage_t** out) {
  *out = NULL;
  if (!slots || slots->ops != &gbStageSharedOps || gbSlotsOf(slots)->exchangeBytes == 0) return gbSuccess;
  return gbSlotsViewCreate(gbSlotsOf(slots), &gbStageExchangeOps, g, out);
}

gbResult_t gbStageChannels(gbStage_t* slots, gbStage_t** out) {
  *out = NULL;
  if (!slots || gbSlotsOf(slots)->p2pDepth == 0) return gbSuccess;
  return gbSlotsViewCreate(gbSlotsOf(slots), &gbStageChannelOps, slots->group, out);
}

void gbSlotsFail(gbStage_t* st, const gbNetCause_t* cause) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  gbSharedCtl_t* m = gbSharedCtl(sh, sh->me);
  if (atomic_load_explicit(&m->failed, memory_order_relaxed)) return;
  memcpy(&m->cause, cause, sizeof(m->cause));
  atomic_store_explicit(&m->failed, 1, memory_order_release);
  /* And no stream of mine waits for a signal that may not come. */
  if (!sh->remote) gbSharedRelease(sh, gbRemoteError);
}
