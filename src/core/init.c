/* Communicator start-up: probe, rendezvous and verdict, topology, the host
 * groups this rank needs, the island, the proxy thread and the stages. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "boot/exchange.h"
#include "boot/mesh.h"
#include "boot/root.h"
#include "core/comm.h"
#include "core/trace.h"
#include "core/settings.h"
#include "os/backoff.h"
#include "plan/plan.h"

gbResult_t gbCommAlloc(gbComm_t* out) {
  struct gbComm* c = calloc(1, sizeof(struct gbComm));
  if (!c) return gbErrorSet(gbSystemError, "out of memory for a communicator");
  c->magic = GB_COMM_MAGIC;
  atomic_store_explicit(&c->initState, GB_INIT_RUNNING, memory_order_relaxed);
  pthread_mutex_init(&c->errorLock, NULL);
  gbResult_t res = gbCommRegister(c);
  if (res != gbSuccess) {
    pthread_mutex_destroy(&c->errorLock);
    free(c);
    return res;
  }
  *out = c;
  return gbSuccess;
}

static int isLoopback(const gbSockAddr_t* a) {
  char buf[96];
  gbSockAddrString(a, buf, sizeof(buf));
  return strncmp(buf, "127.", 4) == 0 || strncmp(buf, "[::1]", 5) == 0;
}

/* The address peers reach this rank on: the chosen interface, or loopback
 * when the whole job rendezvous on loopback (one host). */
static gbResult_t listenAddress(const gbComm_t c, gbSockAddr_t* addr, char* problems, size_t len) {
  const char* spec = gbParamString(GB_PARAM_SOCKET_IFNAME);
  if (!*spec && isLoopback(&c->id.root)) return gbSockAddrParse("127.0.0.1", 0, addr);
  char ifname[64];
  gbResult_t res = gbSockFindInterface(spec, addr, ifname, sizeof(ifname));
  if (res != gbSuccess) {
    size_t used = strlen(problems);
    snprintf(problems + used, len - used, "%s%s", used ? "; " : "", gbErrorLast());
    return gbSockAddrParse("127.0.0.1", 0, addr);
  }
  gbSockAddrSetPort(addr, 0);
  GB_INFO(GB_LOG_INIT, "using interface %s", ifname);
  return gbSuccess;
}

/* Split-test mode relabels a one-vendor job into islands, for testing the
 * bridge where only one vendor's GPUs exist. */
static void splitLabel(gbProbe_t* p) {
  char base[16];
  snprintf(base, sizeof(base), "%s", p->vendor);
  switch (p->settings.splitTest) {
    case 1: /* half */
      snprintf(p->vendor, sizeof(p->vendor), "%.13s-%c", base, p->rank < (p->nranks + 1) / 2 ? 'a' : 'b');
      break;
    case 2: /* alternate */
      snprintf(p->vendor, sizeof(p->vendor), "%.13s-%c", base, p->rank % 2 ? 'b' : 'a');
      break;
    case 3: /* node */
      snprintf(p->vendor, sizeof(p->vendor), "%.7s@%.7s", base, p->host);
      break;
    default:
      break;
  }
}

static gbResult_t fillProbe(gbComm_t c, int nranks, int rank, int localRank, const gbConfig_t* config,
                            gbProbe_t* p) {
  memset(p, 0, sizeof(*p));
  p->magic = GB_PROBE_MAGIC;
  p->version = GB_PROBE_VERSION;
  p->rank = rank;
  p->nranks = nranks;
  p->pid = (int32_t)getpid();
  p->runKind = c->dev->runKind;
  p->libVersion = GB_VERSION_CODE;
  p->localRank = localRank;
  p->hostId = gbHostId();
  snprintf(p->host, sizeof(p->host), "%s", gbHostName());
  snprintf(p->vendor, sizeof(p->vendor), "%s", c->dev->vendor);
  p->gpuIndex = -1;
  if (c->dev->identify)
    c->dev->identify(p->gpuUuid, sizeof(p->gpuUuid), p->gpuPci, sizeof(p->gpuPci), &p->gpuIndex);
  p->gpuMps = c->dev->mps ? c->dev->mps() : 0;
  gbCommSettingsResolve(config, c->dev->runKind == gbRunReal, &p->settings, &c->blocking, &c->thresholds,
                        p->problems, sizeof(p->problems));
  splitLabel(p);
  gbSockAddr_t addr;
  GB_CHECK(listenAddress(c, &addr, p->problems, sizeof(p->problems)));
  c->net = gbNetGet(p->settings.transport);
  if (!c->net) c->net = gbNetGet(gbTransportTcp);
  if (c->net->listen(&addr, c->id.secret, gbBootIdHash(&c->id), &c->listener) != gbSuccess ||
      c->net->listenerAddr(c->listener, &p->listenAddr) != gbSuccess) {
    /* Still join the rendezvous, so every rank fails with this text. */
    size_t used = strlen(p->problems);
    snprintf(p->problems + used, sizeof(p->problems) - used, "%scannot listen for peers: %s", used ? "; " : "",
             gbErrorLast());
  }
  return gbSuccess;
}

static gbResult_t groupSetup(gbComm_t c, gbCommGroup_t* g, int tag, const char* name, const int* ranks, int n,
                             const gbProbe_t* probes) {
  snprintf(g->name, sizeof(g->name), "%s", name);
  g->ranks = malloc(sizeof(int) * (size_t)n);
  g->conns = calloc((size_t)n, sizeof(gbNetConn_t*));
  if (!g->ranks || !g->conns) return gbErrorSet(gbSystemError, "out of memory for group %s", name);
  memcpy(g->ranks, ranks, sizeof(int) * (size_t)n);
  int me = -1;
  for (int k = 0; k < n; k++)
    if (ranks[k] == c->rank) me = k;
  g->active = 1;
  gbAlgoGroup_t* a = &g->algo;
  /* Set before the mesh: when it fails, the connections it made are shut
   * down with the cause (so those peers hear who failed) and closed. */
  a->n = n;
  a->me = me;
  gbMeshGroup_t mg = {tag, g->name, n, g->ranks, me};
  GB_CHECK(gbBootMeshConnect(c->net, c->listener, probes, &c->id, c->settings.nsocks, &mg, c->settings.timeoutSec,
                             &c->abortFlag, g->conns));
  a->conns = g->conns;
  a->ranks = g->ranks;
  a->name = g->name;
  a->net = c->net;
  a->timeoutSec = c->settings.timeoutSec;
  a->abortFlag = &c->abortFlag;
  a->ringMinBytes = (size_t)c->settings.ringMinBytes;
  a->pieceBytes = 512 * 1024;
  return gbSuccess;
}

/* split-rail's links: rail i joins the ranks with island index i, islands
 * in leader order, over the world group's connections. */
static gbResult_t railsSetup(gbComm_t c) {
  const gbTopo_t* t = &c->topo;
  int nrails = gbPlanRails(t, c->settings.rails);
  c->rails = calloc((size_t)nrails, sizeof(gbCommGroup_t));
  if (!c->rails) return gbErrorSet(gbSystemError, "out of memory for %d rails", nrails);
  c->nrails = nrails; /* teardown walks c->rails[0..nrails) */
  c->myRail = t->islandIndex < c->nrails ? t->islandIndex : -1;
  for (int i = 0; i < c->nrails; i++) {
    gbCommGroup_t* g = &c->rails[i];
    snprintf(g->name, sizeof(g->name), "rail %d", i);
    g->ranks = malloc(sizeof(int) * (size_t)t->nislands);
    g->conns = calloc((size_t)t->nislands, sizeof(gbNetConn_t*));
    if (!g->ranks || !g->conns) return gbErrorSet(gbSystemError, "out of memory for rail %d", i);
    g->borrowed = 1;
    int me = -1;
    for (int j = 0; j < t->nislands; j++) {
      g->ranks[j] = t->members[j][i];
      if (g->ranks[j] == c->rank) me = j;
      else g->conns[j] = c->world.conns[g->ranks[j]];
    }
    g->active = 1;
    g->algo = c->world.algo;
    g->algo.n = t->nislands;
    g->algo.me = me < 0 ? 0 : me; /* ranks off this rail never use it */
    g->algo.conns = g->conns;
    g->algo.ranks = g->ranks;
    g->algo.name = g->name;
    g->algo.scratch = NULL;
    g->algo.scratchBytes = 0;
    g->algo.bytesSent = 0;
  }
  return gbSuccess;
}

static void onIslandError(void* ctx, gbResult_t res) { gbCommFail((gbComm_t)ctx, res); }
static void onProxyError(void* ctx, gbResult_t res) { gbCommFail((gbComm_t)ctx, res); }
/* An island whose GPUs report neither UUID nor PCI address cannot be checked
 * for two ranks on one GPU: say so (every member of it says the same). */
static void warnUnchecked(gbComm_t c, const gbProbe_t* probes) {
  const gbTopo_t* t = &c->topo;
  for (int k = 0; k < t->islandSize[t->island]; k++) {
    const gbProbe_t* p = &probes[t->members[t->island][k]];
    if (p->runKind == gbRunReal && !p->gpuUuid[0] && !p->gpuPci[0]) {
      GB_WARN("island %s: rank %d's GPU reports neither a UUID nor a PCI address, so the island is not checked for "
              "two ranks on one GPU", t->vendor[t->island], p->rank);
      return;
    }
  }
}

/* A simulated label that names no vendor (a typo such as "nvida") forms
 * an island of its own without complaint: rank 0 says so, once per process. */
static void warnUnknownVendors(gbComm_t c) {
  static atomic_int warned;
  char labels[256], islands[512];
  if (c->rank != 0 || c->settings.splitTest) return;
  int n = gbTopoUnknownVendors(&c->topo, labels, sizeof(labels));
  if (n == 0 || atomic_exchange_explicit(&warned, 1, memory_order_relaxed)) return;
  GB_WARN("vendor label%s %s %s no known vendor (nvidia, amd, intel, cpu), so %s an island of its own; the islands "
          "are %s; check GPUBRIDGE_VENDOR or GPUBRIDGE_VENDORS for a typo (a label of your own is fine where meant)",
          n > 1 ? "s" : "", labels, n > 1 ? "are" : "is", n > 1 ? "each forms" : "it forms",
          gbTopoIslandsText(&c->topo, islands, sizeof(islands)));
}

/* A job with no GPU and no vendor label runs as one island "cpu": rank 0
 * says so, once per process, with how to simulate vendors instead. */
static void sayCpuIsland(gbComm_t c) {
  static atomic_int said;
  if (c->rank != 0 || c->topo.runKind != gbRunCpu || c->topo.nislands != 1) return;
  if (atomic_exchange_explicit(&said, 1, memory_order_relaxed)) return;
  GB_INFO(GB_LOG_INIT, "no GPU and no GPUBRIDGE_VENDOR on any rank: the %d rank%s run%s on the CPU as one island "
          "\"cpu\"; to simulate vendor islands, set GPUBRIDGE_VENDORS (e.g. nvidia:2,amd:2) or gpubridge-run "
          "--vendors", c->nranks, c->nranks > 1 ? "s" : "", c->nranks > 1 ? "" : "s");
}

static void fillPublicTopology(gbComm_t c) {
  gbTopology_t* p = &c->pub;
  p->nranks = c->nranks;
  p->rank = c->rank;
  p->nislands = c->topo.nislands;
  p->island = c->topo.island;
  p->runKind = c->topo.runKind;
  /* What a large all-reduce runs, as the plan decides it (not c->policy,
   * which is auto's choice before sizes count). */
  p->policy = gbPlanTopologyPolicy(c->settings.policy, &c->topo, c->settings.rails, &c->thresholds);
  p->islandOfRank = c->topo.islandOfRank;
  p->leaderOfIsland = c->topo.leaderOfIsland;
  p->islandSize = c->topo.islandSize;
  p->islandVendor = c->topo.vendorNames;
  p->splitTest = c->settings.splitTest;
}

gbResult_t gbCommInitCore(gbComm_t c, int nranks, const gbBootId_t* id, int rank, int localRank,
                          const gbConfig_t* config) {
  gbParamInit();
  gbLogInit();
  gbLogSetRank(rank);
  c->rank = rank;
  c->nranks = nranks;
  c->id = *id;
  c->localRank = localRank;
  if (config) {
    memcpy(&c->config, config, config->size < sizeof(gbConfig_t) ? config->size : sizeof(gbConfig_t));
    c->hasConfig = 1;
  }
  char deviceProblem[256] = "";
  if (gbDeviceGet(&c->dev) != gbSuccess) {
    /* Still join the rendezvous, so every rank fails with this text. */
    snprintf(deviceProblem, sizeof(deviceProblem), "%s", gbErrorLast());
    c->dev = gbDeviceUnusableOps();
  }

  gbProbe_t probe;
  GB_CHECK(fillProbe(c, nranks, rank, localRank, config, &probe));
  if (deviceProblem[0]) {
    size_t used = strlen(probe.problems);
    snprintf(probe.problems + used, sizeof(probe.problems) - used, "%s%s", used ? "; " : "", deviceProblem);
  }
  c->settings = probe.settings;
  /* A GPU's write wakes nobody: the bridge's hand-overs on a GPU poll. */
  c->stageCtx = (gbStageCtx_t){.dev = c->dev, .timeoutSec = c->settings.timeoutSec, .abortFlag = &c->abortFlag,
                               .pollNs = c->dev->hostMemory ? 0 : GB_OS_SLEEP_POLL_NS, .memory = &c->memory};
  if (c->settings.splitTest) {
    char mode[64];
    snprintf(mode, sizeof(mode), "split-test %s %s", c->dev->runKind == gbRunReal ? "real" : "simulated",
             c->dev->vendor);
    gbLogSetMode(mode);
    GB_WARN("GPUBRIDGE_SPLIT_TEST is set: this one-vendor job is relabelled into islands, for testing only");
  }
  GB_INFO(GB_LOG_INIT, "rank %d of %d: %s device, vendor %s, joining the rendezvous", rank, nranks, c->dev->name,
          c->dev->vendor);
  gbProbe_t* probes = NULL;
  gbResult_t exchanged = gbBootExchange(id, &probe, c->settings.timeoutSec, &c->abortFlag, &probes);
  gbBootRootWait(gbBootIdHash(id), gbDeadlineIn(c->settings.timeoutSec), &c->abortFlag);
  GB_CHECK(exchanged);
  gbResult_t res = gbTopoBuild(probes, nranks, rank, &c->topo);
  if (res != gbSuccess) goto done;
  if ((c->peerAddrs = malloc(sizeof(gbSockAddr_t) * (size_t)nranks)) == NULL) {
    res = gbErrorSet(gbSystemError, "out of memory for the listener addresses of %d ranks", nranks);
    goto done;
  }
  for (int r = 0; r < nranks; r++) c->peerAddrs[r] = probes[r].listenAddr;
  c->policy = gbPlanResolvePolicy(c->settings.policy, &c->topo);
  warnUnchecked(c, probes);
  warnUnknownVendors(c);
  sayCpuIsland(c);
  fillPublicTopology(c);
  /* Every rank of a job with an emulated AMD island says so from here on
   * (the emulated ranks already do, from their device). */
  for (int k = 0; k < c->topo.nislands; k++)
    if (strstr(c->topo.vendor[k], "emulated") != NULL && strstr(c->dev->vendor, "emulated") == NULL) {
      char mode[64];
      snprintf(mode, sizeof(mode), "%s %s, job with emulated AMD", c->dev->runKind == gbRunReal ? "real" : "simulated",
               c->dev->vendor);
      gbLogSetMode(mode);
      break;
    }

  const gbTopo_t* t = &c->topo;
  char name[48];
  snprintf(name, sizeof(name), "island %s", t->vendor[t->island]);
  GB_CHECK_GOTO(groupSetup(c, &c->island, GB_TAG_ISLAND, name, t->members[t->island], t->islandSize[t->island], probes),
                res, done);
  /* By device, not label: the emulated-AMD rig's hip device is labelled "amd-emulated". */
  GB_CHECK_GOTO(gbIslandCreate(&c->island.algo, c->dev, onIslandError, c, &c->islandComm), res, done);
  /* The world group serves flat steps, the call check and gbCommSplit; the
   * bridge joins the leaders (one island: the leader alone, so hierarchical
   * still runs); rails reuse the world's connections. */
  int* all = malloc(sizeof(int) * (size_t)nranks);
  if (!all) {
    res = gbErrorSet(gbSystemError, "out of memory for the world group of %d ranks", nranks);
    goto done;
  }
  for (int r = 0; r < nranks; r++) all[r] = r;
  res = groupSetup(c, &c->world, GB_TAG_WORLD, "world", all, nranks, probes);
  free(all);
  if (res != gbSuccess) goto done;
  if (t->isLeader)
    GB_CHECK_GOTO(groupSetup(c, &c->bridge, GB_TAG_BRIDGE, "bridge", t->leaderOfIsland, t->nislands, probes), res,
                  done);
  GB_CHECK_GOTO(railsSetup(c), res, done);
  GB_CHECK_GOTO(c->dev->hostAlloc((void**)&c->checked, sizeof(gbFlag_t)), res, done);
  gbCommFlagsInit(c, c->checked, 1);
  GB_CHECK_GOTO(c->dev->hostAlloc((void**)&c->streamDone, sizeof(gbFlag_t)), res, done);
  gbCommFlagsInit(c, c->streamDone, 1);
  GB_CHECK_GOTO(c->dev->memAlloc(&c->scratchDev, 64), res, done);
  static const char zeros[64];
  GB_CHECK_GOTO(c->dev->memcpyToDevice(c->scratchDev, zeros, sizeof(zeros)), res, done); /* gbBarrier sums it */
  GB_CHECK_GOTO(gbCommTraceCreate(c), res, done);
  gbProxyConfig_t pc = {c->settings.timeoutSec, &c->abortFlag, onProxyError, gbCommTraceOnStep, c,
                        c->stageCtx.pollNs};
  GB_CHECK_GOTO(gbProxyCreate(&pc, &c->proxy), res, done);
  c->stageCtx.proxy = c->proxy;
  GB_CHECK_GOTO(gbCommStagesSetup(c, probes), res, done);
  GB_INFO(GB_LOG_INIT, "rank %d of %d ready: island %d of %d (%s, %d rank%s)%s, policy %s", rank, nranks,
          t->island, t->nislands, t->vendor[t->island], t->islandSize[t->island], t->islandSize[t->island] == 1 ? "" : "s",
          t->isLeader ? ", leader" : "", gbPlanPolicyName(c->policy));
done:
  free(probes);
  return res;
}
