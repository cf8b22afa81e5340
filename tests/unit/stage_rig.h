/* The rig the stage tests share: n members, threads of one test process,
 * each with the host device, a stream, a proxy and a group joined by TCP
 * loopback (loopback_group.h), running one body with a stage of its own.
 * A member's failure is recorded (the first text wins) and aborts the
 * others' waits, so a broken stage ends the test with a message, not a hang. */
#ifndef GB_TESTS_UNIT_STAGE_RIG_H
#define GB_TESTS_UNIT_STAGE_RIG_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/result.h"
#include "device/device.h"
#include "stage/stage.h"
#include "unit/loopback_group.h"

#define RIG_MAX 8
#define RIG_TIMEOUT_SEC 30.0

typedef struct rig rig_t;

typedef struct {
  rig_t* rig;
  int me, n;
  gbAlgoGroup_t g;
  gbStageCtx_t ctx;
  void* stream;
  long checks;
} rigMember_t;

struct rig {
  int n;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  unsigned long gen;
  atomic_int abortFlag;
  char failure[512];
  gbSockAddr_t addrs[RIG_MAX];
  /* The body every member runs; 1 when it passed. */
  int (*body)(rigMember_t* m);
};

static inline void rigFail(rig_t* r, const char* fmt, ...) {
  pthread_mutex_lock(&r->mu);
  if (r->failure[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->failure, sizeof r->failure, fmt, ap);
    va_end(ap);
  }
  r->abortFlag = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Counts a check; a failed one is recorded with the member's index. */
#define RIG_CHECK(m, cond, ...)                                 \
  do {                                                          \
    (m)->checks++;                                              \
    if (!(cond)) {                                              \
      char text_[400];                                          \
      snprintf(text_, sizeof text_, __VA_ARGS__);               \
      rigFail((m)->rig, "member %d: %s", (m)->me, text_);       \
      return 0;                                                 \
    }                                                           \
  } while (0)

/* A barrier that gives up on abort or after the deadline. */
static inline int rigBarrier(rig_t* r) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)RIG_TIMEOUT_SEC;
  pthread_mutex_lock(&r->mu);
  unsigned long gen = r->gen;
  if (++r->arrived == r->n) {
    r->arrived = 0;
    r->gen++;
    pthread_cond_broadcast(&r->cv);
  }
  int rc = 0;
  while (r->gen == gen && !r->abortFlag && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&r->cv, &r->mu, &until);
  int ok = r->gen != gen;
  pthread_mutex_unlock(&r->mu);
  if (!ok && !r->abortFlag) rigFail(r, "barrier timed out after %.0f s", RIG_TIMEOUT_SEC);
  return ok;
}

static inline void rigOnProxyError(void* ctx, gbResult_t res) {
  rigMember_t* m = ctx;
  rigFail(m->rig, "member %d: a proxy step failed (%d): %s", m->me, (int)res, gbErrorLast());
}

/* The stream's work and the proxy's, all done: 1, else the failure recorded. */
static inline int rigSync(rigMember_t* m) {
  gbResult_t res = m->ctx.dev->streamSynchronize(m->stream);
  if (res != gbSuccess) rigFail(m->rig, "member %d: the stream failed (%d): %s", m->me, (int)res, gbErrorLast());
  if (res == gbSuccess) res = gbProxyDrain(m->ctx.proxy, gbDeadlineIn(RIG_TIMEOUT_SEC));
  if (res != gbSuccess) rigFail(m->rig, "member %d: the proxy did not drain (%d)", m->me, (int)res);
  return res == gbSuccess;
}

static inline void* rigMemberMain(void* arg) {
  rigMember_t* m = arg;
  rig_t* r = m->rig;
  static const uint8_t secret[GB_NET_SECRET_BYTES] = {5, 7, 1, 3};
  const gbNetOps_t* net = &gbNetTcpOps;
  gbNetListener_t* lis = NULL;
  gbNetConn_t* conns[RIG_MAX] = {0};
  int ranks[RIG_MAX];
  gbProxy_t* proxy = NULL;
  memset(&m->g, 0, sizeof m->g);
  const loopbackSpec_t spec = {net, secret, 0x57a9e0u + (uint64_t)r->n, 5, "stage test", r->n, m->me,
                               RIG_TIMEOUT_SEC, &r->abortFlag};
  char why[128];
  const gbDeviceOps* dev = gbDeviceHostOps();
  if (!loopbackListen(&spec, &lis, &r->addrs[m->me])) {
    rigFail(r, "member %d: cannot listen on loopback", m->me);
    goto done;
  }
  if (!rigBarrier(r)) goto done;
  if (!loopbackJoin(&spec, lis, r->addrs, conns, ranks, &m->g, why, sizeof why)) {
    rigFail(r, "%s", why);
    goto done;
  }
  m->g.pieceBytes = 4096;
  m->g.ringMinBytes = 1 << 20;
  gbProxyConfig_t pc = {RIG_TIMEOUT_SEC, &r->abortFlag, rigOnProxyError, NULL, m, 0};
  if (gbProxyCreate(&pc, &proxy) != gbSuccess || dev->streamCreate(&m->stream) != gbSuccess) {
    rigFail(r, "member %d: no proxy or stream: %s", m->me, gbErrorLast());
    goto done;
  }
  m->ctx = (gbStageCtx_t){.dev = dev, .proxy = proxy, .timeoutSec = RIG_TIMEOUT_SEC, .abortFlag = &r->abortFlag};
  if (r->body(m)) rigBarrier(r); /* the others keep their connections until every body is done */
done:
  if (m->stream) dev->streamDestroy(m->stream);
  gbProxyDestroy(proxy);
  gbAlgoGroupFree(&m->g);
  for (int i = 0; i < r->n; i++)
    if (conns[i]) net->close(conns[i]);
  if (lis) net->listenerClose(lis);
  return NULL;
}

/* Runs body on n members; prints the outcome under name, 1 when it passed. */
static inline int rigRun(const char* name, int n, int (*body)(rigMember_t* m)) {
  rig_t r;
  memset(&r, 0, sizeof r);
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  r.n = n;
  r.body = body;
  rigMember_t members[RIG_MAX];
  pthread_t threads[RIG_MAX];
  for (int i = 0; i < n; i++) {
    members[i] = (rigMember_t){.rig = &r, .me = i, .n = n};
    if (pthread_create(&threads[i], NULL, rigMemberMain, &members[i]) != 0) {
      fprintf(stderr, "%s: cannot start thread %d\n", name, i);
      exit(2);
    }
  }
  long checks = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(threads[i], NULL);
    checks += members[i].checks;
  }
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
  if (r.failure[0]) {
    fprintf(stderr, "%s: FAIL (n=%d): %s\n", name, n, r.failure);
    return 0;
  }
  printf("%s: n=%d ok, %ld checks\n", name, n, checks);
  return 1;
}

/* The slots of the member's group (shared when every member names the same
 * host, remote when each names its own); 0 with the failure recorded when
 * they could not be set up. */
static inline int rigSlots(rigMember_t* m, int sameHost, int channels, gbStage_t** out) {
  int pids[RIG_MAX];
  uint64_t hosts[RIG_MAX];
  for (int k = 0; k < m->n; k++) {
    pids[k] = (int)getpid();
    hosts[k] = sameHost ? 1 : 100 + (uint64_t)k;
  }
  gbStageSlotsSpec_t spec = {.group = &m->g, .pids = pids, .hostIds = hosts, .nslots = 4, .slotBytes = 64 << 10,
                             .channels = channels, .channelBudget = 1 << 20, .enabled = 1};
  gbResult_t res = gbStageSlotsSetup(&m->ctx, &spec, out);
  if (res != gbSuccess || !*out) {
    rigFail(m->rig, "member %d: no slots (%d): %s", m->me, (int)res, gbErrorLast());
    return 0;
  }
  return 1;
}

#endif
