/* The collectives gpubridge has, one to one: all-reduce, broadcast (and the
 * in-place ncclBcast), reduce, all-gather, reduce-scatter, all-to-all.
 * Arguments keep NCCL's order and in-place rules, which gpubridge shares
 * (all-to-all in place when sendbuff == recvbuff, as in NCCL 2.28);
 * the stream (cudaStream_t, hipStream_t, or a gbStreamCreate stream on a
 * simulated rank) passes through. */
#include "abi.h"
#include "nccl_exports.h"

/* The communicator and the converted datatype (and op, when given). */
static gbResult_t prepare(const char* fn, ncclComm_t comm, ncclDataType_t datatype, const ncclRedOp_t* op,
                          gbComm_t* gb, gbDataType_t* dt, gbRedOp_t* gop) {
  GB_NCCL_CHECK(gbNcclCommGet(fn, comm, gb));
  GB_NCCL_CHECK(gbNcclDtype(fn, datatype, dt));
  if (op) GB_NCCL_CHECK(gbNcclOp(fn, *op, gop));
  return gbSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
  static const char fn[] = "ncclAllReduce";
  gbComm_t gb;
  gbDataType_t dt;
  gbRedOp_t gop;
  gbResult_t res = prepare(fn, comm, datatype, &op, &gb, &dt, &gop);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbAllReduce(sendbuff, recvbuff, count, dt, gop, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclAllReduce)

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
  static const char fn[] = "ncclBroadcast";
  gbComm_t gb;
  gbDataType_t dt;
  gbResult_t res = prepare(fn, comm, datatype, NULL, &gb, &dt, NULL);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbBroadcast(sendbuff, recvbuff, count, dt, root, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclBroadcast)

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclBcast, buff, count, datatype, root, comm, stream);
  static const char fn[] = "ncclBcast";
  gbComm_t gb;
  gbDataType_t dt;
  gbResult_t res = prepare(fn, comm, datatype, NULL, &gb, &dt, NULL);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbBroadcast(buff, buff, count, dt, root, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclBcast)

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  static const char fn[] = "ncclReduce";
  gbComm_t gb;
  gbDataType_t dt;
  gbRedOp_t gop;
  gbResult_t res = prepare(fn, comm, datatype, &op, &gb, &dt, &gop);
  if (res == gbSuccess)
    res = gbNcclErrorFrom(gbReduce(sendbuff, recvbuff, count, dt, gop, root, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclReduce)

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream);
  static const char fn[] = "ncclAllGather";
  gbComm_t gb;
  gbDataType_t dt;
  gbResult_t res = prepare(fn, comm, datatype, NULL, &gb, &dt, NULL);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbAllGather(sendbuff, recvbuff, sendcount, dt, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclAllGather)

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  static const char fn[] = "ncclReduceScatter";
  gbComm_t gb;
  gbDataType_t dt;
  gbRedOp_t gop;
  gbResult_t res = prepare(fn, comm, datatype, &op, &gb, &dt, &gop);
  if (res == gbSuccess)
    res = gbNcclErrorFrom(gbReduceScatter(sendbuff, recvbuff, recvcount, dt, gop, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclReduceScatter)

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream);
  static const char fn[] = "ncclAlltoAll";
  gbComm_t gb;
  gbDataType_t dt;
  gbResult_t res = prepare(fn, comm, datatype, NULL, &gb, &dt, NULL);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbAllToAll(sendbuff, recvbuff, count, dt, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclAlltoAll)
