/* The block collectives' schedule: all-gather, reduce-scatter and
 * all-to-all. Under native (one island) they are the island's own call, run
 * whole as one chunk with no host step. Otherwise they run flat, the only
 * other policy gbPlanCallPolicy gives them (docs/REDUCTION_ORDER.md): chunk
 * k holds elements [k*m, k*m+len) of every rank's block, laid out
 * [rank][len] in one staging slot, and crosses in one host step over all
 * ranks. gbPlanBuild adds the staging. */
#include "plan/plan.h"

#include "base/dtype.h"
#include "base/result.h"

gbResult_t gbPlanBlocks(const gbPlanInput_t* in, gbPlan_t* p) {
  size_t esize = gbDtypeSize(in->dtype);
  size_t nranks = (size_t)in->topo->nranks;
  p->policy = gbPlanCallPolicy(in, in->count * esize * nranks);
  if (p->policy == gbPolicyNative) {
    p->chunkCount = in->count;
    p->nchunks = in->count ? 1 : 0;
    return gbSuccess;
  }
  /* A slot holds m elements of every rank's block; all-to-all's holds them
   * twice, what goes out and what comes in. */
  size_t factor = in->coll == GB_COLL_ALLTOALL ? 2 : 1;
  size_t m = in->slotBytes / (esize * nranks * factor);
  if (m == 0)
    return gbErrorSet(gbInvalidUsage, "%s: one element per rank (%d ranks, %zu bytes) does not fit a %zu-byte "
                      "staging slot; raise GPUBRIDGE_CHUNK_BYTES", gbPlanCollName(in->coll), in->topo->nranks, esize,
                      in->slotBytes);
  p->chunkCount = m;
  p->nchunks = (in->count + m - 1) / m;
  p->stageOut = p->stageIn = 1;
  p->host = GB_HOST_WORLD;
  return gbSuccess;
}
