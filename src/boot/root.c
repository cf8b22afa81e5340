#include "boot/root.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/result.h"
#include "boot/probe.h"
#include "boot/topology.h"
#include "boot/validate.h"
#include "net/pending.h"
#include "os/cond.h"

/* When ranks disagree on the number of ranks, wait this much longer for the
 * stragglers, so every started rank hears the same verdict. */
#define DISAGREE_GRACE_SECONDS 2.0
/* After a process reported that it cannot join (or sent a malformed probe),
 * the verdict is certain: wait this long at most for the ranks not yet in,
 * so they hear it too, instead of the whole timeout. */
#define REPORT_GRACE_SECONDS 2.0

/* What a rank sends the root. */
typedef struct {
  gbNetHello_t hello;
  gbProbe_t probe;
} rootMsg_t;

typedef struct {
  int listenFd;
  gbSockAddr_t bound;
  uint8_t secret[GB_NET_SECRET_BYTES];
  uint64_t commHash;
  gbNetPending_t pend; /* connections waiting for their hello and probe */
  int* rankFds;       /* fds of ranks whose probe arrived, in arrival order */
  gbProbe_t* probes;  /* in arrival order */
  int nprobes, cap;
} root_t;

/* The roots this process hosts, until each has sent its verdict. */
#define MAX_ROOTS 64
static pthread_mutex_t rootsLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rootsDone; /* made by rootsInit: its clock is the waits' */
static pthread_once_t rootsOnce = PTHREAD_ONCE_INIT;
static uint64_t runningRoots[MAX_ROOTS];
static int stopAsked[MAX_ROOTS]; /* gbBootRootStop: its id will never reach the ranks */
static int nrunning;

static void rootsInit(void) { gbCondInit(&rootsDone); }

static void rootRegister(uint64_t hash) {
  pthread_once(&rootsOnce, rootsInit);
  pthread_mutex_lock(&rootsLock);
  if (nrunning < MAX_ROOTS) {
    stopAsked[nrunning] = 0;
    runningRoots[nrunning++] = hash;
  }
  pthread_mutex_unlock(&rootsLock);
}

static int rootFind(uint64_t hash) {
  for (int i = 0; i < nrunning; i++)
    if (runningRoots[i] == hash) return i;
  return -1;
}

static void rootFinished(uint64_t hash) {
  pthread_once(&rootsOnce, rootsInit);
  pthread_mutex_lock(&rootsLock);
  int i = rootFind(hash);
  if (i >= 0) {
    runningRoots[i] = runningRoots[--nrunning];
    stopAsked[i] = stopAsked[nrunning];
  }
  pthread_cond_broadcast(&rootsDone);
  pthread_mutex_unlock(&rootsLock);
}

static int rootStopAsked(uint64_t hash) {
  pthread_mutex_lock(&rootsLock);
  int i = rootFind(hash), stop = i >= 0 && stopAsked[i];
  pthread_mutex_unlock(&rootsLock);
  return stop;
}

void gbBootRootStop(uint64_t commHash) {
  pthread_once(&rootsOnce, rootsInit);
  pthread_mutex_lock(&rootsLock);
  int i = rootFind(commHash);
  if (i >= 0) stopAsked[i] = 1;
  pthread_mutex_unlock(&rootsLock);
}

void gbBootRootWait(uint64_t commHash, gbDeadline_t deadline, const atomic_int* abortFlag) {
  pthread_once(&rootsOnce, rootsInit);
  pthread_mutex_lock(&rootsLock);
  while (rootFind(commHash) >= 0 && !gbDeadlinePassed(deadline) &&
         !(abortFlag && atomic_load_explicit(abortFlag, memory_order_acquire))) {
    gbCondWaitMs(&rootsDone, &rootsLock, gbDeadlineRemainingMs(deadline, 50) + 1);
  }
  pthread_mutex_unlock(&rootsLock);
}

/* Room for one more probe; 0 when out of memory. */
static int growProbes(root_t* r) {
  if (r->nprobes < r->cap) return 1;
  int cap = r->cap ? 2 * r->cap : 16;
  gbProbe_t* probes = realloc(r->probes, sizeof(gbProbe_t) * (size_t)cap);
  if (probes) r->probes = probes;
  int* fds = probes ? realloc(r->rankFds, sizeof(int) * (size_t)cap) : NULL;
  if (fds) r->rankFds = fds;
  if (!probes || !fds) return 0;
  r->cap = cap;
  return 1;
}

/* Files a complete probe as a rank's (or a report). */
static const char* file(root_t* r, const gbProbe_t* q, int fd, const gbSockAddr_t* from) {
  if (!growProbes(r)) return "the root is out of memory";
  /* Filed even when malformed: the verdict names it. Nothing of it is used
   * before gbBootProbeCheck says it may be. */
  char why[160], peer[96];
  if (!gbBootProbeCheck(q, why, sizeof(why)))
    GB_WARN("rendezvous root: malformed probe from %s (it holds the job secret): %s",
            gbSockAddrString(from, peer, sizeof(peer)), why);
  else if (q->kind == GB_PROBE_REPORT)
    GB_INFO(GB_LOG_BOOT, "rendezvous root: pid %d on %s (rank %d) reports it cannot join: %s", q->pid, q->host, q->rank,
            q->problems);
  else
    GB_INFO(GB_LOG_BOOT, "rendezvous root: rank %d of %d joined (pid %d on %s)", q->rank, q->nranks, q->pid, q->host);
  r->probes[r->nprobes] = *q;
  r->rankFds[r->nprobes++] = fd;
  return NULL;
}

/* What a process whose hello has the magic but not this job's secret hears
 * before the close, so that a rank given another secret or unique id says
 * why instead of blaming the root: that the secret is wrong, and nothing
 * more (the compare takes constant time; garbage hears nothing at all). */
static const char wrongSecretText[] =
    "the rendezvous root (rank 0's process under a launcher) refused this process: wrong job secret; every rank of "
    "a job must be given the same GPUBRIDGE_JOB_SECRET (unset: the same MASTER_ADDR, MASTER_PORT and launcher job) "
    "or the same unique id (GPUBRIDGE_UNIQUE_ID, the bytes of one gbGetUniqueId)";

static void tellWrongSecret(int fd) {
  /* As a rank hears every verdict: the acknowledgement, then a failed verdict with its text. */
  struct {
    uint32_t ack;
    gbVerdictHeader_t h;
    char text[sizeof(wrongSecretText) - 1];
  } m;
  _Static_assert(offsetof(__typeof__(m), h) == sizeof(uint32_t), "the header follows the acknowledgement at once");
  memset(&m, 0, sizeof(m)); /* the struct's tail padding goes out too: zeros, not the stack */
  m.ack = GB_BOOT_PROBE_ACK;
  m.h = (gbVerdictHeader_t){GB_BOOT_VERDICT_MAGIC, gbInvalidUsage, (uint32_t)sizeof(m.text), 0};
  memcpy(m.text, wrongSecretText, sizeof(m.text));
  char err[128], sink[512];
  /* A few hundred bytes on a fresh socket: its buffer takes them whole. */
  (void)gbSockTrySend(fd, &m, sizeof(m), err, sizeof(err));
  /* What arrived is read (a rank's hello and probe; at most 8 KiB, so a
   * stream of garbage cannot hold the root), so the close sends an end, not
   * a reset that could overtake the text. */
  for (int i = 0; i < 16 && gbSockTryRecv(fd, sink, sizeof(sink), err, sizeof(err)) > 0; i++) {
  }
}

/* What arrived so far must start with the magic and the secret. */
static const char* checkMsg(void* ctx, const gbNetPendingConn_t* c, char* why, size_t len) {
  root_t* r = ctx;
  gbNetHello_t h;
  memcpy(&h, c->msg, sizeof(h));
  if (c->got >= sizeof(uint64_t) && h.magic != GB_NET_HELLO_MAGIC) return "bad magic (garbage or another protocol)";
  if (c->got >= offsetof(gbNetHello_t, commHash) && !gbNetSecretEqual(h.secret, r->secret)) {
    tellWrongSecret(c->fd);
    return "wrong job secret (told so; check the unique id / GPUBRIDGE_JOB_SECRET)";
  }
  return NULL;
}

/* Tells the rank at once that its probe reached this job's root (a fresh
 * socket's send buffer takes 4 bytes whole); NULL when it went out. */
static const char* acknowledge(int fd) {
  uint32_t ack = GB_BOOT_PROBE_ACK;
  char err[128];
  return gbSockTrySend(fd, &ack, sizeof(ack), err, sizeof(err)) == (ssize_t)sizeof(ack)
             ? NULL
             : "closed before its probe was acknowledged";
}

/* A complete hello and probe: acknowledges it and files it as a rank's. */
static const char* takeMsg(void* ctx, const gbNetPendingConn_t* c, char* why, size_t len) {
  root_t* r = ctx;
  rootMsg_t m;
  memcpy(&m, c->msg, sizeof(m));
  if (m.hello.commHash != r->commHash || m.hello.tag != GB_BOOT_ROOT_TAG) return "hello for another communicator";
  if (m.probe.magic != GB_PROBE_MAGIC || m.probe.version != GB_PROBE_VERSION)
    return "probe of another gpubridge wire version (install the same gpubridge on every node)";
  const char* unsent = acknowledge(c->fd);
  return unsent ? unsent : file(r, &m.probe, c->fd, &c->peer);
}

static void closedWhy(const gbNetPendingConn_t* c, const char* err, char* why, size_t len) {
  snprintf(why, len, "closed after %zu of the %zu bytes of a hello and probe (%s)", c->got, sizeof(rootMsg_t), err);
}

static void idleWhy(const gbNetPendingConn_t* c, char* why, size_t len) {
  snprintf(why, len, "no hello in time");
}

static const gbNetPendingOps_t msgOps = {
    sizeof(rootMsg_t), "a whole hello and probe", "too many connections waiting (a flood?)", "rendezvous root: ",
    " (not a rank of this job)", checkMsg, takeMsg, closedWhy, idleWhy};

/* The timeout of the first probe that may be trusted (0: none yet). */
static int trustedTimeout(const root_t* r) {
  char why[160];
  for (int i = 0; i < r->nprobes; i++)
    if (gbBootProbeCheck(&r->probes[i], why, sizeof(why))) return r->probes[i].settings.timeoutSec;
  return 0;
}

/* Whether enough probes are in: all the ranks claimed, or (when ranks
 * disagree on the count) the smallest claim after a grace period, or once a
 * process reported that it cannot join (or sent a malformed probe) everyone
 * else, or what came within a grace period. */
static int gathered(const root_t* r, int64_t* disagreeSince, int64_t* faultSince) {
  int good = 0, faulty = 0, lo = 0, hi = 0, claim = 0;
  char why[160];
  for (int i = 0; i < r->nprobes; i++) {
    const gbProbe_t* q = &r->probes[i];
    int wellFormed = gbBootProbeCheck(q, why, sizeof(why));
    if (!wellFormed || q->kind == GB_PROBE_REPORT) {
      faulty++;
      if (wellFormed && q->nranks > claim) claim = q->nranks; /* a report's world size, when it knew one */
      continue;
    }
    if (good == 0 || q->nranks < lo) lo = q->nranks;
    if (good == 0 || q->nranks > hi) hi = q->nranks;
    good++;
  }
  int64_t now = gbClockNowNs();
  if (faulty) {
    if (*faultSince == 0) *faultSince = now;
    int want = good > 0 ? hi : claim;
    if (want > 0 && good + faulty >= want) return 1;
    return now - *faultSince > (int64_t)(REPORT_GRACE_SECONDS * 1e9);
  }
  if (good == 0) return 0;
  if (good >= hi) return 1;
  if (lo == hi || good < lo) return 0;
  if (*disagreeSince == 0) *disagreeSince = now;
  return now - *disagreeSince > (int64_t)(DISAGREE_GRACE_SECONDS * 1e9);
}

static void sendVerdict(root_t* r, int timedOut) {
  int timeoutSec = trustedTimeout(r);
  if (timeoutSec <= 0) timeoutSec = 30;
  gbProbe_t* sorted = calloc(GB_MAX_RANKS, sizeof(gbProbe_t));
  char text[4096];
  gbValidateInput_t in = {r->probes, r->nprobes, timedOut, timeoutSec};
  gbResult_t res = sorted ? gbBootValidate(&in, sorted, GB_MAX_RANKS, text, sizeof(text)) : gbSystemError;
  if (!sorted) snprintf(text, sizeof(text), "rendezvous root: out of memory");
  gbVerdictHeader_t h = {GB_BOOT_VERDICT_MAGIC, res, (uint32_t)(res == gbSuccess ? 0 : strlen(text)),
                         (uint32_t)(res == gbSuccess ? r->probes[0].nranks : 0)};
  if (res == gbSuccess)
    GB_INFO(GB_LOG_BOOT, "rendezvous root: %d ranks joined; sending the topology", r->nprobes);
  else
    GB_INFO(GB_LOG_BOOT, "rendezvous root: verdict for %d ranks: %s", r->nprobes, text);
  /* A rank that died meanwhile must not stop the others hearing the verdict. */
  gbDeadline_t d = gbDeadlineIn(timeoutSec);
  for (int i = 0; i < r->nprobes; i++) {
    int fd = r->rankFds[i];
    if (gbSockSendAll(fd, &h, sizeof(h), d, NULL, "verdict") == gbSuccess && h.textLen)
      (void)gbSockSendAll(fd, text, h.textLen, d, NULL, "verdict text");
    if (h.nprobes) (void)gbSockSendAll(fd, sorted, sizeof(gbProbe_t) * h.nprobes, d, NULL, "verdict probes");
  }
  free(sorted);
}

static void* rootMain(void* arg) {
  root_t* r = arg;
  int64_t disagreeSince = 0, faultSince = 0;
  gbDeadline_t deadline = {INT64_MAX};
  int timedOut = 0;
  for (;;) {
    int timeoutSec = trustedTimeout(r);
    if (timeoutSec > 0 && deadline.ns == INT64_MAX) deadline = gbDeadlineIn(timeoutSec);
    if (gathered(r, &disagreeSince, &faultSince)) break;
    if (gbDeadlinePassed(deadline) || rootStopAsked(r->commHash)) {
      timedOut = 1;
      break;
    }
    (void)gbNetPendingPoll(&r->pend, gbClockNowNs(), 50);
    gbNetPendingServe(&r->pend, gbClockNowNs());
  }
  /* Stop listening before the verdict goes out: a rank that retries init
   * at once must find the next root (or nothing, and retry), never this one
   * on its way out. */
  gbSockClose(r->listenFd);
  gbNetPendingFini(&r->pend, "the rendezvous ended before it sent a whole hello and probe");
  sendVerdict(r, timedOut);
  for (int i = 0; i < r->nprobes; i++) gbSockClose(r->rankFds[i]);
  free(r->probes);
  free(r->rankFds);
  rootFinished(r->commHash);
  free(r);
  return NULL;
}

gbResult_t gbBootRootStart(const gbSockAddr_t* bindAddr, const uint8_t secret[GB_NET_SECRET_BYTES],
                           uint64_t commHash, gbSockAddr_t* boundOut) {
  root_t* r = calloc(1, sizeof(root_t));
  if (!r) return gbErrorSet(gbSystemError, "rendezvous root: out of memory");
  memcpy(r->secret, secret, GB_NET_SECRET_BYTES);
  r->commHash = commHash;
  gbResult_t res = gbNetPendingListen(&r->pend, &msgOps, r, bindAddr, &r->listenFd, &r->bound);
  if (res != gbSuccess) {
    int e = errno; /* the bind's cause, for the caller */
    free(r);
    errno = e;
    return res;
  }
  *boundOut = r->bound;
  rootRegister(commHash);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&t, &attr, rootMain, r);
  pthread_attr_destroy(&attr);
  if (err) {
    rootFinished(commHash);
    gbSockClose(r->listenFd);
    gbNetPendingFini(&r->pend, NULL);
    free(r);
    return gbErrorSet(gbSystemError, "rendezvous root: cannot start its thread: %s", strerror(err));
  }
  char buf[96]; /* from *boundOut: the detached thread may have freed r already */
  GB_INFO(GB_LOG_BOOT, "rendezvous root listening on %s", gbSockAddrString(boundOut, buf, sizeof(buf)));
  return gbSuccess;
}
