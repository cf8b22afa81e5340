/* The block collectives' part of gbPlanBuild (plan/blocks.c). */
#ifndef GB_PLAN_BLOCKS_H
#define GB_PLAN_BLOCKS_H

#include "plan/plan.h"

/* All-gather, reduce-scatter, all-to-all: policy, chunks and steps of p
 * (zeroed by the caller), or the error that a chunk cannot be staged. */
gbResult_t gbPlanBlocks(const gbPlanInput_t* in, gbPlan_t* p);

#endif
