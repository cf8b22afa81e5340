/* Exported collectives: argument checks on the calling thread, then core;
 * each a call on its communicator from start to return (GB_API_ON_COMM).
 * A count-0 call goes to core too: a no-op there, as in NCCL, unless the
 * call check is on, which it then takes part in (core/check.c). */
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

static gbResult_t checkOp(const char* fn, gbComm_t comm, gbRedOp_t op, gbDataType_t dt) {
  if ((int)op < 0)
    return gbErrorSet(gbInvalidArgument, "%s: op %d is not a gbRedOp_t (sum, prod, max, min, avg, PreMulSum)", fn,
                      (int)op);
  if (op == gbAvg && !gbDtypeIsFloat(dt))
    return gbErrorSet(gbInvalidArgument,
                      "%s: avg needs a floating-point type, not %s (an integer average would need a rounding rule): "
                      "use sum and divide, or a float type", fn, gbDtypeName(dt));
  if (gbCommCheckOp(comm, op, dt) != gbSuccess)
    return gbErrorSet(gbInvalidArgument, "%s: %s", fn, gbErrorLast());
  return gbSuccess;
}

static gbResult_t checkSend(const char* fn, const void* send, size_t count) {
  if (count > 0 && !send) return gbErrorSet(gbInvalidArgument, "%s: sendbuff is NULL with count %zu", fn, count);
  return gbSuccess;
}

/* NCCL's in-place rule (2.28): sendbuff at inPlace, where this rank's input
 * lies in recvbuff, is in place; any other overlap would let what the call
 * writes overwrite input it has still to read. how says what in place is. */
static gbResult_t checkOverlap(const char* fn, const void* send, size_t sendBytes, const void* recv, size_t recvBytes,
                               uintptr_t inPlace, const char* how) {
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if (sendBytes == 0 || recvBytes == 0 || s == inPlace || s >= r + recvBytes || r >= s + sendBytes)
    return gbSuccess;
  return gbErrorSet(gbInvalidArgument, "%s: sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap without being "
                    "in place; %s, or separate buffers", fn, send, sendBytes, recv, recvBytes, how);
}

/* count elements per rank times nranks must still be addressable. */
static gbResult_t checkTotal(const char* fn, gbComm_t comm, size_t count, gbDataType_t dt) {
  if (count > SIZE_MAX / 2 / gbDtypeSize(dt) / (size_t)comm->nranks)
    return gbErrorSet(gbInvalidArgument, "%s: count %zu of %s times %d ranks overflows the address space", fn, count,
                      gbDtypeName(dt), comm->nranks);
  return gbSuccess;
}

static gbResult_t allReduce(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, gbRedOp_t op,
                            gbComm_t comm, void* stream) {
  static const char* fn = "gbAllReduce";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, count, datatype));
  GB_CHECK(checkSend(fn, sendbuff, count));
  GB_CHECK(checkOp(fn, comm, op, datatype));
  size_t bytes = count * gbDtypeSize(datatype);
  GB_CHECK(checkOverlap(fn, sendbuff, bytes, recvbuff, bytes, (uintptr_t)recvbuff,
                        "pass the same pointer for an in-place all-reduce"));
  return gbCommEnqueueAllReduce(comm, sendbuff, recvbuff, count, datatype, op, stream);
}

gbResult_t gbAllReduce(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, gbRedOp_t op,
                       gbComm_t comm, void* stream) {
  GB_API_ON_COMM("gbAllReduce", comm, allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream));
}

static gbResult_t reduce(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, gbRedOp_t op,
                         int root, gbComm_t comm, void* stream) {
  static const char* fn = "gbReduce";
  GB_CHECK(gbApiCheckComm(fn, comm));
  if (root < 0 || root >= comm->nranks)
    return gbErrorSet(gbInvalidArgument, "%s: root %d is not a rank in [0, %d)", fn, root, comm->nranks);
  /* recvbuff matters on the root only. */
  GB_CHECK(checkBuffers(fn, sendbuff, comm->rank == root ? recvbuff : (void*)1, count, datatype));
  GB_CHECK(checkSend(fn, sendbuff, count));
  GB_CHECK(checkOp(fn, comm, op, datatype));
  size_t bytes = count * gbDtypeSize(datatype);
  if (comm->rank == root)
    GB_CHECK(checkOverlap(fn, sendbuff, bytes, recvbuff, bytes, (uintptr_t)recvbuff,
                          "pass the same pointer for an in-place reduce"));
  return gbCommEnqueueReduce(comm, sendbuff, recvbuff, count, datatype, op, root, stream);
}

gbResult_t gbReduce(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, gbRedOp_t op, int root,
                    gbComm_t comm, void* stream) {
  GB_API_ON_COMM("gbReduce", comm, reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

static gbResult_t allGather(const void* sendbuff, void* recvbuff, size_t sendcount, gbDataType_t datatype,
                            gbComm_t comm, void* stream) {
  static const char* fn = "gbAllGather";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, sendcount, datatype));
  GB_CHECK(checkSend(fn, sendbuff, sendcount));
  GB_CHECK(checkTotal(fn, comm, sendcount, datatype));
  size_t bytes = sendcount * gbDtypeSize(datatype);
  GB_CHECK(checkOverlap(fn, sendbuff, bytes, recvbuff, bytes * (size_t)comm->nranks,
                        (uintptr_t)recvbuff + bytes * (size_t)comm->rank,
                        "pass sendbuff = recvbuff + rank * sendcount elements for an in-place all-gather"));
  return gbCommEnqueueAllGather(comm, sendbuff, recvbuff, sendcount, datatype, stream);
}

gbResult_t gbAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, gbDataType_t datatype, gbComm_t comm,
                       void* stream) {
  GB_API_ON_COMM("gbAllGather", comm, allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream));
}

static gbResult_t reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, gbDataType_t datatype,
                                gbRedOp_t op, gbComm_t comm, void* stream) {
  static const char* fn = "gbReduceScatter";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, recvcount, datatype));
  GB_CHECK(checkSend(fn, sendbuff, recvcount));
  GB_CHECK(checkTotal(fn, comm, recvcount, datatype));
  GB_CHECK(checkOp(fn, comm, op, datatype));
  size_t bytes = recvcount * gbDtypeSize(datatype);
  GB_CHECK(checkOverlap(fn, sendbuff, bytes * (size_t)comm->nranks, recvbuff, bytes,
                        (uintptr_t)recvbuff - bytes * (size_t)comm->rank,
                        "pass recvbuff = sendbuff + rank * recvcount elements for an in-place reduce-scatter"));
  return gbCommEnqueueReduceScatter(comm, sendbuff, recvbuff, recvcount, datatype, op, stream);
}

gbResult_t gbReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, gbDataType_t datatype, gbRedOp_t op,
                           gbComm_t comm, void* stream) {
  GB_API_ON_COMM("gbReduceScatter", comm, reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
}

static gbResult_t allToAll(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, gbComm_t comm,
                           void* stream) {
  static const char* fn = "gbAllToAll";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, count, datatype));
  GB_CHECK(checkSend(fn, sendbuff, count));
  GB_CHECK(checkTotal(fn, comm, count, datatype));
  size_t bytes = count * gbDtypeSize(datatype) * (size_t)comm->nranks;
  GB_CHECK(checkOverlap(fn, sendbuff, bytes, recvbuff, bytes, (uintptr_t)recvbuff,
                        "pass the same pointer for an in-place all-to-all"));
  return gbCommEnqueueAllToAll(comm, sendbuff, recvbuff, count, datatype, stream);
}

gbResult_t gbAllToAll(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, gbComm_t comm,
                      void* stream) {
  GB_API_ON_COMM("gbAllToAll", comm, allToAll(sendbuff, recvbuff, count, datatype, comm, stream));
}

static gbResult_t redOpCreatePreMulSum(gbRedOp_t* op, void* scalar, gbDataType_t datatype,
                                       gbScalarResidence_t residence, gbComm_t comm) {
  static const char* fn = "gbRedOpCreatePreMulSum";
  GB_CHECK(gbApiCheckComm(fn, comm));
  if (!op || !scalar) return gbErrorSet(gbInvalidArgument, "%s: %s is NULL", fn, op ? "scalar" : "op");
  if ((int)datatype < 0 || datatype >= gbNumTypes)
    return gbErrorSet(gbInvalidArgument, "%s: datatype %d is not a gbDataType_t", fn, (int)datatype);
  if (residence != gbScalarDevice && residence != gbScalarHostImmediate)
    return gbErrorSet(gbInvalidArgument, "%s: residence %d is not gbScalarDevice or gbScalarHostImmediate", fn,
                      (int)residence);
  return gbCommRedOpCreate(comm, scalar, datatype, residence, op);
}

gbResult_t gbRedOpCreatePreMulSum(gbRedOp_t* op, void* scalar, gbDataType_t datatype, gbScalarResidence_t residence,
                                  gbComm_t comm) {
  GB_API_ON_COMM("gbRedOpCreatePreMulSum", comm, redOpCreatePreMulSum(op, scalar, datatype, residence, comm));
}

static gbResult_t redOpDestroy(gbRedOp_t op, gbComm_t comm) {
  GB_CHECK(gbApiCheckComm("gbRedOpDestroy", comm));
  if ((int)op >= 0 && op < gbNumOps)
    return gbErrorSet(gbInvalidArgument, "gbRedOpDestroy: op %d is a built-in op, not one made by "
                                         "gbRedOpCreatePreMulSum", (int)op);
  return gbCommRedOpDestroy(comm, op);
}

gbResult_t gbRedOpDestroy(gbRedOp_t op, gbComm_t comm) {
  GB_API_ON_COMM("gbRedOpDestroy", comm, redOpDestroy(op, comm));
}

static gbResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, int root,
                            gbComm_t comm, void* stream) {
  static const char* fn = "gbBroadcast";
  GB_CHECK(gbApiCheckComm(fn, comm));
  GB_CHECK(checkBuffers(fn, sendbuff, recvbuff, count, datatype));
  if (root < 0 || root >= comm->nranks)
    return gbErrorSet(gbInvalidArgument, "%s: root %d is not a rank in [0, %d)", fn, root, comm->nranks);
  if (count > 0 && comm->rank == root && !sendbuff)
    return gbErrorSet(gbInvalidArgument, "%s: sendbuff is NULL on the root with count %zu", fn, count);
  size_t bytes = count * gbDtypeSize(datatype);
  if (comm->rank == root)
    GB_CHECK(checkOverlap(fn, sendbuff, bytes, recvbuff, bytes, (uintptr_t)recvbuff,
                          "pass the same pointer for an in-place broadcast"));
  return gbCommEnqueueBroadcast(comm, sendbuff, recvbuff, count, datatype, root, stream);
}

gbResult_t gbBroadcast(const void* sendbuff, void* recvbuff, size_t count, gbDataType_t datatype, int root,
                       gbComm_t comm, void* stream) {
  GB_API_ON_COMM("gbBroadcast", comm, broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream));
}

static gbResult_t barrier(gbComm_t comm, void* stream) {
  GB_CHECK(gbApiCheckComm("gbBarrier", comm));
  return gbCommEnqueueBarrier(comm, stream);
}

gbResult_t gbBarrier(gbComm_t comm, void* stream) {
  GB_API_ON_COMM("gbBarrier", comm, barrier(comm, stream));
}
