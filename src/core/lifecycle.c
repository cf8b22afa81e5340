/* Failure, validity and teardown of a communicator. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/result.h"
#include "core/comm.h"
#include "core/trace.h"

static void shutdownGroup(gbComm_t c, gbCommGroup_t* g) {
  if (!g->active) return;
  for (int k = 0; k < g->algo.n; k++)
    if (g->conns[k]) c->net->shutdown(g->conns[k], &c->cause);
}

/* What the peers hear with the shutdown: who failed first. A failure this
 * thread's net requests saw names its peer (closed without a cause,
 * stalled), or passes on the cause a peer relayed, unchanged, so it still
 * names the rank that failed and who saw it. Anything else (an abort, a
 * verdict, a stream or island error) is this rank's own. */
static void settleCause(gbComm_t c, gbResult_t res) {
  gbNetCause_t k;
  if (!gbNetFailureCause(c->errorText, &k)) k = (gbNetCause_t){.faultRank = -1, .seenBy = -1};
  if (k.seenBy < 0) {
    k.faultRank = k.faultRank < 0 ? c->rank : k.faultRank;
    k.seenBy = c->rank;
    k.code = res;
    /* Cut to fit; the rest stays in this rank's log. */
    size_t n = strnlen(c->errorText, sizeof(k.text) - 1);
    memcpy(k.text, c->errorText, n);
    k.text[n] = '\0';
    if (n == sizeof(k.text) - 1) memcpy(k.text + n - 3, "...", 3);
  }
  c->cause = k;
}

/* Under errorLock, with the cause settled. */
static void tellPeers(gbComm_t c) {
  shutdownGroup(c, &c->island);
  shutdownGroup(c, &c->bridge);
  shutdownGroup(c, &c->world);
  /* Peers whose connections this rank filed but never took (or that
   * connect before teardown) hear the cause in the answer, not a close. */
  if (c->listener) c->net->listenerFail(c->listener, &c->cause);
  gbCommStagesFail(c);
}

void gbCommInitFailTell(gbComm_t c) {
  pthread_mutex_lock(&c->errorLock);
  tellPeers(c);
  pthread_mutex_unlock(&c->errorLock);
}

void gbCommFail(gbComm_t c, gbResult_t res) { gbCommFailFor(c, res, NULL); }

void gbCommFailFor(gbComm_t c, gbResult_t res, const char* why) {
  int first = 0;
  pthread_mutex_lock(&c->errorLock);
  if (gbCommAsyncError(c) == gbSuccess) {
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    c->failWallNs = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
    gbCommSetAsyncError(c, res, gbErrorLast());
    settleCause(c, res);
    first = 1;
    GB_INFO(GB_LOG_INIT, "communicator failed (%s); closing its connections so peers stop too", gbResultString(res));
  }
  atomic_store_explicit(&c->abortFlag, 1, memory_order_release);
  /* Once start-up ended (done, or failed: its groups stay as they are
   * until teardown) the peers hear who failed; a start-up still running
   * tells them when it ends (gbCommInitEnd). */
  if (atomic_load_explicit(&c->initState, memory_order_acquire) != GB_INIT_RUNNING) tellPeers(c);
  pthread_mutex_unlock(&c->errorLock);
  /* The connections are shut, so peers hear at once; then this rank's dump.
   * On the proxy this runs before the failed step releases its stream. */
  if (!first || !c->trace || atomic_load_explicit(&c->initState, memory_order_acquire) != GB_INIT_DONE) return;
  if (!why) why = res == gbTimeout ? "timeout" : c->cause.faultRank != c->rank ? "peer-failure" : "error";
  gbTraceDumpOnTrouble(c->trace, why);
}

static void logTraffic(const gbCommGroup_t* g) {
  if (g->active)
    GB_INFO(GB_LOG_NET, "traffic: %s sent %llu bytes", g->name, (unsigned long long)g->algo.bytesSent);
}

/* Closes g's connections (a borrowed group's are its owner's). */
static void closeConns(gbComm_t c, gbCommGroup_t* g) {
  if (g->conns && !g->borrowed)
    for (int k = 0; k < g->algo.n; k++) {
      if (g->conns[k]) c->net->close(g->conns[k]);
      g->conns[k] = NULL;
    }
}

static void freeGroup(gbComm_t c, gbCommGroup_t* g) {
  closeConns(c, g);
  gbAlgoGroupFree(&g->algo);
  free(g->conns);
  free(g->ranks);
  memset(g, 0, sizeof(*g));
}

void gbCommFree(gbComm_t c) {
  /* The handle dies first: from here on every call with it is refused
   * (core/registry.c), whatever this teardown does with the memory. Of two
   * threads tearing it down (an abort and a destroy), the one that took it
   * out of the registry goes on. */
  if (!gbCommUnregister(c)) return;
  if (c->initThreadStarted) pthread_join(c->initThread, NULL);
  /* Threads inside calls on it (gbCommEnter) leave: their waits see the
   * abort flag, or end at their deadlines. Nothing is freed under them: if
   * one stays, the communicator is left allocated. */
  gbDeadline_t leave = gbDeadlineIn((double)c->settings.timeoutSec + 5.0);
  while (atomic_load_explicit(&c->callsInFlight, memory_order_acquire) > 0 && !gbDeadlinePassed(leave)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  int inside = atomic_load_explicit(&c->callsInFlight, memory_order_acquire);
  if (inside > 0) {
    GB_WARN("rank %d: %d call(s) on the communicator did not return within %d s of its teardown; it is left "
            "allocated rather than freed under them", c->rank, inside, c->settings.timeoutSec + 5);
    return;
  }
  int failed = gbCommAsyncError(c) != gbSuccess || atomic_load_explicit(&c->abortFlag, memory_order_relaxed);
  /* A failed island is aborted before the streams are drained: a vendor
   * library's kernels may wait for a dead peer, and nothing else ends them. */
  if (failed && c->islandComm && c->islandComm->ops->abort) c->islandComm->ops->abort(c->islandComm);
  /* Work this comm enqueued may still sit in streams: let it finish (every
   * step has a deadline, and aborted steps fail at once) before freeing what
   * it uses. If it does not, leak rather than free memory it still uses. */
  int drained = 1;
  if (c->streamDone && c->dev->launchHostFn)
    drained = gbFlagWaitHost(c->streamDone, c->streamPosted, c->settings.timeoutSec + 5, NULL) == gbSuccess;
  else if (c->dev && c->dev->deviceSynchronize && (c->seq > 0 || c->p2pSeq > 0)) /* send/recv-only comms too */
    drained = c->dev->deviceSynchronize() == gbSuccess;
  gbProxyDestroy(c->proxy);
  if (!drained) {
    gbTraceWatchStop(c->trace); /* the ring stays: stream work may still stamp it */
    GB_WARN("communicator teardown: stream work of this communicator did not finish; its island, staging and "
            "connections are left allocated");
    c->magic = GB_COMM_DEAD;
    return;
  }
  logTraffic(&c->world);
  logTraffic(&c->bridge);
  logTraffic(&c->island);
  if (c->rails && c->myRail >= 0) logTraffic(&c->rails[c->myRail]);
  if (c->islandComm) c->islandComm->ops->destroy(c->islandComm);
  /* Connections first: a transport whose close drives a worker shared by
   * the communicator's connections (UCX) moves requests a failed wait left
   * posted, which may point into the stages' memory. */
  for (int i = 0; i < c->nrails; i++) closeConns(c, &c->rails[i]);
  closeConns(c, &c->island);
  closeConns(c, &c->bridge);
  closeConns(c, &c->world);
  gbCommStagesFree(c);
  for (int i = 0; i < c->nrails; i++) freeGroup(c, &c->rails[i]);
  free(c->rails);
  freeGroup(c, &c->island);
  freeGroup(c, &c->bridge);
  freeGroup(c, &c->world);
  if (c->listener) c->net->listenerClose(c->listener);
  free(c->peerAddrs);
  if (c->dev) {
    if (c->streamDone) c->dev->hostFree(c->streamDone);
    if (c->scratchDev) c->dev->memFree(c->scratchDev);
    if (c->checked) c->dev->hostFree(c->checked);
    while (c->cells) {
      gbCommCell_t* next = c->cells->next;
      c->dev->hostFree(c->cells->mem);
      free(c->cells);
      c->cells = next;
    }
  }
  gbTraceDestroy(c->trace);
  c->trace = NULL;
  gbTopoFree(&c->topo);
  pthread_mutex_destroy(&c->errorLock);
  gbCommRelease(c);
}
