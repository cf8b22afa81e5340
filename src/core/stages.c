/* The communicator's stages (stage/stage.h): per host group its private
 * stage and, where its members allow, shared or remote slots; the send/recv
 * stages; their failure and teardown. Every rank sets its groups up in the
 * same order (world, bridge, my rail), so the collective set-ups never wait
 * on each other. */
#include <stdlib.h>

#include "base/result.h"
#include "boot/validate.h"
#include "core/comm.h"
#include "core/settings.h"
#include "plan/sizes.h"

/* Whether members' streams may run exchanges (GPUBRIDGE_EXCHANGE,
 * stage/exchange.c): off never, on always, auto unless two ranks of one
 * host share a GPU without MPS, where a spinning kernel keeps its time slice
 * and a hand-over costs milliseconds. Every rank decides from the same
 * probes. */
static int exchangeAllowed(gbComm_t c, const gbProbe_t* probes) {
  if (c->settings.exchange != 1) return c->settings.exchange == 2;
  for (int a = 0; a < c->nranks; a++)
    for (int b = a + 1; b < c->nranks; b++)
      if (gbBootSameGpu(&probes[a], &probes[b]) && !(probes[a].gpuMps && probes[b].gpuMps)) return 0;
  return 1;
}

/* The sizes of a host group's slots (the world's also hold the channels). */
static gbStageSlotsSpec_t specOf(const gbSettings_t* s, int world, int exchange) {
  return (gbStageSlotsSpec_t){.nslots = gbPlanSharedSlots(s->stagingSlots), .slotBytes = (size_t)s->chunkBytes,
                              .channels = world, .channelBudget = GB_PLAN_CHANNEL_BUDGET_BYTES,
                              .enabled = s->bridgeSlots != 0, .exchangeBytes = exchange ? GB_PLAN_EXCHANGE_BYTES : 0};
}

gbResult_t gbCommMemoryEstimate(int ranks, int gpu, gbCommMemory_t* out) {
  if (ranks < 2 || ranks > GB_REDUCE_MAX_SRCS || !out)
    return gbErrorSet(gbInvalidArgument, "memory estimate for %d ranks on a host (2 to %d)", ranks, GB_REDUCE_MAX_SRCS);
  gbSettings_t s;
  int blocking;
  gbThresholds_t thresholds;
  char problems[512];
  gbCommSettingsResolve(NULL, gpu, &s, &blocking, &thresholds, problems, sizeof(problems));
  if (problems[0]) return gbErrorSet(gbInvalidUsage, "memory estimate: %s", problems);
  *out = (gbCommMemory_t){.size = sizeof(*out), .version = 1,
                          .pinnedBytes = (uint64_t)s.stagingSlots * (uint64_t)s.chunkBytes};
  if (s.bridgeSlots == 0) return gbSuccess;
  /* The world's segment, and one of two members (the bridge, or my rail)
   * unless the world has just two. Each may make device scratch of its
   * slots' size on a GPU (slots_impl.h); a private stage takes its slots. */
  int exchange = s.exchange != 0;
  gbStageSlotsSpec_t world = specOf(&s, 1, exchange), pair = specOf(&s, 0, exchange);
  out->segmentBytes = gbStageSlotsLayoutBytes(&world, ranks) + (ranks > 2 ? gbStageSlotsLayoutBytes(&pair, 2) : 0);
  if (gpu) out->deviceBytes = (uint64_t)world.nslots * world.slotBytes * ((uint64_t)ranks + (ranks > 2 ? 2 : 0));
  return gbSuccess;
}

/* g's slots: the ones of `same` when it has g's members in g's order (two
 * islands: world, bridge and rail 0 share one segment), else set up over g. */
static gbResult_t slotsSetup(gbComm_t c, gbCommGroup_t* g, const gbProbe_t* probes, const gbCommGroup_t* same) {
  gbStage_t* slots = NULL;
  gbPlanStage_t kind = same ? gbCommGroupSlots(same) : GB_STAGE_PRIVATE;
  if (kind != GB_STAGE_PRIVATE) GB_CHECK(gbStageSlotsShare(same->stages[kind], &g->algo, &slots));
  if (!slots) {
    int n = g->algo.n;
    int* pids = calloc((size_t)n, sizeof(int));
    uint64_t* hosts = calloc((size_t)n, sizeof(uint64_t));
    if (!pids || !hosts) {
      free(pids);
      free(hosts);
      return gbErrorSet(gbSystemError, "%s: out of memory for its staging", g->name);
    }
    for (int k = 0; k < n; k++) {
      pids[k] = probes[g->ranks[k]].pid;
      hosts[k] = probes[g->ranks[k]].hostId;
    }
    gbStageSlotsSpec_t spec = specOf(&c->settings, g == &c->world, exchangeAllowed(c, probes));
    spec.group = &g->algo;
    spec.pids = pids;
    spec.hostIds = hosts;
    gbResult_t res = gbStageSlotsSetup(&c->stageCtx, &spec, &slots);
    free(pids);
    free(hosts);
    GB_CHECK(res);
  }
  if (!slots) return gbSuccess;
  g->stages[slots->ops->kind] = slots;
  return gbStageExchange(slots, &g->algo, &g->stages[GB_STAGE_EXCHANGE]);
}

static gbResult_t groupStages(gbComm_t c, gbCommGroup_t* g, const gbProbe_t* probes, const gbCommGroup_t* same) {
  if (!g->active) return gbSuccess;
  GB_CHECK(gbStagePrivateCreate(&c->stageCtx, c->pool, &g->algo, &g->stages[GB_STAGE_PRIVATE]));
  return slotsSetup(c, g, probes, same);
}

gbResult_t gbCommStagesSetup(gbComm_t c, const gbProbe_t* probes) {
  GB_CHECK(gbStagePoolCreate(&c->stageCtx, c->settings.stagingSlots, (size_t)c->settings.chunkBytes, &c->pool));
  GB_CHECK(groupStages(c, &c->world, probes, NULL));
  GB_CHECK(groupStages(c, &c->bridge, probes, &c->world));
  if (c->myRail >= 0)
    GB_CHECK(groupStages(c, &c->rails[c->myRail], probes, c->topo.isLeader ? &c->bridge : &c->world));
  GB_CHECK(gbStageBulkCreate(&c->stageCtx, &c->world.algo, &c->p2p[0]));
  return gbStageChannels(c->world.stages[GB_STAGE_SHARED], &c->p2p[1]);
}

static void failGroup(gbCommGroup_t* g, const gbNetCause_t* cause) {
  for (int k = 0; k < GB_NUM_STAGES; k++) gbStageFail(g->stages[k], cause);
}

void gbCommStagesFail(gbComm_t c) {
  failGroup(&c->world, &c->cause);
  failGroup(&c->bridge, &c->cause);
  if (c->rails && c->myRail >= 0) failGroup(&c->rails[c->myRail], &c->cause);
}

static void freeGroup(gbCommGroup_t* g) {
  for (int k = 0; k < GB_NUM_STAGES; k++) {
    gbStageDestroy(g->stages[k]);
    g->stages[k] = NULL;
  }
}

void gbCommStagesFree(gbComm_t c) {
  for (int i = 0; i < 2; i++) {
    gbStageDestroy(c->p2p[i]);
    c->p2p[i] = NULL;
  }
  for (int i = 0; i < c->nrails; i++) freeGroup(&c->rails[i]);
  freeGroup(&c->bridge);
  freeGroup(&c->world);
  gbStagePoolDestroy(c->pool);
  c->pool = NULL;
}
