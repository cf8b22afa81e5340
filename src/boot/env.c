#include "boot/env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "base/result.h"

static int readInt(const char* name, int* out) {
  const char* v = getenv(name);
  if (!v || !*v) return 0;
  char* end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x < 0 || x > 1 << 30) return -1;
  *out = (int)x;
  return 1;
}

typedef struct {
  const char* launcher;
  const char *rank, *size, *local, *localSize, *job;
} launcherVars_t;

static const launcherVars_t launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
};

static uint64_t hashText(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

/* A job identity the launcher gives every rank alike, for deriving a port and
 * a secret when MASTER_PORT / GPUBRIDGE_JOB_SECRET are not set. */
static const char* jobIdentity(const launcherVars_t* l, char* buf, size_t len) {
  const char* job = getenv(l->job);
  const char* ns = getenv("PMIX_NAMESPACE");
  const char* step = getenv("SLURM_STEP_ID");
  if (!job && !ns) return NULL;
  snprintf(buf, len, "%s/%s/%s", job ? job : "", ns ? ns : "", step ? step : "");
  return buf;
}

gbResult_t gbBootEnvRead(gbBootEnv_t* out) {
  memset(out, 0, sizeof(*out));
  const launcherVars_t* l = NULL;
  for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !l; i++) {
    int r = readInt(launchers[i].rank, &out->rank), s = readInt(launchers[i].size, &out->nranks);
    if (r < 0 || s < 0)
      return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: %s=%s / %s=%s must be non-negative integers",
                        launchers[i].rank, getenv(launchers[i].rank) ? getenv(launchers[i].rank) : "",
                        launchers[i].size, getenv(launchers[i].size) ? getenv(launchers[i].size) : "");
    if (r == 1 && s == 1) l = &launchers[i];
  }
  if (!l)
    return gbErrorSet(gbInvalidArgument,
                      "gbCommInitFromEnv: no launcher variables found: set RANK and WORLD_SIZE (torchrun, "
                      "gpubridge-run), or start the ranks with srun (SLURM_PROCID) or mpirun (OMPI_COMM_WORLD_RANK)");
  out->launcher = l->launcher;
  if (out->nranks < 1 || out->rank >= out->nranks)
    return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: %s=%d is not in [0, %s=%d)", l->rank, out->rank,
                      l->size, out->nranks);
  if (readInt(l->local, &out->localRank) != 1) out->localRank = 0;

  if (gbParamIsSet(GB_PARAM_UNIQUE_ID)) {
    gbUniqueId uid;
    GB_CHECK(gbBootIdFromHex(gbParamString(GB_PARAM_UNIQUE_ID), &uid));
    return gbBootIdUnpack(&uid, &out->id);
  }

  char identity[256];
  const char* job = jobIdentity(l, identity, sizeof(identity));
  const char* addr = getenv("MASTER_ADDR");
  int localSize = 0;
  if ((!addr || !*addr) && readInt(l->localSize, &localSize) == 1 && localSize == out->nranks)
    addr = "127.0.0.1"; /* every rank on this host */
  if (!addr || !*addr)
    return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: MASTER_ADDR is not set: set it to the host of rank 0 "
                                         "(and MASTER_PORT to a free port there)");
  int port = 0;
  int havePort = readInt("MASTER_PORT", &port);
  if (havePort < 0 || (havePort == 1 && (port < 1 || port > 65535)))
    return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: MASTER_PORT=%s is not a port number (1..65535)",
                      getenv("MASTER_PORT"));
  if (havePort == 0) {
    if (!job)
      return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: MASTER_PORT is not set: set it to a free port on "
                                           "MASTER_ADDR's host, the same for every rank");
    port = 20000 + (int)(hashText(job) % 30000);
  }
  GB_CHECK(gbSockAddrParse(addr, port, &out->id.root));
  gbSockAddrSetPort(&out->id.root, port);

  char secretText[512];
  if (gbParamIsSet(GB_PARAM_JOB_SECRET)) {
    snprintf(secretText, sizeof(secretText), "%s", gbParamString(GB_PARAM_JOB_SECRET));
  } else {
    snprintf(secretText, sizeof(secretText), "%s:%d:%d:%s", addr, port, out->nranks, job ? job : "");
    GB_INFO(GB_LOG_INIT, "GPUBRIDGE_JOB_SECRET is not set: the job secret is derived from the launcher's "
                         "variables, so a stranger who knows them could join");
  }
  gbBootSecretFromText(secretText, out->id.secret);

  out->hostsRoot = out->rank == 0;
  memset(&out->rootBind, 0, sizeof(out->rootBind));
  if (out->id.root.sa.ss_family == AF_INET6) {
    struct sockaddr_in6* s = (struct sockaddr_in6*)&out->rootBind.sa;
    s->sin6_family = AF_INET6;
    s->sin6_addr = in6addr_any;
    s->sin6_port = htons((uint16_t)port);
    out->rootBind.len = sizeof(*s);
  } else {
    struct sockaddr_in* s = (struct sockaddr_in*)&out->rootBind.sa;
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = htonl(INADDR_ANY);
    s->sin_port = htons((uint16_t)port);
    out->rootBind.len = sizeof(*s);
  }
  GB_INFO(GB_LOG_INIT, "rank %d of %d from %s variables; rendezvous at %s:%d", out->rank, out->nranks, l->launcher,
          addr, port);
  return gbSuccess;
}
