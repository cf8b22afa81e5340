/* Policies: (collective, bytes, dtype, topology, agreed settings) -> this
 * rank's schedule. Decided only from facts every rank shares, so all ranks
 * pick the same. A bridged schedule is cut into chunks; per chunk a rank may
 * run an island step, stage the chunk out to host memory, take part in a host
 * step (on the proxy thread), stage it back in, and run a second island step. */
#ifndef GB_PLAN_PLAN_H
#define GB_PLAN_PLAN_H

#include <stddef.h>
#include "boot/topology.h"
#include "gpubridge/gpubridge.h"
#include "plan/thresholds.h"

typedef enum {
  GB_COLL_ALLREDUCE,
  GB_COLL_BROADCAST,
  GB_COLL_REDUCE,
  GB_COLL_ALLGATHER,
  GB_COLL_REDUCESCATTER,
  GB_COLL_ALLTOALL,
  GB_COLL_SENDRECV,
  GB_NUM_COLLS
} gbColl_t;

/* "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
 * "alltoall", "sendrecv" (gpubridge-perf's names); -1 / "?" otherwise. */
int gbPlanCollByName(const char* name);
const char* gbPlanCollName(int coll);
/* A gbPolicy_t's name as GPUBRIDGE_POLICY spells it ("split-rail"); "?" otherwise. */
const char* gbPlanPolicyName(int policy);

typedef enum {
  GB_ISLAND_NONE,
  GB_ISLAND_ALLREDUCE, /* the whole collective inside the island (native) */
  GB_ISLAND_REDUCE,    /* to the island's leader */
  GB_ISLAND_BCAST      /* from islandRoot (island-local index) */
} gbIslandStep_t;

typedef enum { GB_HOST_NONE, GB_HOST_BRIDGE, GB_HOST_WORLD, GB_HOST_RAIL } gbPlanHostGroup_t;

typedef struct {
  gbColl_t coll;
  gbDataType_t dtype;
  gbRedOp_t op;
  size_t count;
  int root;              /* broadcast, reduce: global rank */
  int policy;            /* configured gbPolicy_t (auto and tuned allowed) */
  size_t chunkBytes;
  int rails;             /* GPUBRIDGE_RAILS (0: no cap) */
  const gbTopo_t* topo;
  const gbThresholds_t* thresholds; /* policy tuned */
} gbPlanInput_t;

typedef struct {
  int policy;            /* resolved: hierarchical, native, flat or split-rail */
  size_t chunkCount;     /* elements per chunk */
  size_t nchunks;
  /* This rank's steps, per chunk, in order: */
  gbIslandStep_t before; /* island step before staging */
  int beforeRoot;        /* island-local root of before (GB_ISLAND_BCAST) */
  int stageOut;          /* copy the chunk to a staging slot, mark it staged */
  gbPlanHostGroup_t host;  /* host step on the proxy, among that group */
  int hostRoot;          /* broadcast: root's index in the host group */
  gbRedOp_t hostOp;      /* all-reduce: op of the host step (avg -> sum) */
  int hostDivisor;       /* avg: divide once by this (world size), else 0 */
  int stageIn;           /* copy the host step's result back */
  gbIslandStep_t after;  /* island step after staging in */
  int afterRoot;
  /* split-rail: each chunk is cut into `rails` slices; slice i is reduced to
   * island index i, crosses on rail i, and is broadcast from island index i.
   * myRail is this rank's rail (its island index), or -1 without one. */
  int rails;
  int myRail;
} gbPlan_t;

/* The policy auto resolves to on this topology before message sizes count:
 * native for one island, flat for islands of one rank, else hierarchical. */
int gbPlanResolvePolicy(int policy, const gbTopo_t* topo);

/* The policy one call runs: auto and tuned resolved by size, and policies
 * that do not apply to coll (split-rail beyond all-reduce; hierarchical
 * beyond all-reduce and broadcast) replaced by the one that runs instead. */
int gbPlanCallPolicy(const gbPlanInput_t* in, size_t bytes);

/* The policy a large all-reduce runs (gbTopology_t.policy): gbPlanCallPolicy
 * for an all-reduce of SIZE_MAX bytes, larger than every threshold, so auto
 * and tuned give their choice for large messages (split-rail where islands
 * have k >= 2 rails). railsCap is GPUBRIDGE_RAILS (0: none). */
int gbPlanTopologyPolicy(int policy, const gbTopo_t* topo, int railsCap, const gbThresholds_t* thresholds);

/* split-rail's number of rails on this topology (at least 1). */
int gbPlanRails(const gbTopo_t* topo, int railsCap);

gbResult_t gbPlanBuild(const gbPlanInput_t* in, gbPlan_t* out);

#endif
