#include "plan/plan.h"

#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "base/wire.h"
#include "plan/sizes.h"

/* auto's rules, from gpubridge-perf --tune runs of every policy on every
 * layout (docs/PERFORMANCE.md, "How auto chooses"):
 * - one island: the vendor library alone (native);
 * - every island one rank: flat; it sends what hierarchical sends over the
 *   same ring and skips the island steps of one rank (5-15% faster from
 *   512 KiB on nvidia:1,amd:1,intel:1);
 * - all-reduce with k >= 2 rails (every island at least k ranks): split-rail
 *   from AUTO_SPLIT_RAIL_BYTES_K2 at k = 2 and AUTO_SPLIT_RAIL_BYTES_K3 at
 *   k >= 3, where it overtook hierarchical (1.3-1.55x at 2-32 MiB on
 *   nvidia:2,amd:2; only at 32 MiB on nvidia:3,amd:3, whose six ranks share
 *   the two cores they were measured on);
 * - otherwise hierarchical: below those sizes it beat flat by 1.2-2x.
 * A measured thresholds file (policy tuned) overrides them per machine. */
#define AUTO_SPLIT_RAIL_BYTES_K2 ((size_t)2 << 20)
#define AUTO_SPLIT_RAIL_BYTES_K3 ((size_t)32 << 20)

int gbPlanResolvePolicy(int policy, const gbTopo_t* topo) {
  if (policy != gbPolicyAuto && policy != gbPolicyTuned) return policy;
  if (topo->nislands == 1) return gbPolicyNative;
  return topo->nranks == topo->nislands ? gbPolicyFlat : gbPolicyHierarchical;
}

static int autoPolicy(const gbPlanInput_t* in, size_t bytes) {
  int policy = gbPlanResolvePolicy(gbPolicyAuto, in->topo);
  if (policy != gbPolicyHierarchical || in->coll != GB_COLL_ALLREDUCE) return policy;
  int k = gbPlanRails(in->topo, in->rails);
  size_t from = k == 2 ? AUTO_SPLIT_RAIL_BYTES_K2 : AUTO_SPLIT_RAIL_BYTES_K3;
  return k >= 2 && bytes >= from ? gbPolicySplitRail : gbPolicyHierarchical;
}

int gbPlanRails(const gbTopo_t* t, int cap) {
  int k = t->islandSize[0];
  for (int i = 1; i < t->nislands; i++)
    if (t->islandSize[i] < k) k = t->islandSize[i];
  if (cap > 0 && k > cap) k = cap;
  return k < 1 ? 1 : k;
}

int gbPlanFp8OffIsland(const gbTopo_t* topo, gbDataType_t dt) {
  return gbDtypeIsFp8(dt) && topo->runKind == gbRunReal;
}

static int reduces(gbColl_t coll) {
  return coll == GB_COLL_ALLREDUCE || coll == GB_COLL_REDUCE || coll == GB_COLL_REDUCESCATTER;
}

int gbPlanCallPolicy(const gbPlanInput_t* in, size_t bytes) {
  if (reduces(in->coll) && gbPlanFp8OffIsland(in->topo, in->dtype)) return gbPolicyFlat;
  int policy = in->policy;
  if (policy == gbPolicyTuned && in->thresholds) {
    int tuned = gbPlanThresholdsLookup(in->thresholds, in->coll, bytes);
    policy = tuned >= 0 ? tuned : gbPolicyAuto;
  }
  if (policy == gbPolicyAuto || policy == gbPolicyTuned) policy = autoPolicy(in, bytes);
  if (policy == gbPolicyNative && in->topo->nislands > 1) policy = gbPolicyHierarchical; /* a stale rule */
  if (policy == gbPolicySplitRail && in->coll != GB_COLL_ALLREDUCE) policy = gbPolicyHierarchical;
  if (policy == gbPolicyHierarchical && in->coll != GB_COLL_ALLREDUCE && in->coll != GB_COLL_BROADCAST)
    policy = gbPolicyFlat;
  return policy;
}

int gbPlanTopologyPolicy(int policy, const gbTopo_t* topo, int railsCap, const gbThresholds_t* thresholds) {
  gbPlanInput_t in;
  memset(&in, 0, sizeof(in));
  in.coll = GB_COLL_ALLREDUCE;
  in.dtype = gbFloat32;
  in.op = gbSum;
  in.policy = policy;
  in.rails = railsCap;
  in.topo = topo;
  in.thresholds = thresholds;
  return gbPlanCallPolicy(&in, SIZE_MAX);
}

static void planAllReduce(const gbPlanInput_t* in, gbPlan_t* p) {
  const gbTopo_t* t = in->topo;
  if (p->policy == gbPolicyNative) {
    p->before = GB_ISLAND_ALLREDUCE;
  } else if (p->policy == gbPolicyFlat) {
    p->stageOut = p->stageIn = 1;
    p->host = GB_HOST_WORLD;
  } else if (p->policy == gbPolicySplitRail) {
    p->rails = gbPlanRails(t, in->rails);
    p->myRail = t->islandIndex < p->rails ? t->islandIndex : -1;
    p->before = GB_ISLAND_REDUCE;
    p->after = GB_ISLAND_BCAST;
    if (p->myRail >= 0) {
      p->stageOut = p->stageIn = 1;
      p->host = GB_HOST_RAIL;
    }
  } else { /* hierarchical */
    p->before = GB_ISLAND_REDUCE;
    p->after = GB_ISLAND_BCAST;
    p->afterRoot = 0; /* the leader is island index 0 */
    if (t->isLeader) {
      p->stageOut = p->stageIn = 1;
      p->host = GB_HOST_BRIDGE;
    }
  }
}

static void planBroadcast(const gbPlanInput_t* in, gbPlan_t* p) {
  const gbTopo_t* t = in->topo;
  int rootIsland = t->islandOfRank[in->root];
  int mine = t->island == rootIsland;
  if (p->policy == gbPolicyNative) {
    p->before = GB_ISLAND_BCAST;
    p->beforeRoot = t->indexInIsland[in->root];
  } else if (p->policy == gbPolicyFlat) {
    p->host = GB_HOST_WORLD;
    p->hostRoot = in->root;
    p->stageOut = t->rank == in->root;
    p->stageIn = 1; /* the root too: its recv gets the slot, which holds its send */
  } else { /* hierarchical: root's island first, then the bridge, then the others */
    if (mine) {
      p->before = GB_ISLAND_BCAST;
      p->beforeRoot = t->indexInIsland[in->root];
    } else {
      p->after = GB_ISLAND_BCAST;
      p->afterRoot = 0;
    }
    if (t->isLeader) {
      p->host = GB_HOST_BRIDGE;
      p->hostRoot = rootIsland; /* bridge members are islands in order */
      p->stageOut = mine;
      p->stageIn = !mine;
    }
  }
}

/* Reduce: native in one island; otherwise as flat (docs/REDUCTION_ORDER.md). */
static void planReduce(const gbPlanInput_t* in, gbPlan_t* p) {
  const gbTopo_t* t = in->topo;
  if (p->policy == gbPolicyNative) {
    p->before = GB_ISLAND_REDUCE;
    p->beforeRoot = t->indexInIsland[in->root];
  } else {
    p->host = GB_HOST_WORLD;
    p->hostRoot = in->root;
    p->stageOut = 1;
    p->stageIn = t->rank == in->root;
  }
}

/* All-reduce, broadcast and reduce: native runs the call whole in the
 * island; the others cut it into chunks of chunkBytes (by the message's
 * size under the GPU default). */
static void chunkByBytes(const gbPlanInput_t* in, gbPlan_t* p) {
  size_t esize = gbDtypeSize(in->dtype);
  p->policy = gbPlanCallPolicy(in, in->count * esize);
  if (p->policy == gbPolicyNative) {
    p->chunkCount = in->count;
    p->nchunks = in->count ? 1 : 0;
  } else {
    p->chunkCount = gbPlanChunkForMessage(in->chunkBytes, in->chunkBySize, in->count * esize) / esize;
    if (p->chunkCount == 0) p->chunkCount = 1;
    p->nchunks = (in->count + p->chunkCount - 1) / p->chunkCount;
  }
}

/* A host group with slots takes them, unless its proxy must scale a
 * PreMulSum contribution first (world steps): that needs the private stage.
 * An all-reduce its exchange takes whole goes there (plan/sizes.h), chunk
 * by chunk: the chunks decide the fold's order (docs/REDUCTION_ORDER.md). */
static gbPlanStage_t stageOf(const gbPlanInput_t* in, const gbPlan_t* p) {
  if (p->host == GB_HOST_NONE) return GB_STAGE_PRIVATE;
  if (p->host == GB_HOST_WORLD && in->preMulScale) return GB_STAGE_PRIVATE;
  if (in->coll == GB_COLL_ALLREDUCE && in->slots[p->host] == GB_STAGE_SHARED &&
      gbPlanTakesExchange(in->count * gbDtypeSize(in->dtype), in->exchangeBytes[p->host]))
    return GB_STAGE_EXCHANGE;
  return in->slots[p->host];
}

/* How the host step is staged: pipeline depth, shared slots, direct, one
 * proxy step for all chunks; then the host steps this rank posts. */
static void planStaging(const gbPlanInput_t* in, gbPlan_t* p) {
  p->depth = in->stagingSlots < GB_PLAN_MAX_DEPTH ? in->stagingSlots : GB_PLAN_MAX_DEPTH;
  p->stage = stageOf(in, p);
  gbPlanWire(in, p);
  /* Host memory needs no staging for all-reduce: recv is where the result
   * goes and what every later step reads (the slot still orders the steps).
   * Broadcast and reduce keep the slot: a non-root's recv may be unused. */
  p->direct = in->hostMemory && in->coll == GB_COLL_ALLREDUCE && p->host != GB_HOST_NONE &&
              p->stage == GB_STAGE_PRIVATE && p->wire == GB_WIRE_PLAIN;
  /* With no island step between them, the chunks of a direct all-reduce go
   * to the proxy as one step that runs them back to back: the same host
   * all-reduces in the same order, without a hand-over between threads per
   * chunk, all within the collective's one deadline (the stream's wait for
   * the step is bounded by the same timeout). */
  if (p->direct && p->before == GB_ISLAND_NONE && p->after == GB_ISLAND_NONE && p->rails == 0 && p->nchunks > 1) {
    p->hostChunk = p->chunkCount;
    p->chunkCount = p->count;
    p->nchunks = 1;
  }
  if (p->host == GB_HOST_NONE) return;
  for (size_t i = 0; i < p->nchunks; i++) {
    size_t off, n;
    gbPlanStagedPart(p, i, &off, &n);
    p->hostSteps += n > 0;
  }
}

gbResult_t gbPlanBuild(const gbPlanInput_t* in, gbPlan_t* p) {
  memset(p, 0, sizeof(*p));
  p->count = in->count;
  p->myRail = -1;
  switch (in->coll) {
    case GB_COLL_ALLREDUCE: chunkByBytes(in, p); planAllReduce(in, p); break;
    case GB_COLL_BROADCAST: chunkByBytes(in, p); planBroadcast(in, p); break;
    case GB_COLL_REDUCE: chunkByBytes(in, p); planReduce(in, p); break;
    case GB_COLL_ALLGATHER:
    case GB_COLL_REDUCESCATTER:
    case GB_COLL_ALLTOALL: GB_CHECK(gbPlanBlocks(in, p)); break;
    default: return gbErrorSet(gbInternalError, "plan: %s has no chunked plan", gbPlanCollName(in->coll));
  }
  planStaging(in, p);
  return gbSuccess;
}
