#include "proxy/proxy.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/result.h"
#include "os/backoff.h"
#include "os/cond.h"

/* A watch set aside (proxy thread only). */
typedef struct {
  gbProxyOp_t op;
  int64_t since;   /* when it was first looked at (0: not yet): its ready flag's deadline counts from here, as a
                      step's from when the proxy reaches it */
  int started;     /* its ready flag was in and its fn runs */
} watch_t;

struct gbProxy {
  gbProxyConfig_t cfg;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;    /* work posted, or stop */
  pthread_cond_t drained; /* queue empty and idle */
  gbProxyOp_t* ring;
  size_t cap, head, len;
  int busy;
  int stop;
  gbResult_t failed;
  watch_t* watches; /* set aside, in the order posted (proxy thread only) */
  size_t nwatch, watchCap;
  size_t watching;  /* nwatch, for gbProxyDrain (under lock) */
};

static void freeOp(gbProxyOp_t* op) {
  if (op->freeArg) op->freeArg(op->arg);
  op->arg = NULL;
}

static void traceEvent(gbProxy_t* p, const gbProxyOp_t* op, int event) {
  if (op->trace && p->cfg.onStep) p->cfg.onStep(p->cfg.ctx, op, event, gbSuccess, 0);
}

/* The stream's own steps (an island step waiting on a stopped peer) time
 * out after the timeout and name the peer at fault; a step's wait for its
 * ready flag, begun earlier, gives them GB_PROXY_STEP_GRACE_S more so that
 * it never speaks first and blames nobody. */
static double readyLimitSec(const gbProxy_t* p) { return p->cfg.timeoutSec + GB_PROXY_STEP_GRACE_S; }

static gbResult_t notReady(gbProxy_t* p, const gbProxyOp_t* op, gbResult_t res) {
  traceEvent(p, op, GB_PROXY_STEP_DROPPED);
  if (res == gbTimeout)
    return gbErrorSet(gbTimeout, "proxy: collective #%llu: this rank's stream did not reach the collective within "
                                 "%.0f s (the stream is blocked or busy: an island peer may be stopped, or earlier "
                                 "work on the stream has not finished; raise GPUBRIDGE_TIMEOUT if the job is just "
                                 "slow)",
                      (unsigned long long)op->seq, readyLimitSec(p));
  return res;
}

/* fn once, with the trace's READY (first: first run) and END (unless it is
 * still in progress). */
static gbResult_t runFn(gbProxy_t* p, const gbProxyOp_t* op, int first) {
  if (!op->trace || !p->cfg.onStep) return op->fn(op->arg);
  if (first) p->cfg.onStep(p->cfg.ctx, op, GB_PROXY_STEP_READY, gbSuccess, 0);
  uint64_t before = op->group ? op->group->bytesSent : 0;
  gbResult_t res = op->fn(op->arg);
  if (res != gbInProgress)
    p->cfg.onStep(p->cfg.ctx, op, GB_PROXY_STEP_END, res, op->group ? op->group->bytesSent - before : 0);
  return res;
}

static gbResult_t runOp(gbProxy_t* p, const gbProxyOp_t* op) {
  gbResult_t res = op->ready ? gbFlagWaitHost(op->ready, op->readyValue, readyLimitSec(p), p->cfg.abortFlag) : gbSuccess;
  if (res != gbSuccess) return notReady(p, op, res);
  return runFn(p, op, 1);
}

/* A step's end: the first failure is told, its done flag set, its arg freed. */
static void endOp(gbProxy_t* p, gbProxyOp_t* op, gbResult_t res, gbResult_t failedBefore) {
  if (res != gbSuccess && failedBefore == gbSuccess) p->cfg.onError(p->cfg.ctx, res);
  if (op->done) gbFlagSetHost(op->done, op->doneValue, res == gbSuccess ? 0 : (int)res);
  freeOp(op);
  pthread_mutex_lock(&p->lock);
  if (res != gbSuccess && p->failed == gbSuccess) p->failed = res;
  pthread_mutex_unlock(&p->lock);
}

/* ----------------------------------------------------------------- watches */

static void setWatching(gbProxy_t* p) {
  pthread_mutex_lock(&p->lock);
  p->watching = p->nwatch;
  if (p->len == 0 && !p->busy && p->nwatch == 0) pthread_cond_broadcast(&p->drained);
  pthread_mutex_unlock(&p->lock);
}

static gbResult_t setAside(gbProxy_t* p, const gbProxyOp_t* op) {
  if (p->nwatch == p->watchCap) {
    size_t cap = p->watchCap ? p->watchCap * 2 : 64;
    watch_t* w = realloc(p->watches, cap * sizeof(watch_t));
    if (!w) return gbErrorSet(gbSystemError, "proxy: out of memory for %zu watches", cap);
    p->watches = w;
    p->watchCap = cap;
  }
  p->watches[p->nwatch++] = (watch_t){.op = *op};
  setWatching(p);
  return gbSuccess;
}

/* One look at a watch: 1 when it ended, *res saying how. */
static int lookAt(gbProxy_t* p, watch_t* w, gbResult_t* res) {
  int first = !w->started;
  if (w->since == 0) w->since = gbClockNowNs();
  if (first && w->op.ready) {
    gbResult_t r = gbSuccess;
    if (!gbFlagTestHost(w->op.ready, w->op.readyValue, p->cfg.abortFlag, &r)) {
      if (gbClockNowNs() - w->since <= (int64_t)(readyLimitSec(p) * 1e9)) return 0;
      r = gbTimeout;
    }
    if (r != gbSuccess) {
      *res = notReady(p, &w->op, r);
      return 1;
    }
  }
  w->started = 1;
  *res = runFn(p, &w->op, first);
  return *res != gbInProgress;
}

/* Looks at the watches in order until one goes on (they end in order, as
 * steps do: a look costs one watch, however many wait behind it); after a
 * failure (theirs or a step's) drops them all with it. Returns how many
 * ended. */
static size_t lookAtWatches(gbProxy_t* p) {
  size_t ended = 0;
  while (ended < p->nwatch) {
    watch_t* w = &p->watches[ended];
    pthread_mutex_lock(&p->lock);
    gbResult_t failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    gbResult_t res = failed;
    if (failed != gbSuccess) traceEvent(p, &w->op, GB_PROXY_STEP_DROPPED);
    else if (!lookAt(p, w, &res)) break;
    endOp(p, &w->op, res, failed);
    ended++;
  }
  if (ended) {
    p->nwatch -= ended;
    memmove(p->watches, p->watches + ended, p->nwatch * sizeof(watch_t));
    setWatching(p);
  }
  return ended;
}

/* With only watches left (lock held): a nap that a posted step other than
 * a watch ends at once. Nothing waits on a watch's end, so the nap is long where the
 * proxy's looks would take a core from the streams it watches (host memory:
 * ranks may fill the cores; `make bench-gloo` on 2 cores, 64 MiB: naps from
 * 20 us 15.4 ms a call; 1 ms naps, with no wake-up for a posted watch,
 * 9.8-11.1 ms against 9.3-10.4 before watches), and cfg.pollNs where it is
 * set (a GPU's: its host has cores to spare). */
static void napLocked(gbProxy_t* p) {
  int64_t ns = p->cfg.pollNs > 0 ? p->cfg.pollNs : GB_OS_SLEEP_MAX_NS;
  (void)gbCondWaitUntil(&p->wake, &p->lock, gbDeadlineIn((double)ns * 1e-9));
}

static void* proxyMain(void* arg) {
  gbProxy_t* p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->len == 0 && p->nwatch == 0 && !p->stop) pthread_cond_wait(&p->wake, &p->lock);
    if (p->len == 0 && p->nwatch == 0) break; /* stopped */
    if (p->len == 0) {
      pthread_mutex_unlock(&p->lock);
      size_t ended = lookAtWatches(p);
      pthread_mutex_lock(&p->lock);
      if (!ended && p->len == 0) napLocked(p);
      continue;
    }
    gbProxyOp_t op = p->ring[p->head];
    p->head = (p->head + 1) % p->cap;
    p->len--;
    p->busy = 1;
    gbResult_t failed = p->failed;
    pthread_mutex_unlock(&p->lock);

    if (failed != gbSuccess) {
      traceEvent(p, &op, GB_PROXY_STEP_DROPPED);
      endOp(p, &op, failed, failed);
    } else if (op.watch) {
      gbResult_t res = setAside(p, &op);
      if (res != gbSuccess) {
        traceEvent(p, &op, GB_PROXY_STEP_DROPPED);
        endOp(p, &op, res, failed);
      }
    } else {
      gbResult_t res = runOp(p, &op);
      /* Before a failure is told (the flight recorder dumps then), the
       * watches that ended meanwhile end: the calls they watched are done. */
      if (res != gbSuccess) (void)lookAtWatches(p);
      endOp(p, &op, res, failed);
    }
    (void)lookAtWatches(p);

    pthread_mutex_lock(&p->lock);
    p->busy = 0;
    if (p->len == 0 && p->nwatch == 0) pthread_cond_broadcast(&p->drained);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

gbResult_t gbProxyCreate(const gbProxyConfig_t* cfg, gbProxy_t** out) {
  gbProxy_t* p = calloc(1, sizeof(gbProxy_t));
  if (!p) return gbErrorSet(gbSystemError, "proxy: out of memory");
  p->cfg = *cfg;
  p->cap = 256;
  p->ring = malloc(sizeof(gbProxyOp_t) * p->cap);
  pthread_mutex_init(&p->lock, NULL);
  gbCondInit(&p->wake); /* the nap beside watches waits on it with a deadline */
  gbCondInit(&p->drained); /* gbProxyDrain waits on it with a deadline */
  int err = p->ring ? pthread_create(&p->thread, NULL, proxyMain, p) : ENOMEM;
  if (err) {
    free(p->ring);
    free(p);
    return gbErrorSet(gbSystemError, "proxy: cannot start its thread: %s", strerror(err));
  }
  *out = p;
  return gbSuccess;
}

gbResult_t gbProxyPost(gbProxy_t* p, const gbProxyOp_t* op) {
  traceEvent(p, op, GB_PROXY_STEP_POSTED); /* before the proxy can end it */
  pthread_mutex_lock(&p->lock);
  if (p->len == p->cap) {
    gbProxyOp_t* ring = malloc(sizeof(gbProxyOp_t) * p->cap * 2);
    if (!ring) {
      pthread_mutex_unlock(&p->lock);
      traceEvent(p, op, GB_PROXY_STEP_DROPPED);
      return gbErrorSet(gbSystemError, "proxy: out of memory for %zu queued steps", p->cap * 2);
    }
    for (size_t i = 0; i < p->len; i++) ring[i] = p->ring[(p->head + i) % p->cap];
    free(p->ring);
    p->ring = ring;
    p->head = 0;
    p->cap *= 2;
  }
  /* A watch is no hurry: a proxy napping beside other watches takes it at
   * the nap's end (each call posts one per chunk; waking for each costs the
   * streams' cores). */
  int idle = p->len == 0 && !p->busy && p->watching == 0;
  p->ring[(p->head + p->len) % p->cap] = *op;
  p->len++;
  if (!op->watch || idle) pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  return gbSuccess;
}

gbResult_t gbProxyDrain(gbProxy_t* p, gbDeadline_t deadline) {
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&p->lock);
  while ((p->len > 0 || p->busy || p->watching > 0) && res == gbSuccess) {
    if (p->cfg.abortFlag && atomic_load_explicit(p->cfg.abortFlag, memory_order_acquire)) {
      res = gbErrorSet(gbRemoteError, "gbCommFinalize: the communicator was aborted");
      break;
    }
    int ms = gbDeadlineRemainingMs(deadline, 100);
    if (ms == 0 && gbDeadlinePassed(deadline)) {
      res = gbErrorSet(gbTimeout, "gbCommFinalize: %zu host steps still pending after %.0f s (a peer is stopped or "
                                  "its streams were not run; raise GPUBRIDGE_TIMEOUT if the job is just slow)",
                       p->len + (size_t)p->busy + p->watching, p->cfg.timeoutSec);
      break;
    }
    gbCondWaitMs(&p->drained, &p->lock, ms);
  }
  if (res == gbSuccess) res = p->failed;
  pthread_mutex_unlock(&p->lock);
  return res;
}

void gbProxyDestroy(gbProxy_t* p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->drained);
  for (size_t i = 0; i < p->len; i++) freeOp(&p->ring[(p->head + i) % p->cap]);
  free(p->ring);
  free(p->watches);
  free(p);
}
