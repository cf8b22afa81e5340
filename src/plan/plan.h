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

typedef enum { GB_COLL_ALLREDUCE, GB_COLL_BROADCAST } gbColl_t;

typedef enum {
  GB_ISLAND_NONE,
  GB_ISLAND_ALLREDUCE, /* the whole collective inside the island (native) */
  GB_ISLAND_REDUCE,    /* to the island's leader */
  GB_ISLAND_BCAST      /* from islandRoot (island-local index) */
} gbIslandStep_t;

typedef enum { GB_HOST_NONE, GB_HOST_BRIDGE, GB_HOST_WORLD } gbHostGroup_t;

typedef struct {
  gbColl_t coll;
  gbDataType_t dtype;
  gbRedOp_t op;
  size_t count;
  int root;              /* broadcast: global rank */
  int policy;            /* configured gbPolicy_t (auto allowed) */
  size_t chunkBytes;
  const gbTopo_t* topo;
} gbPlanInput_t;

typedef struct {
  int policy;            /* resolved: hierarchical, native or flat */
  size_t chunkCount;     /* elements per chunk */
  size_t nchunks;
  /* This rank's steps, per chunk, in order: */
  gbIslandStep_t before; /* island step before staging */
  int beforeRoot;        /* island-local root of before (GB_ISLAND_BCAST) */
  int stageOut;          /* copy the chunk to a staging slot, mark it staged */
  gbHostGroup_t host;    /* host step on the proxy, among that group */
  int hostRoot;          /* broadcast: root's index in the host group */
  gbRedOp_t hostOp;      /* all-reduce: op of the host step (avg -> sum) */
  int hostDivisor;       /* avg: divide once by this (world size), else 0 */
  int stageIn;           /* copy the host step's result back */
  gbIslandStep_t after;  /* island step after staging in */
  int afterRoot;
} gbPlan_t;

/* The policy auto resolves to on this topology. */
int gbPlanResolvePolicy(int policy, const gbTopo_t* topo);

gbResult_t gbPlanBuild(const gbPlanInput_t* in, gbPlan_t* out);

#endif
