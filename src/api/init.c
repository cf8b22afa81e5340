/* Exported: version, unique id, communicator creation. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "boot/env.h"
#include "boot/root.h"
#include "boot/topology.h"
#include "core/settings.h"

/* One INFO line per process naming the version, as NCCL's "NCCL version"
 * line, before the first communicator's start-up says anything. */
static pthread_once_t bannerOnce = PTHREAD_ONCE_INIT;
static void bannerLog(void) {
  GB_INFO(GB_LOG_INIT, "gpubridge version %s (version code %d)", GB_VERSION_STRING, GB_VERSION_CODE);
}
static void banner(void) {
  gbParamInit();
  gbLogInit();
  pthread_once(&bannerOnce, bannerLog);
}

gbResult_t gbGetVersion(int* version) {
  if (!version) return gbErrorSet(gbInvalidArgument, "gbGetVersion: version is NULL");
  *version = GB_VERSION_CODE;
  return gbSuccess;
}

/* The root listens on this host's chosen interface (or loopback). */
gbResult_t gbGetUniqueId(gbUniqueId* uniqueId) {
  if (!uniqueId) return gbErrorSet(gbInvalidArgument, "gbGetUniqueId: uniqueId is NULL");
  banner();
  gbBootId_t id;
  memset(&id, 0, sizeof(id));
  char ifname[64];
  if (gbSockFindInterface(gbParamString(GB_PARAM_SOCKET_IFNAME), &id.root, ifname, sizeof(ifname)) != gbSuccess)
    return gbErrorSet(gbSystemError, "gbGetUniqueId: no network interface for the rendezvous root: %s", gbErrorLast());
  gbSockAddrSetPort(&id.root, 0);
  GB_CHECK(gbRandomBytes(id.secret, sizeof(id.secret)));
  gbSockAddr_t bound;
  GB_CHECK(gbBootRootStart(&id.root, id.secret, gbBootIdHash(&id), &bound));
  id.root = bound;
  return gbBootIdPack(&id, uniqueId);
}

typedef struct {
  gbComm_t comm;
  int nranks, rank, localRank;
  gbBootId_t id;
  gbConfig_t config;
  int hasConfig;
} initArgs_t;

static gbResult_t runInit(initArgs_t* a) {
  gbResult_t res = gbCommInitCore(a->comm, a->nranks, &a->id, a->rank, a->localRank, a->hasConfig ? &a->config : NULL);
  gbCommInitEnd(a->comm, res);
  return res;
}

static void* initThreadMain(void* arg) {
  initArgs_t* a = arg;
  (void)runInit(a);
  free(a);
  return NULL;
}

static gbResult_t initWith(gbComm_t* out, int nranks, const gbBootId_t* id, int rank, int localRank,
                           const gbConfig_t* config) {
  if (nranks < 1 || nranks > GB_MAX_RANKS)
    return gbErrorSet(gbInvalidArgument, "gbCommInitRank: nranks %d is not in [1, %d]", nranks, GB_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return gbErrorSet(gbInvalidArgument, "gbCommInitRank: rank %d is not in [0, nranks=%d)", rank, nranks);
  if (!out) return gbErrorSet(gbInvalidArgument, "gbCommInitRank: comm is NULL");
  *out = NULL;
  GB_CHECK(gbCommConfigCheck(config));
  int blocking = !(config && config->size >= offsetof(gbConfig_t, blocking) + sizeof(int) && config->blocking == 0);

  initArgs_t* a = calloc(1, sizeof(initArgs_t));
  if (!a) return gbErrorSet(gbSystemError, "gbCommInitRank: out of memory");
  gbResult_t allocated = gbCommAlloc(&a->comm);
  if (allocated != gbSuccess) {
    free(a);
    return allocated;
  }
  a->nranks = nranks;
  a->rank = rank;
  a->localRank = localRank;
  a->id = *id;
  if (config) {
    a->hasConfig = 1;
    memcpy(&a->config, config, config->size < sizeof(gbConfig_t) ? config->size : sizeof(gbConfig_t));
  }
  gbComm_t comm = a->comm;
  if (blocking) {
    gbResult_t res = runInit(a);
    free(a);
    if (res != gbSuccess) {
      char text[1024];
      snprintf(text, sizeof(text), "%s", gbErrorLast());
      gbCommFail(comm, res);
      gbCommFree(comm);
      gbErrorRecord(text);
      return res;
    }
    *out = comm;
    return gbSuccess;
  }
  int err = pthread_create(&comm->initThread, NULL, initThreadMain, a);
  if (err) {
    free(a);
    gbCommFree(comm);
    return gbErrorSet(gbSystemError, "gbCommInitRankConfig: cannot start the init thread");
  }
  comm->initThreadStarted = 1;
  *out = comm;
  return gbInProgress;
}

gbResult_t gbApiInitWith(gbComm_t* out, int nranks, const gbUniqueId* uid, int rank, int localRank,
                         const gbConfig_t* config) {
  gbBootId_t id;
  GB_CHECK(gbBootIdUnpack(uid, &id));
  return initWith(out, nranks, &id, rank, localRank, config);
}

gbResult_t gbCommInitRankConfig(gbComm_t* comm, int nranks, gbUniqueId commId, int rank,
                                          gbConfig_t* config) {
  banner();
  gbBootId_t id;
  GB_CHECK(gbBootIdUnpack(&commId, &id));
  return initWith(comm, nranks, &id, rank, 0, config);
}

gbResult_t gbCommInitRank(gbComm_t* comm, int nranks, gbUniqueId commId, int rank) {
  return gbCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

gbResult_t gbCommInitFromEnv(gbComm_t* comm, gbConfig_t* config) {
  banner();
  /* Arguments first: rank 0 starts the rendezvous root in gbBootEnvRead,
   * and a bad argument must fail before anything starts or is sent. */
  if (!comm) return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: comm is NULL");
  GB_CHECK(gbCommConfigCheck(config));
  gbBootEnv_t env;
  GB_CHECK(gbBootEnvRead(&env));
  return initWith(comm, env.nranks, &env.id, env.rank, env.localRank, config);
}
