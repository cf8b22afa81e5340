/* The collectives and policies by name (coll.h). */
#include "plan/coll.h"

#include <string.h>

#include "base/param.h"
#include "gpubridge/gpubridge.h"

static const char* const collNames[GB_NUM_COLLS] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                                    "reduce_scatter", "alltoall", "sendrecv"};

int gbPlanCollByName(const char* name) {
  for (int k = 0; k < GB_NUM_COLLS; k++)
    if (strcmp(name, collNames[k]) == 0) return k;
  return -1;
}

const char* gbPlanCollName(int coll) { return coll >= 0 && coll < GB_NUM_COLLS ? collNames[coll] : "?"; }

const char* gbPlanPolicyName(int policy) {
  /* The parameter table's choices follow gbPolicy_t. */
  const char* const* names = gbParamDesc(GB_PARAM_POLICY)->choices;
  return policy >= 0 && policy < gbNumPolicies ? names[policy] : "?";
}
