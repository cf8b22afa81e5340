/* Which wire a bridged reduction's parts cross in (GPUBRIDGE_BRIDGE_COMPRESSION,
 * base/wire.h), and the chunk that lets them fit a staging slot. Compressed:
 * all-reduce and reduce-scatter, sum or avg, of a type the wire narrows, with
 * a host step through private, shared or remote slots. Left plain: every
 * other collective and op (PreMulSum included: its scale is the proxy's or
 * the island's), types the wire does not narrow, and small all-reduces that
 * the exchange takes (latency, not bytes). The islands keep full precision. */
#include "plan/plan.h"

#include "base/dtype.h"
#include "base/wire.h"

_Static_assert((int)gbCompressionOff == (int)GB_WIRE_PLAIN && (int)gbCompressionBf16 == (int)GB_WIRE_BF16 &&
                   (int)gbCompressionFp8 == (int)GB_WIRE_FP8 && (int)gbNumCompressions == (int)GB_NUM_WIRES,
               "a gbCompression_t is the gbWire_t its parts cross in");

/* The host group's members: the bridge has one per island (split-rail's
 * rails too), the world every rank. */
static size_t hostMembers(const gbPlanInput_t* in, const gbPlan_t* p) {
  return p->policy == gbPolicyFlat ? (size_t)in->topo->nranks : (size_t)in->topo->nislands;
}

/* Whether every rank of the call knows that its host step takes shared or
 * remote slots: under flat every rank is a member of the world's host group,
 * whose slots its members set up together. Elsewhere an island member has no
 * host step and must size the chunk as the private stage needs. */
static int slotsForAll(const gbPlanInput_t* in, const gbPlan_t* p) {
  return p->policy == gbPolicyFlat &&
         (in->slots[GB_HOST_WORLD] == GB_STAGE_SHARED || in->slots[GB_HOST_WORLD] == GB_STAGE_REMOTE);
}

/* What a slot must hold for a chunk of `count` elements (each rank's block
 * for reduce-scatter) in wire w. Shared or remote: my part, or my block for
 * each member. Private: every member's part (all-reduce: the all-gather of
 * the parts), or my blocks out and the members' blocks in (reduce-scatter:
 * an all-to-all of the blocks). */
static size_t slotNeeds(const gbPlanInput_t* in, const gbPlan_t* p, int w, size_t count) {
  size_t n = hostMembers(in, p), part = gbWireBytes(w, in->dtype, count);
  int rs = in->coll == GB_COLL_REDUCESCATTER;
  if (slotsForAll(in, p)) return rs ? n * part : part;
  return rs ? 2 * n * part : n * part;
}

/* Whether the call's host steps cross compressed, from facts every rank of
 * the call shares (its chunks are the islands' too). */
static int compressible(const gbPlanInput_t* in, const gbPlan_t* p) {
  if (in->compression == GB_WIRE_PLAIN || !gbWireNarrows(in->compression, in->dtype)) return 0;
  if (in->coll != GB_COLL_ALLREDUCE && in->coll != GB_COLL_REDUCESCATTER) return 0;
  if (in->op != gbSum && in->op != gbAvg) return 0;
  if (p->policy == gbPolicyNative || hostMembers(in, p) > GB_PLAN_FOLD_MAX_PARTS) return 0;
  return 1;
}

void gbPlanWire(const gbPlanInput_t* in, gbPlan_t* p) {
  p->wire = GB_WIRE_PLAIN;
  if (!compressible(in, p) || p->chunkCount == 0) return;
  /* An all-reduce's chunk grows by the wire's ratio: as many bytes cross per
   * chunk as uncompressed, in fewer chunks (fewer hand-overs and kernels).
   * Then every rank shrinks it alike (each step by the overshoot's share)
   * until the wire fits a slot of the stage every rank knows it takes (the
   * private stage's needs where island members cannot know). */
  size_t count = p->chunkCount;
  if (in->coll == GB_COLL_ALLREDUCE) {
    double ratio = (double)(count * gbDtypeSize(in->dtype)) / (double)gbWireBytes(in->compression, in->dtype, count);
    size_t grown = (size_t)((double)count * ratio);
    count = grown > p->count ? p->count : grown > count ? grown : count;
  }
  while (count > 0 && slotNeeds(in, p, in->compression, count) > in->slotBytes) {
    size_t need = slotNeeds(in, p, in->compression, count);
    size_t next = (size_t)((double)count * (double)in->slotBytes / (double)need);
    count = next < count ? next : count - 1;
  }
  if (count == 0) return;
  if (count != p->chunkCount) {
    p->chunkCount = count;
    p->nchunks = (p->count + count - 1) / count;
  }
  /* Small all-reduces the exchange takes cross as they are. */
  if (p->host != GB_HOST_NONE && p->stage != GB_STAGE_EXCHANGE) p->wire = in->compression;
}
