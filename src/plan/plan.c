#include "plan/plan.h"

#include <string.h>

#include "base/dtype.h"
#include "base/result.h"

int gbPlanResolvePolicy(int policy, const gbTopo_t* topo) {
  if (policy == gbPolicyAuto) return topo->nislands == 1 ? gbPolicyNative : gbPolicyHierarchical;
  return policy;
}

static void planAllReduce(const gbPlanInput_t* in, gbPlan_t* p) {
  const gbTopo_t* t = in->topo;
  int avg = in->op == gbAvg;
  p->hostOp = avg ? gbSum : in->op;
  p->hostDivisor = avg ? t->nranks : 0;
  if (p->policy == gbPolicyNative) {
    p->before = GB_ISLAND_ALLREDUCE;
  } else if (p->policy == gbPolicyFlat) {
    p->stageOut = p->stageIn = 1;
    p->host = GB_HOST_WORLD;
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

gbResult_t gbPlanBuild(const gbPlanInput_t* in, gbPlan_t* p) {
  memset(p, 0, sizeof(*p));
  p->policy = gbPlanResolvePolicy(in->policy, in->topo);
  size_t esize = gbDtypeSize(in->dtype);
  if (p->policy == gbPolicyNative) {
    p->chunkCount = in->count;
    p->nchunks = in->count ? 1 : 0;
  } else {
    p->chunkCount = in->chunkBytes / esize;
    if (p->chunkCount == 0) p->chunkCount = 1;
    p->nchunks = (in->count + p->chunkCount - 1) / p->chunkCount;
  }
  if (in->coll == GB_COLL_ALLREDUCE) planAllReduce(in, p);
  else planBroadcast(in, p);
  return gbSuccess;
}
