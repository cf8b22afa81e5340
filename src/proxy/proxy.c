#include "proxy/proxy.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/result.h"
#include "os/cond.h"

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
};

static void freeOp(gbProxyOp_t* op) {
  if (op->freeArg) op->freeArg(op->arg);
  op->arg = NULL;
}

static void traceEvent(gbProxy_t* p, const gbProxyOp_t* op, int event) {
  if (op->trace && p->cfg.onStep) p->cfg.onStep(p->cfg.ctx, op, event, gbSuccess, 0);
}

static gbResult_t runOp(gbProxy_t* p, const gbProxyOp_t* op) {
  /* The stream's own steps (an island step waiting on a stopped peer) time
   * out after the timeout and name the peer at fault; this wait, begun
   * earlier, gives them GB_PROXY_STEP_GRACE_S more so that it never speaks
   * first and blames nobody. */
  double limit = p->cfg.timeoutSec + GB_PROXY_STEP_GRACE_S;
  gbResult_t res = op->ready ? gbFlagWaitHost(op->ready, op->readyValue, limit, p->cfg.abortFlag) : gbSuccess;
  if (res != gbSuccess) {
    traceEvent(p, op, GB_PROXY_STEP_DROPPED);
    if (res == gbTimeout)
      return gbErrorSet(gbTimeout, "proxy: collective #%llu: this rank's stream did not reach the collective within "
                                   "%.0f s (the stream is blocked or busy: an island peer may be stopped, or earlier "
                                   "work on the stream has not finished; raise GPUBRIDGE_TIMEOUT if the job is just "
                                   "slow)",
                        (unsigned long long)op->seq, limit);
    return res;
  }
  if (!op->trace || !p->cfg.onStep) return op->fn(op->arg);
  p->cfg.onStep(p->cfg.ctx, op, GB_PROXY_STEP_READY, gbSuccess, 0);
  uint64_t before = op->group ? op->group->bytesSent : 0;
  res = op->fn(op->arg);
  p->cfg.onStep(p->cfg.ctx, op, GB_PROXY_STEP_END, res, op->group ? op->group->bytesSent - before : 0);
  return res;
}

static void* proxyMain(void* arg) {
  gbProxy_t* p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->len == 0 && !p->stop) pthread_cond_wait(&p->wake, &p->lock);
    if (p->len == 0 && p->stop) break;
    gbProxyOp_t op = p->ring[p->head];
    p->head = (p->head + 1) % p->cap;
    p->len--;
    p->busy = 1;
    gbResult_t failed = p->failed;
    pthread_mutex_unlock(&p->lock);

    if (failed != gbSuccess) traceEvent(p, &op, GB_PROXY_STEP_DROPPED);
    gbResult_t res = failed != gbSuccess ? failed : runOp(p, &op);
    if (res != gbSuccess && failed == gbSuccess) p->cfg.onError(p->cfg.ctx, res);
    if (op.done) gbFlagSetHost(op.done, op.doneValue, res == gbSuccess ? 0 : (int)res);
    freeOp(&op);

    pthread_mutex_lock(&p->lock);
    if (res != gbSuccess && p->failed == gbSuccess) p->failed = res;
    p->busy = 0;
    if (p->len == 0) pthread_cond_broadcast(&p->drained);
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
  pthread_cond_init(&p->wake, NULL);
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
  p->ring[(p->head + p->len) % p->cap] = *op;
  p->len++;
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  return gbSuccess;
}

gbResult_t gbProxyDrain(gbProxy_t* p, gbDeadline_t deadline) {
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&p->lock);
  while ((p->len > 0 || p->busy) && res == gbSuccess) {
    if (p->cfg.abortFlag && atomic_load_explicit(p->cfg.abortFlag, memory_order_acquire)) {
      res = gbErrorSet(gbRemoteError, "gbCommFinalize: the communicator was aborted");
      break;
    }
    int ms = gbDeadlineRemainingMs(deadline, 100);
    if (ms == 0 && gbDeadlinePassed(deadline)) {
      res = gbErrorSet(gbTimeout, "gbCommFinalize: %zu host steps still pending after %.0f s (a peer is stopped or "
                                  "its streams were not run; raise GPUBRIDGE_TIMEOUT if the job is just slow)",
                       p->len + (size_t)p->busy, p->cfg.timeoutSec);
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
  free(p);
}
