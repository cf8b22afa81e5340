/* PreMulSum ops of a communicator, and how every op maps to the island's
 * op, the op of an island step feeding the bridge, and the host step's op. */
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "core/comm.h"

static gbCommRedOp_t* lookup(gbComm_t c, gbRedOp_t op) {
  int k = (int)op - gbNumOps;
  if (k < 0 || k >= GB_COMM_MAX_REDOPS || !c->redops[k].used) return NULL;
  return &c->redops[k];
}

gbResult_t gbCommRedOpCreate(gbComm_t c, void* scalar, gbDataType_t dt, int residence, gbRedOp_t* op) {
  int k = 0;
  while (k < GB_COMM_MAX_REDOPS && c->redops[k].used) k++;
  if (k == GB_COMM_MAX_REDOPS)
    return gbErrorSet(gbInvalidUsage, "gbRedOpCreatePreMulSum: this communicator already holds %d ops; destroy "
                                      "unused ones with gbRedOpDestroy", GB_COMM_MAX_REDOPS);
  gbCommRedOp_t* r = &c->redops[k];
  memset(r, 0, sizeof(*r));
  GB_CHECK(c->dev->hostAlloc(&r->hostCell, 16));
  gbResult_t res = c->islandComm->ops->preMulSumCreate(c->islandComm, scalar, dt, (gbScalarResidence_t)residence,
                                                       &r->islandOp);
  if (res != gbSuccess) {
    c->dev->hostFree(r->hostCell);
    return res;
  }
  r->dtype = dt;
  r->residence = residence;
  r->scalar = scalar;
  if (residence == gbScalarHostImmediate) memcpy(r->hostCell, scalar, gbDtypeSize(dt));
  r->used = 1;
  *op = (gbRedOp_t)(gbNumOps + k);
  return gbSuccess;
}

gbResult_t gbCommRedOpDestroy(gbComm_t c, gbRedOp_t op) {
  gbCommRedOp_t* r = lookup(c, op);
  if (!r) return gbErrorSet(gbInvalidArgument, "gbRedOpDestroy: op %d is not a PreMulSum op of this communicator",
                            (int)op);
  gbResult_t res = c->islandComm->ops->redOpDestroy(c->islandComm, r->islandOp);
  /* The host cell stays: queued work may still read it; teardown frees it. */
  r->used = 0;
  return res;
}

gbResult_t gbCommResolveOp(gbComm_t c, gbRedOp_t op, gbDataType_t dt, gbCommOps_t* o) {
  memset(o, 0, sizeof(*o));
  if ((int)op >= 0 && op < gbNumOps) {
    o->island = op;
    o->partial = o->host = op == gbAvg ? gbSum : op;
    o->divisor = op == gbAvg ? c->nranks : 0;
    return gbSuccess;
  }
  gbCommRedOp_t* r = lookup(c, op);
  if (!r) return gbErrorSet(gbInvalidArgument, "op %d is not sum, prod, max, min, avg or a live PreMulSum op of this "
                                               "communicator", (int)op);
  if (r->dtype != dt)
    return gbErrorSet(gbInvalidArgument, "PreMulSum op %d was made for %s, not %s: make one op per datatype",
                      (int)op, gbDtypeName(r->dtype), gbDtypeName(dt));
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
