/* Policies: (collective, bytes, dtype, topology, agreed settings) -> this
 * rank's schedule. Decided only from facts every rank shares, so all ranks
 * pick the same. A bridged schedule is cut into chunks; per chunk a rank may
 * run an island step, stage the chunk out to host memory, take part in a host
 * step (on the proxy thread), stage it back in, and run a second island step.
 * The plan also says how the host step is staged (pipeline depth, shared
 * slots, in place on host memory, one step for all chunks), so the walkers
 * in core/ only carry it out; plan/sizes.h holds every size rule. */
#ifndef GB_PLAN_PLAN_H
#define GB_PLAN_PLAN_H

#include <stddef.h>
#include "boot/topology.h"
#include "gpubridge/gpubridge.h"
#include "plan/coll.h"
#include "plan/sizes.h"
#include "plan/thresholds.h"

typedef enum {
  GB_ISLAND_NONE,
  GB_ISLAND_ALLREDUCE, /* the whole collective inside the island (native) */
  GB_ISLAND_REDUCE,    /* to the island's leader */
  GB_ISLAND_BCAST      /* from islandRoot (island-local index) */
} gbIslandStep_t;

typedef enum { GB_HOST_NONE, GB_HOST_BRIDGE, GB_HOST_WORLD, GB_HOST_RAIL, GB_NUM_HOST_GROUPS } gbPlanHostGroup_t;

/* The stage a host step goes through (stage/stage.h): the communicator's
 * private slots and the host collective, or the host group's slots, shared
 * on one host or remote across hosts. */
typedef enum { GB_STAGE_PRIVATE, GB_STAGE_SHARED, GB_STAGE_REMOTE, GB_STAGE_EXCHANGE, GB_NUM_STAGES } gbPlanStage_t;

/* The most chunks in flight: the walkers keep a staging slot for each. */
#define GB_PLAN_MAX_DEPTH 64

typedef struct {
  gbColl_t coll;
  gbDataType_t dtype;
  gbRedOp_t op;
  size_t count;          /* block collectives: of each rank's block */
  int root;              /* broadcast, reduce: global rank (the block collectives: -1) */
  int policy;            /* configured gbPolicy_t (auto and tuned allowed) */
  size_t chunkBytes;
  int chunkBySize;       /* the GPU default: the chunk follows the message's size (plan/sizes.h) */
  int rails;             /* GPUBRIDGE_RAILS (0: no cap) */
  const gbTopo_t* topo;
  const gbThresholds_t* thresholds; /* policy tuned */
  /* How this rank can stage its host steps (from its communicator): */
  size_t slotBytes;      /* a staging slot's size: a block collective's chunk fills one */
  int stagingSlots;      /* GPUBRIDGE_STAGING_SLOTS: chunks in flight */
  int hostMemory;        /* device memory is host memory (the host device) */
  gbPlanStage_t slots[GB_NUM_HOST_GROUPS]; /* that host group's (GB_HOST_RAIL: my rail's) slots: shared, remote,
                                              or none (GB_STAGE_PRIVATE) */
  size_t exchangeBytes[GB_NUM_HOST_GROUPS]; /* the largest all-reduce that host group's exchange takes (0: it has
                                               none) */
  int preMulScale;       /* a PreMulSum op: a world step's proxy scales every contribution */
  int compression;       /* GPUBRIDGE_BRIDGE_COMPRESSION: the gbWire_t (base/wire.h) reductions may cross in */
} gbPlanInput_t;

typedef struct {
  int policy;            /* resolved: hierarchical, native, flat or split-rail */
  size_t count;          /* the call's elements (block collectives: of each rank's block) */
  size_t chunkCount;     /* elements per chunk (block collectives: of each rank's block) */
  size_t nchunks;
  int depth;             /* chunks in flight over the staging slots, 1..GB_PLAN_MAX_DEPTH */
  /* This rank's steps, per chunk, in order: */
  gbIslandStep_t before; /* island step before staging */
  int beforeRoot;        /* island-local root of before (GB_ISLAND_BCAST) */
  int stageOut;          /* copy the chunk to a staging slot, mark it staged */
  gbPlanHostGroup_t host;  /* host step on the proxy, among that group */
  int hostRoot;          /* broadcast, reduce: root's index in the host group */
  int stageIn;           /* copy the host step's result back */
  gbIslandStep_t after;  /* island step after staging in */
  int afterRoot;
  /* split-rail: each chunk is cut into `rails` slices; slice i is reduced to
   * island index i, crosses on rail i, and is broadcast from island index i.
   * myRail is this rank's rail (its island index), or -1 without one. */
  int rails;
  int myRail;
  /* How the host step is staged: */
  gbPlanStage_t stage;   /* the stage the host step goes through */
  int direct;            /* all-reduce on host memory, private stage: the proxy works in recv, no slot copies */
  size_t hostChunk;      /* > 0: the proxy runs the call's chunks as one step, this many elements each */
  size_t hostSteps;      /* host steps this rank posts: chunks with a staged part */
  int wire;              /* the gbWire_t the host step's parts cross in (plan/wire.c; GB_WIRE_PLAIN: as they are) */
} gbPlan_t;

/* The policy auto resolves to on this topology before message sizes count:
 * native for one island, flat for islands of one rank, else hierarchical. */
int gbPlanResolvePolicy(int policy, const gbTopo_t* topo);

/* The policy one call runs: auto and tuned resolved by size, and policies
 * that do not apply to coll (split-rail beyond all-reduce; hierarchical
 * beyond all-reduce and broadcast) replaced by the one that runs instead.
 * An fp8 reduction that gbPlanFp8OffIsland keeps from the islands runs flat. */
int gbPlanCallPolicy(const gbPlanInput_t* in, size_t bytes);

/* Whether reductions of dt stay off the islands' libraries: fp8 on real
 * GPUs (every rank's runKind is the same, so every rank agrees). NCCL
 * reduces fp8 only from 2.24 on sm_90 and RCCL only on MI300, and neither
 * rounds as gpubridge does; gpubridge reduces fp8 itself (the flat policy:
 * its GPU kernel or the host), so the bits are docs/REDUCTION_ORDER.md's on
 * every GPU and library version. Moving fp8 (broadcast, all-gather,
 * all-to-all, send/recv) still goes to the library, as bytes. */
int gbPlanFp8OffIsland(const gbTopo_t* topo, gbDataType_t dt);

/* The policy a large all-reduce runs (gbTopology_t.policy): gbPlanCallPolicy
 * for an all-reduce of SIZE_MAX bytes, larger than every threshold, so auto
 * and tuned give their choice for large messages (split-rail where islands
 * have k >= 2 rails). railsCap is GPUBRIDGE_RAILS (0: none). */
int gbPlanTopologyPolicy(int policy, const gbTopo_t* topo, int railsCap, const gbThresholds_t* thresholds);

/* split-rail's number of rails on this topology (at least 1). */
int gbPlanRails(const gbTopo_t* topo, int railsCap);

/* The whole schedule of one call with count > 0: policy, chunks, steps and
 * their staging. The block collectives' comes from plan/blocks.c; one that
 * cannot be staged (an element per rank larger than a slot) is an error. */
gbResult_t gbPlanBuild(const gbPlanInput_t* in, gbPlan_t* out);

/* The block collectives' part of gbPlanBuild (plan/blocks.c): all-gather,
 * reduce-scatter, all-to-all: policy, chunks and steps of p (zeroed by the
 * caller), or the error that a chunk cannot be staged. */
gbResult_t gbPlanBlocks(const gbPlanInput_t* in, gbPlan_t* p);

/* The wire of the host step's parts (plan/wire.c): compressed where
 * in->compression asks and the call allows, the chunk shrunk until its wire
 * fits a slot. gbPlanBuild calls it once the stage is known (a compressed
 * host step is never direct). */
void gbPlanWire(const gbPlanInput_t* in, gbPlan_t* p);

/* Where chunks lie (plan/chunks.c), in elements: chunk i's length; split-rail's
 * slice r of a chunk of n; the part of chunk i this rank stages (its rail's
 * slice under split-rail, else the whole chunk). */
size_t gbPlanChunkLen(const gbPlan_t* p, size_t i);
void gbPlanRailSlice(const gbPlan_t* p, size_t n, int r, size_t* begin, size_t* len);
void gbPlanStagedPart(const gbPlan_t* p, size_t i, size_t* off, size_t* n);

#endif
