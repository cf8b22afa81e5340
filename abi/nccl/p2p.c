/* Point to point and groups: ncclSend, ncclRecv, ncclGroupStart,
 * ncclGroupEnd over gpubridge's own, which keep NCCL's rules: groups are
 * per thread and nest; the sends and receives of a group run together at
 * the outermost end. Collectives called inside a group are issued at once,
 * in call order (every rank calls them in the same order, so the result is
 * the same as NCCL's deferred launch). */
#include "abi.h"
#include "nccl_exports.h"

static gbResult_t prepare(const char* fn, ncclComm_t comm, ncclDataType_t datatype, gbComm_t* gb,
                          gbDataType_t* dt) {
  GB_NCCL_CHECK(gbNcclCommGet(fn, comm, gb));
  return gbNcclDtype(fn, datatype, dt);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclSend, sendbuff, count, datatype, peer, comm, stream);
  static const char fn[] = "ncclSend";
  gbComm_t gb;
  gbDataType_t dt;
  gbResult_t res = prepare(fn, comm, datatype, &gb, &dt);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbSend(sendbuff, count, dt, peer, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclSend)

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclRecv, recvbuff, count, datatype, peer, comm, stream);
  static const char fn[] = "ncclRecv";
  gbComm_t gb;
  gbDataType_t dt;
  gbResult_t res = prepare(fn, comm, datatype, &gb, &dt);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbRecv(recvbuff, count, dt, peer, gb, stream), fn, gb);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclRecv)

ncclResult_t ncclGroupStart(void) {
  GB_NCCL_FORWARD(ncclGroupStart);
  return gbNcclResult(gbNcclErrorFrom(gbGroupStart(), "ncclGroupStart", NULL));
}
GB_NCCL_ALIAS(ncclGroupStart)

ncclResult_t ncclGroupEnd(void) {
  GB_NCCL_FORWARD(ncclGroupEnd);
  return gbNcclResult(gbNcclErrorFrom(gbGroupEnd(), "ncclGroupEnd", NULL));
}
GB_NCCL_ALIAS(ncclGroupEnd)
