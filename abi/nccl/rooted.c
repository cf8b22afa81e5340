/* ncclGather and ncclScatter (NCCL 2.28), which gpubridge has no call for,
 * made of its send/recv group: every rank sends to (receives from) the root
 * and the root receives from (sends to) every rank, itself included, in
 * one group, so they run together and the result is NCCL's exactly. In
 * place on the root (its own block already where it belongs) the root
 * moves nothing for itself. Inside a caller's group the calls join it. */
#include <stdint.h>

#include "abi.h"
#include "nccl_exports.h"

typedef struct {
  const char* fn;
  gbComm_t gb;
  gbDataType_t dt;
  int rank, nranks;
  size_t blockBytes;
} rooted_t;

static gbResult_t prepare(const char* fn, ncclComm_t comm, ncclDataType_t datatype, int root, size_t count,
                          rooted_t* r) {
  r->fn = fn;
  GB_NCCL_CHECK(gbNcclCommGet(fn, comm, &r->gb));
  GB_NCCL_CHECK(gbNcclDtype(fn, datatype, &r->dt));
  GB_NCCL_CHECK(gbNcclErrorFrom(gbCommCount(r->gb, &r->nranks), fn, r->gb));
  GB_NCCL_CHECK(gbNcclErrorFrom(gbCommUserRank(r->gb, &r->rank), fn, r->gb));
  if (root < 0 || root >= r->nranks)
    return gbNcclErrorSet(gbInvalidArgument, "%s: root %d is not a rank in [0, %d)", fn, root, r->nranks);
  size_t size = gbNcclDtypeSize(r->dt);
  if (count > SIZE_MAX / 2 / size / (size_t)r->nranks)
    return gbNcclErrorSet(gbInvalidArgument, "%s: count %zu times %d ranks overflows the address space", fn, count,
                          r->nranks);
  r->blockBytes = count * size;
  return gbSuccess;
}

/* The group's calls; the group is always closed, and a failed call makes
 * gbGroupEnd issue nothing. */
static gbResult_t moveBlocks(const rooted_t* r, int gather, const void* sendbuff, void* recvbuff, size_t count,
                             int root, void* stream) {
  gbResult_t res = gbNcclErrorFrom(gbGroupStart(), r->fn, NULL);
  if (res != gbSuccess) return res;
  if (r->rank == root) {
    char* blocks = gather ? (char*)recvbuff : (char*)sendbuff;
    int inPlace = gather ? sendbuff == blocks + (size_t)root * r->blockBytes
                         : recvbuff == blocks + (size_t)root * r->blockBytes;
    for (int peer = 0; peer < r->nranks && res == gbSuccess; peer++) {
      if (peer == root && inPlace) continue;
      char* block = blocks + (size_t)peer * r->blockBytes;
      res = gather ? gbRecv(block, count, r->dt, peer, r->gb, stream) : gbSend(block, count, r->dt, peer, r->gb, stream);
    }
    if (res == gbSuccess && !inPlace)
      res = gather ? gbSend(sendbuff, count, r->dt, root, r->gb, stream) : gbRecv(recvbuff, count, r->dt, root, r->gb, stream);
  } else {
    res = gather ? gbSend(sendbuff, count, r->dt, root, r->gb, stream) : gbRecv(recvbuff, count, r->dt, root, r->gb, stream);
  }
  res = gbNcclErrorFrom(res, r->fn, r->gb);
  gbResult_t ended = gbNcclErrorFrom(gbGroupEnd(), r->fn, NULL);
  return res != gbSuccess ? res : ended;
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclGather, sendbuff, recvbuff, count, datatype, root, comm, stream);
  rooted_t r;
  gbResult_t res = prepare("ncclGather", comm, datatype, root, count, &r);
  if (res == gbSuccess && count > 0) res = moveBlocks(&r, 1, sendbuff, recvbuff, count, root, stream);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclGather)

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  GB_NCCL_FORWARD(ncclScatter, sendbuff, recvbuff, count, datatype, root, comm, stream);
  rooted_t r;
  gbResult_t res = prepare("ncclScatter", comm, datatype, root, count, &r);
  if (res == gbSuccess && count > 0) res = moveBlocks(&r, 0, sendbuff, recvbuff, count, root, stream);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclScatter)
