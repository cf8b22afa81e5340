/* PreMulSum ops of a communicator, and how every op maps to the island's
 * op, the op of an island step feeding the bridge, and the host step's op. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"
#include "plan/plan.h"

#define NO_ISLAND_OP ((gbRedOp_t)-1) /* a PreMulSum op no island step uses */

static gbCommRedOp_t* lookup(gbComm_t c, gbRedOp_t op) {
  int k = (int)op - gbNumOps;
  if (k < 0 || k >= GB_COMM_MAX_REDOPS || !c->redops[k].used) return NULL;
  return &c->redops[k];
}

/* A reusable cell of c, or a new one (caller thread). */
static gbResult_t cellTake(gbComm_t c, gbCommCell_t** out) {
  if (!c->cellsFree) c->cellsFree = atomic_exchange_explicit(&c->cellsReleased, NULL, memory_order_acquire);
  gbCommCell_t* k = c->cellsFree;
  if (k) {
    c->cellsFree = k->nextFree;
    *out = k;
    return gbSuccess;
  }
  k = calloc(1, sizeof(*k));
  if (!k) return gbErrorSet(gbSystemError, "gbRedOpCreatePreMulSum: out of memory");
  gbResult_t res = c->dev->hostAlloc(&k->mem, 16);
  if (res != gbSuccess) {
    free(k);
    return res;
  }
  k->comm = c;
  k->next = c->cells;
  c->cells = k;
  *out = k;
  return gbSuccess;
}

static void cellGive(gbComm_t c, gbCommCell_t* k) {
  k->nextFree = c->cellsFree;
  c->cellsFree = k;
}

/* On the proxy, after every step queued before the op's destroy: none of
 * them reads the cell any more (a step that scales waited for its input to
 * be staged, and a device scalar's copy into the cell comes before that on
 * the stream). A failed communicator keeps the cell: its streams may hold
 * work that no step waited for; teardown frees it. */
static gbResult_t cellReleased(void* arg) {
  gbCommCell_t* k = arg;
  gbComm_t c = k->comm;
  if (atomic_load_explicit(&c->abortFlag, memory_order_acquire)) return gbSuccess;
  k->nextFree = atomic_load_explicit(&c->cellsReleased, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&c->cellsReleased, &k->nextFree, k, memory_order_release,
                                                memory_order_relaxed)) {
  }
  return gbSuccess;
}

gbResult_t gbCommRedOpCreate(gbComm_t c, void* scalar, gbDataType_t dt, int residence, gbRedOp_t* op) {
  int k = 0;
  while (k < GB_COMM_MAX_REDOPS && c->redops[k].used) k++;
  if (k == GB_COMM_MAX_REDOPS)
    return gbErrorSet(gbInvalidUsage, "gbRedOpCreatePreMulSum: this communicator already holds %d ops; destroy "
                                      "unused ones with gbRedOpDestroy", GB_COMM_MAX_REDOPS);
  gbCommRedOp_t* r = &c->redops[k];
  gbCommCell_t* cell = NULL;
  GB_CHECK(cellTake(c, &cell));
  /* fp8 reductions kept off the islands (plan.h) run flat: no island op. */
  gbRedOp_t islandOp = NO_ISLAND_OP;
  gbResult_t res = gbSuccess;
  if (!gbPlanFp8OffIsland(&c->topo, dt))
    res = c->islandComm->ops->preMulSumCreate(c->islandComm, scalar, dt, (gbScalarResidence_t)residence, &islandOp);
  if (res != gbSuccess) {
    cellGive(c, cell); /* nothing was queued with it */
    return res;
  }
  memset(r, 0, sizeof(*r));
  r->dtype = dt;
  r->residence = residence;
  r->scalar = scalar;
  r->cell = cell;
  r->hostCell = cell->mem;
  r->islandOp = islandOp;
  if (residence == gbScalarHostImmediate) memcpy(r->hostCell, scalar, gbDtypeSize(dt));
  r->used = 1;
  *op = (gbRedOp_t)(gbNumOps + k);
  return gbSuccess;
}

gbResult_t gbCommRedOpDestroy(gbComm_t c, gbRedOp_t op) {
  gbCommRedOp_t* r = lookup(c, op);
  if (!r) return gbErrorSet(gbInvalidArgument, "gbRedOpDestroy: op %d is not a PreMulSum op of this communicator",
                            (int)op);
  gbResult_t res = r->islandOp == NO_ISLAND_OP ? gbSuccess : c->islandComm->ops->redOpDestroy(c->islandComm, r->islandOp);
  /* An op no call was given leaves nothing queued: its cell is free now.
   * Otherwise queued work may still read it, so the proxy hands it back
   * once it has passed every step queued so far; if that cannot be queued,
   * the cell stays out of use until teardown. */
  if (!r->resolved) {
    cellGive(c, r->cell);
  } else {
    gbProxyOp_t step;
    memset(&step, 0, sizeof(step));
    step.fn = cellReleased;
    step.arg = r->cell;
    step.seq = c->seq;
    (void)gbProxyPost(c->proxy, &step);
  }
  memset(r, 0, sizeof(*r));
  return res;
}

/* op as dt's op of this communicator: a built-in one (r NULL), or a live
 * PreMulSum op made for dt (*r). */
static gbResult_t find(gbComm_t c, gbRedOp_t op, gbDataType_t dt, gbCommRedOp_t** r) {
  *r = NULL;
  if ((int)op >= 0 && op < gbNumOps) return gbSuccess;
  *r = lookup(c, op);
  if (!*r) return gbErrorSet(gbInvalidArgument, "op %d is not sum, prod, max, min, avg or a live PreMulSum op of this "
                                                "communicator", (int)op);
  if ((*r)->dtype != dt)
    return gbErrorSet(gbInvalidArgument, "PreMulSum op %d was made for %s, not %s: make one op per datatype",
                      (int)op, gbDtypeName((*r)->dtype), gbDtypeName(dt));
  return gbSuccess;
}

gbResult_t gbCommCheckOp(gbComm_t c, gbRedOp_t op, gbDataType_t dt) {
  gbCommRedOp_t* r;
  return find(c, op, dt, &r);
}

gbResult_t gbCommResolveOp(gbComm_t c, gbRedOp_t op, gbDataType_t dt, gbCommOps_t* o) {
  memset(o, 0, sizeof(*o));
  gbCommRedOp_t* r;
  GB_CHECK(find(c, op, dt, &r));
  if (!r) {
    o->island = op;
    o->partial = o->host = op == gbAvg ? gbSum : op;
    o->divisor = op == gbAvg ? c->nranks : 0;
    return gbSuccess;
  }
  r->resolved = 1;
  o->island = o->partial = r->islandOp;
  o->host = gbSum;
  o->scale = r->hostCell;
  o->premul = r;
  return gbSuccess;
}

gbResult_t gbCommStageScalar(gbComm_t c, const gbCommOps_t* o, void* stream) {
  if (!o->premul || o->premul->residence != gbScalarDevice) return gbSuccess;
  return c->dev->copyAsync(o->premul->hostCell, o->premul->scalar, gbDtypeSize(o->premul->dtype), stream);
}
