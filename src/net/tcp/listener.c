/* The TCP listener: accepts connections without ever blocking, reads each
 * one's hello bit by bit (a slow or silent stranger holds up nobody), refuses
 * strangers with a warning, and files good sockets by (srcRank, tag) until
 * accept() collects them. A thread of its own serves it for its whole life,
 * so strangers are refused within SERVE_MS whatever the communicator does
 * (collectives that keep the proxy busy, a stalled step); the lock guards
 * everything below it in struct gbNetListener. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/result.h"
#include "net/pending.h"
#include "net/tcp/tcp.h"
#include "os/cond.h"

#define POLL_CAP_MS 50
/* The serving thread's longest sleep: a silent stranger's deadline or a
 * paused accept is looked at again within this. */
#define SERVE_MS 100

typedef struct {
  int srcRank, tag, nsocks, count;
  int refused; /* socket 0 has the failed listener's refusal */
  int fds[GB_NET_TCP_MAX_SOCKS];
} filed_t;

struct gbNetListener {
  int fd;
  gbSockAddr_t addr;
  char addrText[80];
  uint8_t secret[GB_NET_SECRET_BYTES];
  uint64_t commHash;
  int wakeFd;          /* eventfd: tells the serving thread to stop */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t filedCond; /* a connection was completely filed */
  int stop;
  gbNetPending_t pend; /* connections waiting for their hello */
  filed_t* filed;
  int nfiled, filedCap;
  int failed;          /* this rank failed: filed connections hear cause, never accept */
  gbNetCause_t cause;
};

static void* serveMain(void* arg);
static void refuseFiled(gbNetListener_t* l);
static const gbNetPendingOps_t helloOps;

static void freeListener(gbNetListener_t* l) {
  gbNetPendingFini(&l->pend, NULL);
  free(l);
}

gbResult_t gbNetTcpListen(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash,
                          gbNetListener_t** out) {
  gbNetListener_t* l = calloc(1, sizeof(*l));
  if (l == NULL) return gbErrorSet(gbSystemError, "out of memory creating a listener");
  gbResult_t res = gbNetPendingListen(&l->pend, &helloOps, l, addr, &l->fd, &l->addr);
  if (res != gbSuccess) {
    free(l);
    return res;
  }
  memcpy(l->secret, secret, GB_NET_SECRET_BYTES);
  l->commHash = commHash;
  gbSockAddrString(&l->addr, l->addrText, sizeof(l->addrText));
  char eb[128];
  l->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->wakeFd < 0) {
    int e = errno;
    gbSockClose(l->fd);
    freeListener(l);
    return gbErrorSet(gbSystemError, "cannot create the listener's wake-up descriptor: %s", strerror_r(e, eb, sizeof(eb)));
  }
  pthread_mutex_init(&l->lock, NULL);
  gbCondInit(&l->filedCond);
  int err = pthread_create(&l->thread, NULL, serveMain, l);
  if (err != 0) {
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->filedCond);
    close(l->wakeFd);
    gbSockClose(l->fd);
    res = gbErrorSet(gbSystemError, "cannot start the thread that serves the listener on %s: %s",
                     l->addrText, strerror_r(err, eb, sizeof(eb)));
    freeListener(l);
    return res;
  }
  GB_INFO(GB_LOG_NET, "listening for peers on %s", l->addrText);
  *out = l;
  return gbSuccess;
}

gbResult_t gbNetTcpListenerAddr(gbNetListener_t* l, gbSockAddr_t* out) {
  *out = l->addr;
  return gbSuccess;
}

static filed_t* findFiled(gbNetListener_t* l, int srcRank, int tag) {
  for (int i = 0; i < l->nfiled; i++)
    if (l->filed[i].srcRank == srcRank && l->filed[i].tag == tag) return &l->filed[i];
  return NULL;
}

/* Why a complete hello is refused, or NULL when it may be filed. */
static const char* helloWhy(gbNetListener_t* l, const gbNetHello_t* h, char* why, size_t len) {
  if (h->magic != GB_NET_HELLO_MAGIC) return "bad magic (not a gpubridge peer, or garbage)";
  if (!gbNetSecretEqual(h->secret, l->secret))
    return "wrong job secret (not a peer of this job; check GPUBRIDGE_JOB_SECRET / the unique id)";
  if (h->commHash != l->commHash) {
    snprintf(why, len, "hello for another communicator (hash %016llx, this one is %016llx)",
             (unsigned long long)h->commHash, (unsigned long long)l->commHash);
    return why;
  }
  if (h->srcRank < 0 || h->nsocks < 1 || h->nsocks > GB_NET_TCP_MAX_SOCKS || h->sockIndex < 0 ||
      h->sockIndex >= h->nsocks) {
    snprintf(why, len, "bad hello fields (srcRank %d, sockIndex %d, nsocks %d; need srcRank >= 0, "
             "0 <= sockIndex < nsocks <= %d)", (int)h->srcRank, (int)h->sockIndex, (int)h->nsocks,
             GB_NET_TCP_MAX_SOCKS);
    return why;
  }
  filed_t* f = findFiled(l, h->srcRank, h->tag);
  if (f != NULL && f->nsocks != h->nsocks) {
    snprintf(why, len, "rank %d announced %d sockets for tag %d, an earlier socket %d",
             (int)h->srcRank, (int)h->nsocks, (int)h->tag, f->nsocks);
    return why;
  }
  if (f != NULL && f->fds[h->sockIndex] >= 0) {
    snprintf(why, len, "duplicate socket %d of rank %d for tag %d (is rank %d running twice?)",
             (int)h->sockIndex, (int)h->srcRank, (int)h->tag, (int)h->srcRank);
    return why;
  }
  return NULL;
}

/* The entry of (srcRank, tag), new when none is filed yet; NULL: no memory. */
static filed_t* fileEntry(gbNetListener_t* l, const gbNetHello_t* h) {
  filed_t* f = findFiled(l, h->srcRank, h->tag);
  if (f != NULL) return f;
  if (l->nfiled == l->filedCap) {
    int cap = l->filedCap ? 2 * l->filedCap : 8;
    filed_t* nf = realloc(l->filed, (size_t)cap * sizeof(*nf));
    if (nf == NULL) return NULL;
    l->filed = nf;
    l->filedCap = cap;
  }
  f = &l->filed[l->nfiled++];
  f->srcRank = h->srcRank;
  f->tag = h->tag;
  f->nsocks = h->nsocks;
  f->count = 0;
  f->refused = 0;
  for (int i = 0; i < GB_NET_TCP_MAX_SOCKS; i++) f->fds[i] = -1;
  return f;
}

/* A failed listener answers every filed connection's socket 0 with its
 * cause, once (answer.c); the sockets stay filed until the close. */
static void refuseFiled(gbNetListener_t* l) {
  if (!l->failed) return;
  for (int i = 0; i < l->nfiled; i++) {
    filed_t* f = &l->filed[i];
    if (!f->refused && f->fds[0] >= 0) {
      gbNetTcpAnswerRefuse(f->fds[0], &l->cause);
      f->refused = 1;
    }
  }
}

void gbNetTcpListenerFail(gbNetListener_t* l, const gbNetCause_t* cause) {
  if (l == NULL || cause == NULL) return;
  pthread_mutex_lock(&l->lock);
  if (!l->failed) {
    l->failed = 1;
    l->cause = *cause;
    refuseFiled(l);
  }
  pthread_mutex_unlock(&l->lock);
}

/* Garbage is refused as soon as the magic is wrong, not after 10 s. */
static const char* checkHello(void* ctx, const gbNetPendingConn_t* c, char* why, size_t len) {
  gbNetHello_t h;
  memcpy(&h, c->msg, sizeof(h));
  return c->got >= sizeof(uint64_t) && h.magic != GB_NET_HELLO_MAGIC ? "bad magic (not a gpubridge peer, or garbage)"
                                                                      : NULL;
}

/* A complete hello: check it, then file the socket. */
static const char* takeHello(void* ctx, const gbNetPendingConn_t* c, char* why, size_t len) {
  gbNetListener_t* l = ctx;
  gbNetHello_t h;
  memcpy(&h, c->msg, sizeof(h));
  const char* bad = helloWhy(l, &h, why, len);
  if (bad != NULL) return bad;
  filed_t* f = fileEntry(l, &h);
  if (f == NULL) return "out of memory filing the connection";
  f->fds[h.sockIndex] = c->fd;
  f->count++;
  GB_TRACE(GB_LOG_NET, "rank %d tag %d: socket %d of %d arrived", f->srcRank, f->tag, (int)h.sockIndex, f->nsocks);
  if (f->count == f->nsocks) pthread_cond_broadcast(&l->filedCond);
  refuseFiled(l);
  return NULL;
}

static void closedWhy(const gbNetPendingConn_t* c, const char* err, char* why, size_t len) {
  snprintf(why, len, "closed before a full hello (%zu of %zu bytes; %s)", c->got, sizeof(gbNetHello_t), err);
}

static void idleWhy(const gbNetPendingConn_t* c, char* why, size_t len) {
  snprintf(why, len, "no hello within 10 s (%zu of %zu bytes arrived)", c->got, sizeof(gbNetHello_t));
}

static const gbNetPendingOps_t helloOps = {
    sizeof(gbNetHello_t), "a full hello", "too many connections waiting for their hello (a flood?)", "", "",
    checkHello, takeHello, closedWhy, idleWhy};

/* One round of serving, under the lock; never blocks. */
static gbResult_t serveLocked(gbNetListener_t* l) {
  int64_t now = gbClockNowNs();
  /* One poll tells which sockets have something, so a serve costs one
   * system call plus one per socket that has news. */
  if (gbNetPendingPoll(&l->pend, now, 0) < 0 && errno != EINTR) {
    char eb[128];
    return gbErrorSet(gbSystemError, "poll on the listener %s: %s", l->addrText, strerror_r(errno, eb, sizeof(eb)));
  }
  gbNetPendingServe(&l->pend, now);
  return gbSuccess;
}

static void* serveMain(void* arg) {
  gbNetListener_t* l = arg;
  struct pollfd* fds = NULL;
  int fdsCap = 0;
  pthread_mutex_lock(&l->lock);
  while (!l->stop) {
    (void)serveLocked(l); /* a failed poll was logged; the next round tries again */
    int n = 1 + l->pend.n;
    if (n + 1 > fdsCap) {
      struct pollfd* nf = realloc(fds, sizeof(*fds) * (size_t)(n + 1));
      if (nf != NULL) {
        fds = nf;
        fdsCap = n + 1;
      }
    }
    int count = 0, timeoutMs = SERVE_MS;
    if (fds != NULL && n + 1 <= fdsCap) {
      /* A copy to sleep on, so the lock is free while this thread waits. */
      memcpy(fds, l->pend.pfd, sizeof(*fds) * (size_t)n);
      fds[n] = (struct pollfd){l->wakeFd, POLLIN, 0};
      count = n + 1;
    }
    timeoutMs = gbNetPendingSleepMs(&l->pend, gbClockNowNs(), timeoutMs);
    pthread_mutex_unlock(&l->lock);
    if (poll(fds, (nfds_t)count, timeoutMs) < 0 && errno != EINTR) {
      /* A poll that fails at once (no memory) would spin: wait a round. */
      struct timespec pause = {0, SERVE_MS * 1000000L};
      nanosleep(&pause, NULL);
    }
    pthread_mutex_lock(&l->lock);
  }
  pthread_mutex_unlock(&l->lock);
  free(fds);
  return NULL;
}

gbResult_t gbNetTcpListenerServe(gbNetListener_t* l) {
  pthread_mutex_lock(&l->lock);
  gbResult_t res = serveLocked(l);
  pthread_mutex_unlock(&l->lock);
  return res;
}

static const char* secsText(double s, char* buf, size_t len) {
  snprintf(buf, len, "%.3g", s);
  return buf;
}

gbResult_t gbNetTcpAccept(gbNetListener_t* l, int srcRank, int tag, gbNetLabel_t label,
                          gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out) {
  int64_t start = gbClockNowNs();
  const char* group = label.group ? label.group : "net";
  *out = NULL;
  pthread_mutex_lock(&l->lock);
  for (;;) {
    gbResult_t res = serveLocked(l);
    if (res != gbSuccess) {
      pthread_mutex_unlock(&l->lock);
      return res;
    }
    filed_t* f = findFiled(l, srcRank, tag);
    filed_t* told = findFiled(l, srcRank, GB_NET_TAG_TELL);
    gbNetCause_t k;
    if (told != NULL && gbNetTcpToldOn(told->fds[0], &k)) {
      pthread_mutex_unlock(&l->lock);
      if (k.faultRank == srcRank)
        res = gbErrorSet(gbRemoteError, "%s: rank %d failed before it connected to this rank: %s", group, srcRank,
                         k.text);
      else if (k.seenBy == srcRank)
        res = gbErrorSet(gbRemoteError, "%s: rank %d failed (seen by rank %d, which told this rank instead of "
                         "connecting: %s)", group, k.faultRank, srcRank, k.text);
      else
        res = gbErrorSet(gbRemoteError, "%s: rank %d failed (seen by rank %d: %s; rank %d told this rank instead of "
                         "connecting)", group, k.faultRank, k.seenBy, k.text, srcRank);
      gbNetNoteFailure(gbErrorLast(), &k);
      return res;
    }
    if (f != NULL && f->count == f->nsocks) {
      filed_t got = *f;
      *f = l->filed[--l->nfiled];
      pthread_mutex_unlock(&l->lock);
      GB_CHECK(gbNetTcpConnCreate(got.fds, got.nsocks, label, out));
      res = label.sameHost ? gbNetTcpShmAnswer(*out, deadline, abortFlag)
                           : gbNetTcpAnswerSend(*out, GB_NET_ANSWER_TCP, deadline, abortFlag);
      if (res != gbSuccess) {
        gbNetTcpClose(*out);
        *out = NULL;
      }
      return res;
    }
    if (abortFlag != NULL && atomic_load_explicit(abortFlag, memory_order_relaxed)) {
      pthread_mutex_unlock(&l->lock);
      return gbErrorSet(gbRemoteError, "%s: aborted while waiting for rank %d to connect", group, srcRank);
    }
    if (gbDeadlinePassed(deadline)) {
      char sb[32], part[64] = "";
      if (f != NULL) snprintf(part, sizeof(part), " (%d of its %d sockets arrived)", f->count, f->nsocks);
      pthread_mutex_unlock(&l->lock);
      res = gbErrorSet(gbTimeout,
                       "rank %d did not connect (group %s) within %s s%s; is it running, and can "
                       "it reach %s? GPUBRIDGE_SOCKET_IFNAME picks the interface, GPUBRIDGE_TIMEOUT the limit",
                       srcRank, group, secsText((double)(gbClockNowNs() - start) / 1e9, sb, sizeof(sb)),
                       part, l->addrText);
      gbNetCause_t k = {.faultRank = srcRank, .seenBy = -1, .code = gbTimeout}; /* the rank that stalled */
      gbNetNoteFailure(gbErrorLast(), &k);
      return res;
    }
    /* The serving thread files connections and wakes this wait. */
    gbCondWaitMs(&l->filedCond, &l->lock, gbDeadlineRemainingMs(deadline, POLL_CAP_MS));
  }
}

void gbNetTcpListenerClose(gbNetListener_t* l) {
  if (l == NULL) return;
  pthread_mutex_lock(&l->lock);
  /* A failed rank files and answers what already arrived (a peer that
   * connected while this rank failed) before it stops listening. */
  if (l->failed) (void)serveLocked(l);
  l->stop = 1;
  pthread_mutex_unlock(&l->lock);
  uint64_t one = 1;
  if (write(l->wakeFd, &one, sizeof(one)) < 0) { /* the thread still sees stop within SERVE_MS */ }
  pthread_join(l->thread, NULL);
  gbSockClose(l->fd);
  gbNetPendingFini(&l->pend, "the listener closed before a full hello arrived");
  for (int i = 0; i < l->nfiled; i++)
    for (int k = 0; k < GB_NET_TCP_MAX_SOCKS; k++) gbNetTcpAnswerClose(l->filed[i].fds[k]);
  close(l->wakeFd);
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->filedCond);
  free(l->filed);
  free(l);
}
