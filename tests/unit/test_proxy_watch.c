/* proxy/: watches (gbProxyOp_t.watch) are kept aside once reached, so a step
 * posted after an unfinished watch runs without waiting for it (the next
 * call's check behind this call's watches); watches still end in their
 * order; a failing watch drops every watch and step after it with its error;
 * a watch whose ready flag never comes times out; gbProxyDrain waits for
 * watches too. Expected orders come from the posts, not from the proxy. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/result.h"
#include "check.h"
#include "proxy/proxy.h"

#define WAIT_S 10.0

typedef struct {
  atomic_int release; /* a watch ends once this is set (gbSuccess + 1 + result) */
  atomic_int looks;
  atomic_int ranAt;   /* a plain step: the order in which it ran (1-based) */
} probe_t;

static atomic_int order;
static atomic_int errors;
static gbResult_t firstError;

static void onError(void* ctx, gbResult_t res) {
  (void)ctx;
  if (atomic_fetch_add(&errors, 1) == 0) firstError = res;
}

static gbResult_t watchFn(void* arg) {
  probe_t* p = arg;
  atomic_fetch_add(&p->looks, 1);
  int r = atomic_load(&p->release);
  if (r == 0) return gbInProgress;
  if (r == 1) return gbSuccess;
  return gbErrorSet((gbResult_t)(r - 1), "test: the watch failed");
}

static gbResult_t stepFn(void* arg) {
  probe_t* p = arg;
  atomic_store(&p->ranAt, atomic_fetch_add(&order, 1) + 1);
  return gbSuccess;
}

static void post(gbProxy_t* px, gbResult_t (*fn)(void*), probe_t* p, int watch, gbFlag_t* ready, gbFlag_t* done) {
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.fn = fn;
  op.arg = p;
  op.ready = ready;
  op.readyValue = 1;
  op.done = done;
  op.doneValue = 1;
  op.watch = watch;
  CHECK(gbProxyPost(px, &op) == gbSuccess, "post: %s", gbErrorLast());
}

static uint64_t valueOf(gbFlag_t* f) { return atomic_load(&f->value); }
static int errorOf(gbFlag_t* f) { return atomic_load(&f->error); }

static gbProxy_t* newProxy(double timeoutSec) {
  atomic_store(&errors, 0);
  firstError = gbSuccess;
  gbProxyConfig_t cfg = {timeoutSec, NULL, onError, NULL, NULL, 0};
  gbProxy_t* px = NULL;
  CHECK(gbProxyCreate(&cfg, &px) == gbSuccess, "gbProxyCreate: %s", gbErrorLast());
  return px;
}

/* A step behind an unfinished watch runs; the watch ends after it, when released. */
static void testStepPassesWatch(void) {
  gbProxy_t* px = newProxy(30);
  probe_t w = {0}, s = {0};
  gbFlag_t wDone = {0}, sDone = {0};
  post(px, watchFn, &w, 1, NULL, &wDone);
  post(px, stepFn, &s, 0, NULL, &sDone);
  CHECK(gbFlagWaitHost(&sDone, 1, WAIT_S, NULL) == gbSuccess, "the step behind an unfinished watch did not run");
  CHECK(valueOf(&wDone) == 0, "the watch ended before it was released");
  CHECK(atomic_load(&w.looks) >= 1, "the watch was never looked at");
  atomic_store(&w.release, 1);
  CHECK(gbFlagWaitHost(&wDone, 1, WAIT_S, NULL) == gbSuccess && errorOf(&wDone) == 0,
        "the released watch did not end well (value %llu, error %d)", (unsigned long long)valueOf(&wDone),
        errorOf(&wDone));
  CHECK(gbProxyDrain(px, gbDeadlineIn(WAIT_S)) == gbSuccess, "drain: %s", gbErrorLast());
  CHECK(atomic_load(&errors) == 0, "%d errors reported", atomic_load(&errors));
  gbProxyDestroy(px);
}

/* Watches end in their order: one that could end waits for the one before. */
static void testWatchesInOrder(void) {
  gbProxy_t* px = newProxy(30);
  probe_t w1 = {0}, w2 = {0}, s = {0};
  gbFlag_t d1 = {0}, d2 = {0}, ds = {0};
  atomic_store(&w2.release, 1);
  post(px, watchFn, &w1, 1, NULL, &d1);
  post(px, watchFn, &w2, 1, NULL, &d2);
  post(px, stepFn, &s, 0, NULL, &ds);
  CHECK(gbFlagWaitHost(&ds, 1, WAIT_S, NULL) == gbSuccess, "the step did not run");
  CHECK(valueOf(&d2) == 0 && atomic_load(&w2.looks) == 0,
        "the second watch ended (or was looked at, %d times) before the first", atomic_load(&w2.looks));
  atomic_store(&w1.release, 1);
  CHECK(gbFlagWaitHost(&d2, 1, WAIT_S, NULL) == gbSuccess && valueOf(&d1) == 1, "the watches did not both end");
  gbProxyDestroy(px);
}

/* A failing watch drops the watches and steps after it with its error, once. */
static void testFailureDropsTheRest(void) {
  gbProxy_t* px = newProxy(30);
  probe_t w1 = {0}, w2 = {0}, s = {0};
  gbFlag_t d1 = {0}, d2 = {0}, ds = {0};
  post(px, watchFn, &w1, 1, NULL, &d1);
  post(px, watchFn, &w2, 1, NULL, &d2);
  atomic_store(&w1.release, 1 + (int)gbRemoteError);
  CHECK(gbFlagWaitHost(&d2, 1, WAIT_S, NULL) == gbRemoteError, "the watch behind a failed one did not fail with it");
  CHECK(errorOf(&d1) == (int)gbRemoteError, "the failed watch's done flag carries error %d", errorOf(&d1));
  post(px, stepFn, &s, 0, NULL, &ds);
  CHECK(gbFlagWaitHost(&ds, 1, WAIT_S, NULL) == gbRemoteError && atomic_load(&s.ranAt) == 0,
        "a step posted after the failure ran or did not fail (ran at %d)", atomic_load(&s.ranAt));
  CHECK(atomic_load(&errors) == 1 && firstError == gbRemoteError, "%d errors reported, the first %d",
        atomic_load(&errors), (int)firstError);
  CHECK(gbProxyDrain(px, gbDeadlineIn(WAIT_S)) == gbRemoteError, "drain did not return the failure");
  gbProxyDestroy(px);
}

/* A watch whose ready flag never comes times out (timeout + the grace), and
 * a step behind it still ran at once. */
static void testReadyTimeout(void) {
  gbProxy_t* px = newProxy(0.2);
  probe_t w = {0}, s = {0};
  gbFlag_t ready = {0}, d = {0}, ds = {0};
  int64_t t0 = gbClockNowNs();
  post(px, watchFn, &w, 1, &ready, &d);
  post(px, stepFn, &s, 0, NULL, &ds);
  CHECK(gbFlagWaitHost(&ds, 1, WAIT_S, NULL) == gbSuccess, "the step behind a watch waiting for its input did not run");
  gbResult_t r = gbFlagWaitHost(&d, 1, WAIT_S + GB_PROXY_STEP_GRACE_S, NULL);
  double s_ = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(r == gbTimeout, "a watch whose input never came ended with %d", (int)r);
  CHECK(s_ >= 0.2 + GB_PROXY_STEP_GRACE_S - 0.01 && s_ < WAIT_S, "it timed out after %.2f s (expected %.2f)", s_,
        0.2 + GB_PROXY_STEP_GRACE_S);
  CHECK(atomic_load(&w.looks) == 0, "its fn ran %d times without its input", atomic_load(&w.looks));
  gbProxyDestroy(px);
}

static void* releaseLater(void* arg) {
  struct timespec ts = {0, 50 * 1000000L};
  nanosleep(&ts, NULL);
  atomic_store(&((probe_t*)arg)->release, 1);
  return NULL;
}

/* gbProxyDrain returns only once the watches ended. */
static void testDrainWaits(void) {
  gbProxy_t* px = newProxy(30);
  probe_t w = {0};
  gbFlag_t d = {0};
  post(px, watchFn, &w, 1, NULL, &d);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, releaseLater, &w) == 0, "pthread_create");
  CHECK(gbProxyDrain(px, gbDeadlineIn(WAIT_S)) == gbSuccess, "drain: %s", gbErrorLast());
  CHECK(valueOf(&d) == 1, "drain returned before the watch ended");
  pthread_join(t, NULL);
  gbProxyDestroy(px);
}

int main(void) {
  testStepPassesWatch();
  testWatchesInOrder();
  testFailureDropsTheRest();
  testReadyTimeout();
  testDrainWaits();
  if (failures) fprintf(stderr, "%d checks failed\n", failures);
  else printf("test_proxy_watch: all checks passed\n");
  return failures != 0;
}
