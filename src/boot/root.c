#include "boot/root.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
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

#define MAX_PENDING 1024
#define STRANGER_SECONDS 10.0
/* When ranks disagree on the number of ranks, wait this much longer for the
 * stragglers, so every started rank hears the same verdict. */
#define DISAGREE_GRACE_SECONDS 2.0

typedef struct {
  int fd;
  gbSockAddr_t peer;
  size_t got;
  int64_t since;
  struct {
    gbNetHello_t hello;
    gbProbe_t probe;
  } msg;
} pending_t;

typedef struct {
  int listenFd;
  gbSockAddr_t bound;
  uint8_t secret[GB_NET_SECRET_BYTES];
  uint64_t commHash;
  pending_t pending[MAX_PENDING];
  int npending;
  int* rankFds;       /* fds of ranks whose probe arrived, in arrival order */
  gbProbe_t* probes;  /* in arrival order */
  int nprobes, cap;
} root_t;

/* The roots this process hosts, until each has sent its verdict. */
#define MAX_ROOTS 64
static pthread_mutex_t rootsLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rootsDone = PTHREAD_COND_INITIALIZER;
static uint64_t runningRoots[MAX_ROOTS];
static int nrunning;

static void rootRegister(uint64_t hash) {
  pthread_mutex_lock(&rootsLock);
  if (nrunning < MAX_ROOTS) runningRoots[nrunning++] = hash;
  pthread_mutex_unlock(&rootsLock);
}

static int rootFind(uint64_t hash) {
  for (int i = 0; i < nrunning; i++)
    if (runningRoots[i] == hash) return i;
  return -1;
}

static void rootFinished(uint64_t hash) {
  pthread_mutex_lock(&rootsLock);
  int i = rootFind(hash);
  if (i >= 0) runningRoots[i] = runningRoots[--nrunning];
  pthread_cond_broadcast(&rootsDone);
  pthread_mutex_unlock(&rootsLock);
}

void gbBootRootWait(uint64_t commHash, gbDeadline_t deadline, const volatile int* abortFlag) {
  pthread_mutex_lock(&rootsLock);
  while (rootFind(commHash) >= 0 && !gbDeadlinePassed(deadline) &&
         !(abortFlag && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE))) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)gbDeadlineRemainingMs(deadline, 50) * 1000000L + 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&rootsDone, &rootsLock, &ts);
  }
  pthread_mutex_unlock(&rootsLock);
}

static void refuse(root_t* r, int i, const char* why) {
  char peer[96], here[96];
  GB_WARN("rendezvous root: refused a connection from %s on %s: %s (not a rank of this job)",
          gbSockAddrString(&r->pending[i].peer, peer, sizeof(peer)), gbSockAddrString(&r->bound, here, sizeof(here)),
          why);
  gbSockClose(r->pending[i].fd);
  r->pending[i] = r->pending[--r->npending];
}

static int secretMatches(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < GB_NET_SECRET_BYTES; i++) diff |= a[i] ^ b[i];
  return diff == 0;
}

/* Reads what pending connection i has sent; files it as a rank once its
 * hello and probe are complete and valid. */
static void advance(root_t* r, int i) {
  pending_t* p = &r->pending[i];
  char err[128];
  while (p->got < sizeof(p->msg)) {
    ssize_t n = gbSockTryRecv(p->fd, (char*)&p->msg + p->got, sizeof(p->msg) - p->got, err, sizeof(err));
    if (n < 0) {
      refuse(r, i, p->got ? "closed before sending a whole hello and probe" : err);
      return;
    }
    if (n == 0) break;
    p->got += (size_t)n;
    if (p->got >= sizeof(uint64_t) && p->msg.hello.magic != GB_NET_HELLO_MAGIC) {
      refuse(r, i, "bad magic (garbage or another protocol)");
      return;
    }
    if (p->got >= offsetof(gbNetHello_t, commHash) && !secretMatches(p->msg.hello.secret, r->secret)) {
      refuse(r, i, "wrong job secret (check the unique id / GPUBRIDGE_JOB_SECRET)");
      return;
    }
  }
  if (p->got < sizeof(p->msg)) return;
  if (p->msg.hello.commHash != r->commHash || p->msg.hello.tag != GB_BOOT_ROOT_TAG) {
    refuse(r, i, "hello for another communicator");
    return;
  }
  if (p->msg.probe.magic != GB_PROBE_MAGIC || p->msg.probe.version != GB_PROBE_VERSION) {
    refuse(r, i, "probe of another gpubridge wire version (install the same gpubridge on every node)");
    return;
  }
  if (r->nprobes == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    gbProbe_t* probes = realloc(r->probes, sizeof(gbProbe_t) * (size_t)cap);
    if (probes) r->probes = probes;
    int* fds = probes ? realloc(r->rankFds, sizeof(int) * (size_t)cap) : NULL;
    if (fds) r->rankFds = fds;
    if (!probes || !fds) {
      refuse(r, i, "the root is out of memory");
      return;
    }
    r->cap = cap;
  }
  p->msg.probe.problems[sizeof(p->msg.probe.problems) - 1] = '\0';
  p->msg.probe.host[sizeof(p->msg.probe.host) - 1] = '\0';
  p->msg.probe.vendor[sizeof(p->msg.probe.vendor) - 1] = '\0';
  r->probes[r->nprobes] = p->msg.probe;
  r->rankFds[r->nprobes++] = p->fd;
  GB_INFO(GB_LOG_BOOT, "rendezvous root: rank %d of %d joined (pid %d on %s)", p->msg.probe.rank,
          p->msg.probe.nranks, p->msg.probe.pid, p->msg.probe.host);
  r->pending[i] = r->pending[--r->npending];
}

static void acceptAll(root_t* r) {
  for (;;) {
    int fd;
    gbSockAddr_t peer;
    if (gbSockAccept(r->listenFd, &fd, &peer) != gbSuccess || fd < 0) return;
    if (r->npending == MAX_PENDING) {
      gbSockClose(fd);
      continue;
    }
    pending_t* p = &r->pending[r->npending++];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->peer = peer;
    p->since = gbClockNowNs();
  }
}

/* Whether enough probes are in: all the ranks claimed, or (when ranks
 * disagree on the count) the smallest claim after a grace period. */
static int gathered(const root_t* r, int64_t* disagreeSince) {
  if (r->nprobes == 0) return 0;
  int lo = r->probes[0].nranks, hi = lo;
  for (int i = 1; i < r->nprobes; i++) {
    if (r->probes[i].nranks < lo) lo = r->probes[i].nranks;
    if (r->probes[i].nranks > hi) hi = r->probes[i].nranks;
  }
  if (r->nprobes >= hi) return 1;
  if (lo == hi || r->nprobes < lo) return 0;
  if (*disagreeSince == 0) *disagreeSince = gbClockNowNs();
  return gbClockNowNs() - *disagreeSince > (int64_t)(DISAGREE_GRACE_SECONDS * 1e9);
}

static void sendVerdict(root_t* r, int timedOut) {
  int timeoutSec = r->probes[0].settings.timeoutSec;
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
  gbDeadline_t d = gbDeadlineIn(timeoutSec > 0 ? timeoutSec : 30);
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
  int64_t disagreeSince = 0;
  gbDeadline_t deadline = {INT64_MAX};
  static __thread struct pollfd fds[MAX_PENDING + 1];
  int timedOut = 0;
  for (;;) {
    if (r->nprobes > 0 && deadline.ns == INT64_MAX)
      deadline = gbDeadlineIn(r->probes[0].settings.timeoutSec);
    if (gathered(r, &disagreeSince)) break;
    if (gbDeadlinePassed(deadline)) {
      timedOut = 1;
      break;
    }
    int nfds = 0;
    fds[nfds++] = (struct pollfd){r->listenFd, POLLIN, 0};
    for (int i = 0; i < r->npending; i++) fds[nfds++] = (struct pollfd){r->pending[i].fd, POLLIN, 0};
    (void)poll(fds, (nfds_t)nfds, 50);
    acceptAll(r);
    for (int i = r->npending - 1; i >= 0; i--) {
      if (gbClockNowNs() - r->pending[i].since > (int64_t)(STRANGER_SECONDS * 1e9)) refuse(r, i, "no hello in time");
      else advance(r, i);
    }
  }
  sendVerdict(r, timedOut);
  for (int i = 0; i < r->nprobes; i++) gbSockClose(r->rankFds[i]);
  for (int i = 0; i < r->npending; i++) gbSockClose(r->pending[i].fd);
  gbSockClose(r->listenFd);
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
  gbResult_t res = gbSockListen(bindAddr, &r->listenFd, &r->bound);
  if (res != gbSuccess) {
    free(r);
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
    free(r);
    return gbErrorSet(gbSystemError, "rendezvous root: cannot start its thread: %s", strerror(err));
  }
  char buf[96];
  GB_INFO(GB_LOG_BOOT, "rendezvous root listening on %s", gbSockAddrString(&r->bound, buf, sizeof(buf)));
  return gbSuccess;
}
