/* NCCL's data types and reduction ops to gpubridge's. The values are equal
 * (include/gpubridge/gpubridge.h), the fp8 types included, so this is a
 * check, not a table: which values gpubridge has, and a text for others. */
#include "abi.h"

gbResult_t gbNcclDtype(const char* fn, ncclDataType_t datatype, gbDataType_t* out) {
  int v = (int)datatype;
  if (v < 0 || v >= (int)gbNumTypes)
    return gbNcclErrorSet(gbInvalidArgument, "%s: datatype %d is not an ncclDataType_t gpubridge knows (0..%d)", fn,
                          v, (int)gbNumTypes - 1);
  *out = (gbDataType_t)v;
  return gbSuccess;
}

/* Built-in ops 0..4; values from ncclNumOps up are PreMulSum ops, which
 * ncclRedOpCreatePreMulSum made as gpubridge values: they pass through and
 * gpubridge checks they belong to the communicator. */
gbResult_t gbNcclOp(const char* fn, ncclRedOp_t op, gbRedOp_t* out) {
  if ((int)op < 0)
    return gbNcclErrorSet(gbInvalidArgument, "%s: op %d is not an ncclRedOp_t (sum, prod, max, min, avg, or one "
                                             "made by ncclRedOpCreatePreMulSum)", fn, (int)op);
  *out = (gbRedOp_t)op;
  return gbSuccess;
}

size_t gbNcclDtypeSize(gbDataType_t datatype) {
  switch (datatype) {
    case gbInt8: case gbUint8: case gbFloat8e4m3: case gbFloat8e5m2: return 1;
    case gbFloat16: case gbBfloat16: return 2;
    case gbInt32: case gbUint32: case gbFloat32: return 4;
    default: return 8; /* int64, uint64, float64 */
  }
}
