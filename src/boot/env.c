#include "boot/env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/param.h"
#include "base/result.h"
#include "boot/env_store.h"
#include "boot/exchange.h"
#include "boot/hostlist.h"
#include "boot/probe.h"
#include "boot/root.h"
#include "boot/topology.h"

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

/* The launchers' variables: base/param.c's table (GPUBRIDGE_VENDORS reads it too). */
typedef gbParamLauncher_t launcherVars_t;

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

/* Where rank 0's root listens: MASTER_ADDR itself when it is this host's
 * (so a loopback job is not reachable from the network), else any address.
 * A name that resolves to loopback here (127.0.1.1 in /etc/hosts) may name
 * this host to others: any address then too. */
static int rootBindAddress(const char* addrText, const gbSockAddr_t* root, gbSockAddr_t* out) {
  unsigned char buf[sizeof(struct in6_addr)];
  int literal = addrText[0] == '[' || inet_pton(AF_INET, addrText, buf) == 1 ||
                inet_pton(AF_INET6, addrText, buf) == 1 || strcmp(addrText, "localhost") == 0;
  if (gbSockAddrIsLocal(root) && (literal || !gbSockAddrIsLoopback(root))) {
    *out = *root;
    return 1;
  }
  int port = gbSockAddrPort(root);
  memset(out, 0, sizeof(*out));
  if (root->sa.ss_family == AF_INET6) {
    struct sockaddr_in6* s = (struct sockaddr_in6*)&out->sa;
    s->sin6_family = AF_INET6;
    s->sin6_addr = in6addr_any;
    s->sin6_port = htons((uint16_t)port);
    out->len = sizeof(*s);
  } else {
    struct sockaddr_in* s = (struct sockaddr_in*)&out->sa;
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = htonl(INADDR_ANY);
    s->sin_port = htons((uint16_t)port);
    out->len = sizeof(*s);
  }
  return 0;
}

static void note(char* problem, size_t len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char* problem, size_t len, const char* fmt, ...) {
  size_t used = strlen(problem);
  if (used + 3 >= len) return;
  if (used) {
    memcpy(problem + used, "; ", 3);
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(problem + used, len - used, fmt, ap);
  va_end(ap);
}

static const char* envText(const char* name) { return getenv(name) ? getenv(name) : ""; }

/* Tells the root (when it can be reached) why this process cannot join. */
static gbResult_t reportProblem(const gbBootEnv_t* e, int rank, int rankKnown, const char* problem, int canReach) {
  int heard = 0;
  gbResult_t res = gbSuccess;
  if (canReach) {
    char rootText[96];
    gbSockAddrString(&e->id.root, rootText, sizeof(rootText));
    GB_INFO(GB_LOG_INIT, "gbCommInitFromEnv: %s; telling the rendezvous root at %s", problem, rootText);
    res = gbBootReport(&e->id, rankKnown ? rank : -1, e->nranks, e->localRank, problem,
                       (double)gbParamInt(GB_PARAM_TIMEOUT), &heard);
  }
  if (heard) return res;
  if (canReach)
    return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: %s (the other ranks could not be told: %s)", problem,
                      gbErrorLast());
  return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: %s", problem);
}

/* Who set the variables, for the log: gpubridge-run says so
 * (GPUBRIDGE_LAUNCHER), torchrun leaves TORCHELASTIC_RUN_ID; RANK and
 * WORLD_SIZE alone came from elsewhere. */
static const char* launcherText(const launcherVars_t* l, char* buf, size_t len) {
  const char* named = gbParamString(GB_PARAM_LAUNCHER);
  const char* run = getenv("TORCHELASTIC_RUN_ID");
  if (strcmp(l->launcher, "torchrun") != 0) snprintf(buf, len, "%s's variables", l->launcher);
  else if (named[0]) snprintf(buf, len, "%.40s's variables", named);
  else if (run && *run) snprintf(buf, len, "torchrun's variables");
  else snprintf(buf, len, "the variables RANK and WORLD_SIZE");
  return buf;
}

/* torchrun's agent store carries the unique id (env_store.c). A failure
 * after this process started the root becomes its problem, reported to
 * that root so the others hear it; a second RANK=0 reports itself too. */
static gbResult_t storeRendezvous(gbBootEnv_t* out, const launcherVars_t* l, const char* addr, int port,
                                  int rankKnown, char* problem, size_t len, int* hostsRoot) {
  gbSockAddr_t store;
  GB_CHECK(gbSockAddrParse(addr, port, &store));
  gbSockAddrSetPort(&store, port);
  gbSockAddr_t bind;
  int bindMaster = rootBindAddress(addr, &store, &bind);
  gbBootStoreRdv_t rdv = {&store, bindMaster ? &bind : NULL, rankKnown && out->rank == 0, rankKnown ? out->rank : -1,
                          (double)gbParamInt(GB_PARAM_TIMEOUT)};
  char rival[128];
  gbResult_t res = gbBootStoreRendezvous(&rdv, &out->id, hostsRoot, rival, sizeof(rival));
  if (res != gbSuccess && *hostsRoot) note(problem, len, "%s", gbErrorLast());
  if (res == gbSuccess && rival[0])
    note(problem, len, "%s=0 is claimed twice: by %s first, then by this process; give each process its own rank",
         l->rank, rival);
  return res;
}

/* A heterogeneous step (srun ... : ..., or --het-group=0,1) numbers its
 * tasks from component 0's first node on, but SLURM_STEP_NODELIST lists the
 * step's nodes sorted, so component 0 may not be first there. Slurm names
 * each component's nodes (SLURM_JOB_NODELIST_HET_GROUP_<n>; srun's own
 * steps say _PACK_GROUP_<n>). A step without component 0 (srun
 * --het-group=1 inside the job) keeps those names from the batch script:
 * it does not run on component 0's first node, so the step list decides. */
static int hetFirstNode(char* out, size_t len) {
  int size = 0;
  if (readInt("SLURM_HET_SIZE", &size) != 1 && readInt("SLURM_PACK_SIZE", &size) != 1) return 0;
  if (size < 2) return 0;
  const char* comp0 = getenv("SLURM_JOB_NODELIST_HET_GROUP_0");
  if (!comp0 || !*comp0) comp0 = getenv("SLURM_JOB_NODELIST_PACK_GROUP_0");
  const char* step = getenv("SLURM_STEP_NODELIST");
  return gbBootHostlistFirst(comp0, out, len) && gbBootHostlistHas(step, out);
}

gbResult_t gbBootEnvRead(gbBootEnv_t* out) {
  memset(out, 0, sizeof(*out));
  char problem[480] = "";
  const launcherVars_t* l = NULL;
  int rankKnown = 0, sizeKnown = 0;
  const launcherVars_t* launchers = gbParamLaunchers;
  for (int i = 0; i < gbParamLauncherCount && !l; i++) {
    int r = readInt(launchers[i].rank, &out->rank), s = readInt(launchers[i].size, &out->nranks);
    if (r < 0 || s < 0 || (r == 1 && s == 1)) {
      l = &launchers[i];
      rankKnown = r == 1;
      sizeKnown = s == 1;
    }
    if (r < 0)
      note(problem, sizeof(problem), "%s=%s is not a non-negative integer; give each process its rank, 0 to %s-1",
           launchers[i].rank, envText(launchers[i].rank), launchers[i].size);
    if (s < 0)
      note(problem, sizeof(problem), "%s=%s is not a non-negative integer; give every process the number of ranks",
           launchers[i].size, envText(launchers[i].size));
  }
  /* One of a launcher's pair without the other (a launcher script that lost
   * a variable): that launcher's, so the job hears of it through the root. */
  for (int i = 0; i < gbParamLauncherCount && !l; i++) {
    int r = readInt(launchers[i].rank, &out->rank), s = readInt(launchers[i].size, &out->nranks);
    if (r + s != 1) continue;
    l = &launchers[i];
    rankKnown = r == 1;
    sizeKnown = s == 1;
    note(problem, sizeof(problem), "%s is set but %s is not; give every process both (its rank and the number of "
         "ranks)", r == 1 ? l->rank : l->size, r == 1 ? l->size : l->rank);
  }
  if (!l)
    return gbErrorSet(gbInvalidArgument,
                      "gbCommInitFromEnv: no launcher variables found: set RANK and WORLD_SIZE (torchrun, "
                      "gpubridge-run), or start the ranks with srun (SLURM_PROCID) or mpirun (OMPI_COMM_WORLD_RANK)");
  out->launcher = l->launcher;
  if (sizeKnown && (out->nranks < 1 || out->nranks > GB_MAX_RANKS)) {
    note(problem, sizeof(problem), "%s=%d is not in [1, %d]; give every process the number of ranks", l->size,
         out->nranks, GB_MAX_RANKS);
    sizeKnown = 0;
  }
  if (rankKnown && sizeKnown && out->rank >= out->nranks) {
    note(problem, sizeof(problem), "%s=%d is not below %s=%d; give each process its rank, 0 to %d", l->rank, out->rank,
         l->size, out->nranks, out->nranks - 1);
    rankKnown = 0;
  }
  if (!sizeKnown) out->nranks = 0;
  int localSize = 0;
  int local = readInt(l->local, &out->localRank), haveLocalSize = readInt(l->localSize, &localSize) == 1;
  if (local < 0)
    note(problem, sizeof(problem), "%s=%s is not a non-negative integer; give each process its rank on its host",
         l->local, envText(l->local));
  else if (local == 1 && haveLocalSize && out->localRank >= localSize)
    note(problem, sizeof(problem), "%s=%d is not below %s=%d; give each process its rank on its host, 0 to %d",
         l->local, out->localRank, l->localSize, localSize, localSize - 1);
  if (local != 1) out->localRank = 0;

  int haveId = 0;
  if (gbParamIsSet(GB_PARAM_UNIQUE_ID)) {
    gbUniqueId uid;
    char why[256];
    const char* given = getenv(gbParamDesc(GB_PARAM_UNIQUE_ID)->name);
    /* An invalid value reads as the default (""): say what is wrong with the one given. */
    if (given && gbParamParse(GB_PARAM_UNIQUE_ID, given, NULL, why, sizeof(why)) != 0)
      note(problem, sizeof(problem), "%s", why);
    else if (gbBootIdFromHex(gbParamString(GB_PARAM_UNIQUE_ID), &uid) == gbSuccess &&
             gbBootIdUnpack(&uid, &out->id) == gbSuccess)
      haveId = 1;
    else
      note(problem, sizeof(problem), "%s", gbErrorLast());
    if (haveId && !problem[0]) return gbSuccess;
  }

  /* Without a unique id: MASTER_ADDR and MASTER_PORT, also the way to tell
   * the job about a problem above. */
  int canReach = haveId, hostsRoot = 0;
  /* Under a real torchrun its agent listens on MASTER_PORT: meet through its store. */
  int fromStore = !haveId && strcmp(l->launcher, "torchrun") == 0 && gbBootEnvAgentStore();
  char identity[256];
  const char* job = jobIdentity(l, identity, sizeof(identity));
  const char* addr = getenv("MASTER_ADDR");
  if ((!addr || !*addr) && sizeKnown && haveLocalSize && localSize == out->nranks)
    addr = "127.0.0.1"; /* every rank on this host */
  char firstNode[256];
  if ((!addr || !*addr) && strcmp(l->launcher, "slurm") == 0) {
    /* srun puts task 0 on the step's first node, or on component 0's first of a heterogeneous step. */
    if (hetFirstNode(firstNode, sizeof(firstNode))) {
      addr = firstNode;
      GB_INFO(GB_LOG_INIT, "MASTER_ADDR is not set: the rendezvous is on %s, the first node of the heterogeneous "
              "job's component 0 (SLURM_JOB_NODELIST_HET_GROUP_0)", addr);
    }
    const char* lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    for (int i = 0; i < 3 && (!addr || !*addr); i++)
      if (gbBootHostlistFirst(getenv(lists[i]), firstNode, sizeof(firstNode))) {
        addr = firstNode;
        GB_INFO(GB_LOG_INIT, "MASTER_ADDR is not set: the rendezvous is on %s, the first node of %s", addr, lists[i]);
      }
  }
  int port = 0;
  int havePort = readInt("MASTER_PORT", &port);
  if (havePort < 0 || (havePort == 1 && (port < 1 || port > 65535))) {
    note(problem, sizeof(problem), "MASTER_PORT=%s is not a port number (1..65535); give every rank the same free "
         "port of rank 0's host", envText("MASTER_PORT"));
    havePort = -1;
  } else if (havePort == 0 && job) {
    port = 20000 + (int)(hashText(job) % 30000);
    havePort = 1;
  }
  if (!haveId) {
    if (!addr || !*addr) {
      if (!problem[0])
        return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: MASTER_ADDR is not set: set it to the host of rank 0 "
                                             "(and MASTER_PORT to a free port there)");
    } else if (havePort == 0) {
      if (!problem[0])
        return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: MASTER_PORT is not set: set it to a free port on "
                                             "MASTER_ADDR's host, the same for every rank");
    } else if (havePort == 1 && fromStore) {
      gbResult_t got = storeRendezvous(out, l, addr, port, rankKnown, problem, sizeof(problem), &hostsRoot);
      if (got != gbSuccess && !hostsRoot) {
        if (!problem[0]) return got;
        return gbErrorSet(gbInvalidArgument, "gbCommInitFromEnv: %s (the other ranks could not be told: %s)", problem,
                          gbErrorLast());
      }
      canReach = 1;
    } else if (havePort == 1) {
      gbResult_t parsed = gbSockAddrParse(addr, port, &out->id.root);
      if (parsed != gbSuccess && !problem[0]) return parsed;
      if (parsed == gbSuccess) {
        gbSockAddrSetPort(&out->id.root, port);
        /* The secret leaves the world size out, so a rank with a wrong
         * WORLD_SIZE still gets in and the verdict names it. */
        char secretText[1024];
        if (gbParamIsSet(GB_PARAM_JOB_SECRET)) {
          snprintf(secretText, sizeof(secretText), "%s", gbParamString(GB_PARAM_JOB_SECRET));
        } else {
          snprintf(secretText, sizeof(secretText), "%s:%d:%s", addr, port, job ? job : "");
          GB_INFO(GB_LOG_INIT, "GPUBRIDGE_JOB_SECRET is not set: the job secret is derived from the launcher's "
                               "variables, so a stranger who knows them could join");
        }
        gbBootSecretFromText(secretText, out->id.secret);
        canReach = 1;
      }
    }
  }

  if (canReach && !haveId && !fromStore && rankKnown && out->rank == 0) {
    rootBindAddress(addr, &out->id.root, &out->rootBind);
    gbSockAddr_t bound;
    if (gbBootRootStart(&out->rootBind, out->id.secret, gbBootIdHash(&out->id), &bound) == gbSuccess) {
      hostsRoot = 1;
    } else {
      int taken = errno == EADDRINUSE;
      char why[320];
      snprintf(why, sizeof(why), "%s", gbErrorLast());
      if (taken)
        note(problem, sizeof(problem), "%s=0, but MASTER_PORT %d on this host is taken, so the rendezvous root "
             "cannot listen there (%s): choose a free port (MASTER_PORT; gpubridge-run --port) or find the process "
             "holding it: ss -ltnp 'sport = :%d'; if it is a second process started with %s=0, give each process "
             "its own rank", l->rank, port, why, port, l->rank);
      else
        note(problem, sizeof(problem), "%s=0, but this process cannot host the rendezvous root on port %d: %s; choose "
             "a free MASTER_PORT", l->rank, port, why);
      /* Report to whoever holds the port: another rank 0's root, maybe. */
      canReach = taken;
    }
  }
  if (problem[0]) return reportProblem(out, out->rank, rankKnown, problem, canReach);

  char rootText[96], from[64];
  GB_INFO(GB_LOG_INIT, "rank %d of %d from %s; rendezvous at %s%s%s", out->rank, out->nranks,
          launcherText(l, from, sizeof(from)),
          gbSockAddrString(&out->id.root, rootText, sizeof(rootText)), hostsRoot ? " (hosted here)" : "",
          fromStore ? ", found through torchrun's store" : "");
  return gbSuccess;
}
