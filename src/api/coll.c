/* Exported collectives: argument checks on the calling thread, then core. */
#include <stdint.h>

#include "api/api.h"
#include "base/dtype.h"
#include "base/result.h"

static gbResult_t checkBuffers(const char* fn, const void* send, const void* recv, size_t count, gbDataType_t dt) {
  if ((int)dt < 0 || dt >= gbNumTypes)
    return gbErrorSet(gbInvalidArgument, "%s: datatype %d is not a gbDataType_t (0..%d)", fn, (int)dt, gbNumTypes - 1);
  if (count > SIZE_MAX / 2 / gbDtypeSize(dt))
    return gbErrorSet(gbInvalidArgument, "%s: count %zu of %s overflows the address space", fn, count, gbDtypeName(dt));
  if (count > 0 && !recv) return gbErrorSet(gbInvalidArgument, "%s: recvbuff is NULL with count %zu", fn, count);
  (void)send;
  return gbSuccess;
}

gbResult_t gbAllReduce(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype,
                                 gbRedOp_t op, gbComm_t comm, void* stream) {
  static const char* fn = "gbAllReduce";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, count, datatype));
  if (count > 0 && !sendbuff) return gbErrorSet(gbInvalidArgument, "%s: sendbuff is NULL with count %zu", fn, count);
  if ((int)op < 0 || op >= gbNumOps)
    return gbErrorSet(gbInvalidArgument, "%s: op %d is not a gbRedOp_t (sum, prod, max, min, avg)", fn, (int)op);
  if (op == gbAvg && !gbDtypeIsFloat(datatype))
    return gbErrorSet(gbInvalidArgument,
                      "%s: avg needs a floating-point type, not %s (an integer average would need a rounding rule): "
                      "use sum and divide, or a float type", fn, gbDtypeName(datatype));
  if (count == 0) return gbSuccess;
  return gbCommEnqueueAllReduce(comm, sendbuff, recvbuff, count, datatype, op, stream);
}

gbResult_t gbBroadcast(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, int root,
                                 gbComm_t comm, void* stream) {
  static const char* fn = "gbBroadcast";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, count, datatype));
  if (root < 0 || root >= comm->nranks)
    return gbErrorSet(gbInvalidArgument, "%s: root %d is not a rank in [0, %d)", fn, root, comm->nranks);
  if (count > 0 && comm->rank == root && !sendbuff)
    return gbErrorSet(gbInvalidArgument, "%s: sendbuff is NULL on the root with count %zu", fn, count);
  if (count == 0) return gbSuccess;
  return gbCommEnqueueBroadcast(comm, sendbuff, recvbuff, count, datatype, root, stream);
}

gbResult_t gbBarrier(gbComm_t comm, void* stream) {
  GB_CHECK(gbApiCheckComm("gbBarrier", comm));
  return gbCommEnqueueAllReduce(comm, comm->scratchDev, comm->scratchDev, 1, gbInt32, gbSum, stream);
}
