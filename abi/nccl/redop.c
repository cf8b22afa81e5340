/* PreMulSum ops: gpubridge's gbRedOpCreatePreMulSum makes an op value of
 * its own (from gbNumOps = ncclNumOps up) that the caller then passes as an
 * ncclRedOp_t; convert.c lets such values through unchanged. */
#include "abi.h"
#include "nccl_exports.h"

_Static_assert((int)ncclNumOps == (int)gbNumOps, "dynamic ops start at the same value");
_Static_assert((int)ncclScalarDevice == (int)gbScalarDevice && (int)ncclScalarHostImmediate == (int)gbScalarHostImmediate,
               "scalar residences agree");

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclRedOpCreatePreMulSum, op, scalar, datatype, residence, comm);
  static const char fn[] = "ncclRedOpCreatePreMulSum";
  gbComm_t gb;
  gbDataType_t dt;
  gbRedOp_t made;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess) res = gbNcclDtype(fn, datatype, &dt);
  if (res == gbSuccess && !op) res = gbNcclErrorSet(gbInvalidArgument, "%s: op is NULL", fn);
  if (res == gbSuccess && residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    res = gbNcclErrorSet(gbInvalidArgument, "%s: residence %d is neither ncclScalarDevice (0) nor "
                                            "ncclScalarHostImmediate (1)", fn, (int)residence);
  if (res == gbSuccess)
    res = gbNcclErrorFrom(gbRedOpCreatePreMulSum(&made, scalar, dt, (gbScalarResidence_t)residence, gb), fn, gb);
  if (res == gbSuccess) *op = (ncclRedOp_t)made;
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  GB_NCCL_FORWARD(ncclRedOpDestroy, op, comm);
  static const char fn[] = "ncclRedOpDestroy";
  gbComm_t gb;
  gbResult_t res = gbNcclCommGet(fn, comm, &gb);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbRedOpDestroy((gbRedOp_t)op, gb), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclRedOpDestroy)
