/* What every walker of a chunked plan shares (enqueue.c: all-reduce,
 * broadcast, reduce; enqueue_blocks.c: all-gather, reduce-scatter,
 * all-to-all). A walker embeds gbCommWalk_t first, sets front and back, and
 * calls gbCommWalkRun; it carries out plan/'s schedule chunk by chunk and
 * decides none of it: the stage carries each chunk's host step. */
#ifndef GB_CORE_ENQUEUE_WALK_H
#define GB_CORE_ENQUEUE_WALK_H

#include "core/comm.h"
#include "plan/plan.h"

typedef struct gbCommWalk gbCommWalk_t;
struct gbCommWalk {
  /* Set by the walker: chunk k's way out to its host step, and its way back
   * (back(k) after front(k + depth - 1), as gbCommPipeline runs them). */
  gbResult_t (*front)(gbCommWalk_t* w, size_t k);
  gbResult_t (*back)(gbCommWalk_t* w, size_t k);
  /* Set by gbCommWalkRun before the first front: */
  gbComm_t comm;
  gbPlanInput_t in;
  gbPlan_t plan;
  gbCommOps_t ops;           /* zeroed for a collective without a reduction op */
  size_t esize;
  void* stream;
  gbCommGroup_t* hostGroup;  /* the plan's host group (the world without a host step) */
  gbStage_t* stage;          /* the stage the plan's host step goes through (plan.stage of the host group) */
  int queued;                /* something reached the stream or the proxy: front and back set it too */
  gbStageSlot_t slotOf[GB_PLAN_MAX_DEPTH]; /* chunk k's slot: slotOf[k % plan.depth] */
};

/* One collective, call (op -1 without one; root -1 where it has none) with
 * ops (NULL without): count 0 goes to gbCommEnqueueEmpty; otherwise the
 * plan, the call's number and flight-recorder record, the call check, the
 * PreMulSum scalar for a world step, the chunks through w's front and back,
 * and gbCommEnqueueEnd. */
gbResult_t gbCommWalkRun(gbCommWalk_t* w, gbComm_t comm, const gbCommCall_t* call, const gbCommOps_t* ops,
                         void* stream);
/* Chunk k's way out through the walk's stage (work w), tagged as host step
 * `step` of the call for the flight recorder; and its way back in. */
gbResult_t gbCommWalkOut(gbCommWalk_t* cw, size_t k, const gbStageWork_t* w, uint32_t step);
gbResult_t gbCommWalkIn(gbCommWalk_t* cw, size_t k, const gbStageWork_t* w);

#endif
