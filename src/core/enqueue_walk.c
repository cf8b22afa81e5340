/* The prologue and epilogue every chunked collective shares around its
 * walker's front() and back(): see enqueue_walk.h. */
#include "core/enqueue_walk.h"

#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/result.h"
#include "core/trace.h"

/* A count-0 call: a no-op, as in NCCL, unless the call check is on; then it
 * takes part in it (numbered like any call), so a rank that calls count 0
 * where the others call count N is named instead of falling out of step. */
gbResult_t gbCommEnqueueEmpty(gbComm_t c, const gbCommCall_t* call, void* stream) {
  uint64_t checks = c->checksPosted;
  c->seq++;
  gbTraceBegin(c, call->coll, 0, call->dtype, call->op, call->root);
  gbResult_t res = gbCommCheckCall(c, call, stream);
  if (c->checksPosted == checks) {
    c->seq--; /* checks off (or this call failed alone): no number taken */
    gbTraceCancel(c);
    return res;
  }
  return gbCommEnqueueEnd(c, stream, 1, res);
}

/* The call, the agreed settings, and how this rank can stage its host steps. */
static void planInput(gbComm_t c, const gbCommCall_t* call, const gbCommOps_t* ops, gbPlanInput_t* in) {
  memset(in, 0, sizeof(*in));
  in->coll = (gbColl_t)call->coll;
  in->dtype = (gbDataType_t)call->dtype;
  in->op = ops ? (gbRedOp_t)call->op : gbSum;
  in->count = call->count;
  in->root = call->root;
  in->policy = c->settings.policy;
  in->chunkBytes = (size_t)c->settings.chunkBytes;
  in->chunkBySize = c->settings.chunkBySize;
  in->rails = c->nrails;
  in->topo = &c->topo;
  in->thresholds = &c->thresholds;
  in->slotBytes = gbStagePoolSlotBytes(c->pool);
  in->stagingSlots = c->settings.stagingSlots;
  in->hostMemory = c->dev->hostMemory;
  in->slots[GB_HOST_BRIDGE] = gbCommGroupSlots(&c->bridge);
  in->slots[GB_HOST_WORLD] = gbCommGroupSlots(&c->world);
  in->slots[GB_HOST_RAIL] = c->myRail >= 0 ? gbCommGroupSlots(&c->rails[c->myRail]) : GB_STAGE_PRIVATE;
  in->preMulScale = ops && ops->scale;
  in->compression = c->settings.compression;
  in->exchangeBytes[GB_HOST_BRIDGE] = gbCommGroupExchangeBytes(&c->bridge);
  in->exchangeBytes[GB_HOST_WORLD] = gbCommGroupExchangeBytes(&c->world);
  in->exchangeBytes[GB_HOST_RAIL] = c->myRail >= 0 ? gbCommGroupExchangeBytes(&c->rails[c->myRail]) : 0;
}

static gbCommGroup_t* hostGroupOf(gbComm_t c, const gbPlan_t* p) {
  if (p->host == GB_HOST_BRIDGE) return &c->bridge;
  if (p->host == GB_HOST_RAIL) return &c->rails[p->myRail];
  return &c->world;
}

static gbResult_t frontOf(void* w, size_t k) { return ((gbCommWalk_t*)w)->front(w, k); }
static gbResult_t backOf(void* w, size_t k) { return ((gbCommWalk_t*)w)->back(w, k); }

gbResult_t gbCommWalkRun(gbCommWalk_t* w, gbComm_t c, const gbCommCall_t* call, const gbCommOps_t* ops,
                         void* stream) {
  if (call->count == 0) return gbCommEnqueueEmpty(c, call, stream);
  planInput(c, call, ops, &w->in);
  GB_CHECK(gbPlanBuild(&w->in, &w->plan));
  const gbPlan_t* p = &w->plan;
  w->comm = c;
  if (ops) w->ops = *ops;
  w->esize = gbDtypeSize(w->in.dtype);
  w->stream = stream;
  w->hostGroup = hostGroupOf(c, p);
  w->stage = w->hostGroup->stages[p->stage];
  c->seq++;
  gbTraceBegin(c, call->coll, call->count, call->dtype, call->op, call->root);
  gbTraceSetPlan(c, p->policy, (int)p->hostSteps);
  uint64_t checks = c->checksPosted;
  gbResult_t res = gbCommCheckCall(c, call, stream);
  w->queued = c->checksPosted != checks;
  if (res == gbSuccess && ops && p->host == GB_HOST_WORLD) res = gbCommStageScalar(c, ops, stream);
  if (res == gbSuccess) res = gbCommPipeline(p->nchunks, p->depth, frontOf, backOf, w);
  GB_CHECK(gbCommEnqueueEnd(c, stream, w->queued, res));
  GB_TRACE(GB_LOG_COLL, "collective #%llu (%s) enqueued: %zu elements in %zu chunks, policy %s",
           (unsigned long long)c->seq, gbPlanCollName(call->coll), (size_t)call->count, p->nchunks,
           gbPlanPolicyName(p->policy));
  return gbSuccess;
}

gbResult_t gbCommWalkOut(gbCommWalk_t* cw, size_t k, const gbStageWork_t* w, uint32_t step) {
  gbComm_t c = cw->comm;
  gbProxyOp_t tag;
  memset(&tag, 0, sizeof(tag));
  tag.seq = c->seq;
  tag.group = &cw->hostGroup->algo;
  gbTraceTagOp(c, &tag, GB_TRACE_ROLE_HOST, step, (uint32_t)cw->plan.hostSteps);
  gbStageSlot_t* s = &cw->slotOf[k % (size_t)cw->plan.depth];
  memset(s, 0, sizeof(*s));
  gbResult_t res = gbStageOut(cw->stage, w, cw->stream, &tag, s);
  if (s->queued) cw->queued = 1;
  return res;
}

gbResult_t gbCommWalkIn(gbCommWalk_t* cw, size_t k, const gbStageWork_t* w) {
  return gbStageIn(cw->stage, w, cw->stream, &cw->slotOf[k % (size_t)cw->plan.depth]);
}
