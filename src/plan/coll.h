/* The collectives and policies by name (plan/coll.c): gpubridge-perf's
 * names, the thresholds file's, and log lines. */
#ifndef GB_PLAN_COLL_H
#define GB_PLAN_COLL_H

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

#endif
