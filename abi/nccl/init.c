/* Unique ids and communicator creation: ncclGetUniqueId, ncclCommInitRank,
 * ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommInitAll.
 * An ncclUniqueId is a gbUniqueId (128 bytes: the rendezvous root's address
 * and the job secret). A non-blocking config makes gpubridge return
 * gbInProgress at once; ncclCommGetAsyncError then says when it is done. */
#include <string.h>

#include "abi.h"
#include "nccl_exports.h"

typedef struct {
  int nranks, rank;
  gbUniqueId id;
  gbConfig_t config;
} initArgs_t;

static gbResult_t makeInit(void* p, gbComm_t* gb) {
  initArgs_t* a = p;
  return gbCommInitRankConfig(gb, a->nranks, a->id, a->rank, &a->config);
}

static gbResult_t initWith(const char* fn, ncclComm_t* out, int nranks, const ncclUniqueId* id, int rank,
                           const ncclConfig_t* config) {
  if (!out) return gbNcclErrorSet(gbInvalidArgument, "%s: comm is NULL", fn);
  *out = NULL;
  initArgs_t a;
  char name[GB_NCCL_NAME_LEN];
  int device;
  GB_NCCL_CHECK(gbNcclConfigRead(fn, config, &a.config, name, sizeof(name)));
  GB_NCCL_CHECK(gbNcclDeviceAdopt(fn, &device));
  a.nranks = nranks;
  a.rank = rank;
  memcpy(&a.id, id, sizeof(a.id));
  return gbNcclCommCreate(fn, device, name, makeInit, &a, out);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  GB_NCCL_FORWARD(ncclGetUniqueId, uniqueId);
  static const char fn[] = "ncclGetUniqueId";
  if (!uniqueId) return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "%s: uniqueId is NULL", fn));
  int device;
  gbResult_t res = gbNcclDeviceAdopt(fn, &device);
  gbUniqueId id;
  if (res == gbSuccess) res = gbNcclErrorFrom(gbGetUniqueId(&id), fn, NULL);
  if (res == gbSuccess) memcpy(uniqueId, &id, sizeof(id));
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclGetUniqueId)

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  GB_NCCL_FORWARD(ncclCommInitRank, comm, nranks, commId, rank);
  return gbNcclResult(initWith("ncclCommInitRank", comm, nranks, &commId, rank, NULL));
}
GB_NCCL_ALIAS(ncclCommInitRank)

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  GB_NCCL_FORWARD(ncclCommInitRankConfig, comm, nranks, commId, rank, config);
  return gbNcclResult(initWith("ncclCommInitRankConfig", comm, nranks, &commId, rank, config));
}
GB_NCCL_ALIAS(ncclCommInitRankConfig)

/* NCCL spreads its bootstrap over nId roots; gpubridge has one rendezvous
 * root per communicator, so every rank uses commIds[0] (the same on every
 * rank: NCCL requires the same ids in the same order everywhere). */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  GB_NCCL_FORWARD(ncclCommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
  static const char fn[] = "ncclCommInitRankScalable";
  if (nId < 1 || !commIds)
    return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "%s: nId is %d and commIds %s: give at least one id", fn,
                                       nId, commIds ? "set" : "NULL"));
  if (nId > 1) GB_NCCL_INFO("%s: %d ids given; gpubridge uses the first (one rendezvous root)", fn, nId);
  return gbNcclResult(initWith(fn, newcomm, nranks, &commIds[0], myrank, config));
}
GB_NCCL_ALIAS(ncclCommInitRankScalable)

/* One process holding several ranks of one communicator would need
 * gpubridge to drive several GPUs per process; it drives one. A clique of
 * one is honoured. */
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  GB_NCCL_FORWARD(ncclCommInitAll, comms, ndev, devlist);
  static const char fn[] = "ncclCommInitAll";
  if (!comms || ndev < 1)
    return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "%s: comms is %s and ndev %d: give an array of ndev >= 1 "
                                       "handles", fn, comms ? "set" : "NULL", ndev));
  if (ndev > 1)
    return gbNcclResult(gbNcclErrorSet(gbInvalidUsage,
                                       "%s: ndev=%d is not supported by gpubridge: it drives one GPU per process, so "
                                       "one process cannot hold the %d ranks of a single-process clique; start one "
                                       "process per GPU (torchrun, mpirun, gpubridge-run) and call ncclCommInitRank, "
                                       "or call ncclCommInitAll with ndev=1", fn, ndev, ndev));
  int want = devlist ? devlist[0] : 0;
  if (want < 0)
    return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "%s: devlist[0] is %d: give a GPU index", fn, want));
  comms[0] = NULL;
  initArgs_t a = {.nranks = 1, .rank = 0};
  char name[GB_NCCL_NAME_LEN];
  int device;
  gbResult_t res = gbNcclConfigRead(fn, NULL, &a.config, name, sizeof(name));
  if (res == gbSuccess) res = gbNcclDeviceAdoptGiven(fn, want, &device);
  if (res == gbSuccess) res = gbNcclErrorFrom(gbGetUniqueId(&a.id), fn, NULL);
  if (res == gbSuccess) res = gbNcclCommCreate(fn, device, name, makeInit, &a, &comms[0]);
  return gbNcclResult(res);
}
GB_NCCL_ALIAS(ncclCommInitAll)
