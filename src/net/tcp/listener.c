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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/result.h"
#include "net/strangers.h"
#include "net/tcp/tcp.h"

#define HELLO_TIMEOUT_NS (10LL * 1000000000LL)
/* Connections waiting for their hello beyond this many make room by
 * dropping the oldest stranger (net/strangers.h). */
#define MAX_PENDING 1024
/* Connections accepted per serve, so hellos are read between bursts. */
#define ACCEPT_BURST 64
#define POLL_CAP_MS 50
/* The serving thread's longest sleep: a silent stranger's deadline or a
 * paused accept is looked at again within this. */
#define SERVE_MS 100

typedef struct {
  int fd;
  gbSockAddr_t peer;
  int64_t since;
  size_t got;
  union {
    gbNetHello_t hello;
    unsigned char bytes[sizeof(gbNetHello_t)];
  } u;
} pending_t;

typedef struct {
  int srcRank, tag, nsocks, count;
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
  int64_t pausedUntil; /* accept() ran out of descriptors: not before this */
  gbNetStrangers_t strangers;
  pending_t* pending;
  struct pollfd* pfd; /* pfd[0]: the listening socket; pfd[1 + i]: pending[i] */
  int npending, cap;
  filed_t* filed;
  int nfiled, filedCap;
};

static void* serveMain(void* arg);

static void freeListener(gbNetListener_t* l) {
  free(l->pending);
  free(l->pfd);
  free(l);
}

gbResult_t gbNetTcpListen(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash,
                          gbNetListener_t** out) {
  gbNetListener_t* l = calloc(1, sizeof(*l));
  if (l == NULL) return gbErrorSet(gbSystemError, "out of memory creating a listener");
  l->cap = 16;
  l->pending = calloc((size_t)l->cap, sizeof(*l->pending));
  l->pfd = calloc((size_t)l->cap + 1, sizeof(*l->pfd));
  if (l->pending == NULL || l->pfd == NULL) {
    freeListener(l);
    return gbErrorSet(gbSystemError, "out of memory creating a listener");
  }
  gbResult_t res = gbSockListen(addr, &l->fd, &l->addr);
  if (res != gbSuccess) {
    freeListener(l);
    return res;
  }
  memcpy(l->secret, secret, GB_NET_SECRET_BYTES);
  l->commHash = commHash;
  l->pfd[0].fd = l->fd;
  l->pfd[0].events = POLLIN;
  gbSockAddrString(&l->addr, l->addrText, sizeof(l->addrText));
  gbNetStrangersInit(&l->strangers, "", "", &l->addr);
  char eb[128];
  l->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->wakeFd < 0) {
    int e = errno;
    gbSockClose(l->fd);
    freeListener(l);
    return gbErrorSet(gbSystemError, "cannot create the listener's wake-up descriptor: %s", strerror_r(e, eb, sizeof(eb)));
  }
  pthread_mutex_init(&l->lock, NULL);
  pthread_cond_init(&l->filedCond, NULL);
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

static void refuse(gbNetListener_t* l, int fd, const gbSockAddr_t* peer, const char* why) {
  gbNetStrangersRefused(&l->strangers, peer, why);
  gbSockClose(fd);
}

/* Removes pending[i] (its socket now belongs to someone else or is closed). */
static void dropPending(gbNetListener_t* l, int i) {
  int last = --l->npending;
  l->pending[i] = l->pending[last];
  l->pfd[1 + i] = l->pfd[1 + last];
}

/* Comparing the secret in constant time tells a prober nothing. */
static int sameSecret(const uint8_t* a, const uint8_t* b) {
  unsigned diff = 0;
  for (int i = 0; i < GB_NET_SECRET_BYTES; i++) diff |= (unsigned)(a[i] ^ b[i]);
  return diff == 0;
}

static filed_t* findFiled(gbNetListener_t* l, int srcRank, int tag) {
  for (int i = 0; i < l->nfiled; i++)
    if (l->filed[i].srcRank == srcRank && l->filed[i].tag == tag) return &l->filed[i];
  return NULL;
}

/* A complete hello: check it, then file the socket or refuse it. */
static void judge(gbNetListener_t* l, pending_t* p) {
  const gbNetHello_t* h = &p->u.hello;
  char why[256];
  if (h->magic != GB_NET_HELLO_MAGIC) {
    refuse(l, p->fd, &p->peer, "bad magic (not a gpubridge peer, or garbage)");
    return;
  }
  if (!sameSecret(h->secret, l->secret)) {
    refuse(l, p->fd, &p->peer,
           "wrong job secret (not a peer of this job; check GPUBRIDGE_JOB_SECRET / the unique id)");
    return;
  }
  if (h->commHash != l->commHash) {
    snprintf(why, sizeof(why), "hello for another communicator (hash %016llx, this one is %016llx)",
             (unsigned long long)h->commHash, (unsigned long long)l->commHash);
    refuse(l, p->fd, &p->peer, why);
    return;
  }
  if (h->srcRank < 0 || h->nsocks < 1 || h->nsocks > GB_NET_TCP_MAX_SOCKS || h->sockIndex < 0 ||
      h->sockIndex >= h->nsocks) {
    snprintf(why, sizeof(why), "bad hello fields (srcRank %d, sockIndex %d, nsocks %d; need srcRank >= 0, "
             "0 <= sockIndex < nsocks <= %d)", (int)h->srcRank, (int)h->sockIndex, (int)h->nsocks,
             GB_NET_TCP_MAX_SOCKS);
    refuse(l, p->fd, &p->peer, why);
    return;
  }
  filed_t* f = findFiled(l, h->srcRank, h->tag);
  if (f != NULL && f->nsocks != h->nsocks) {
    snprintf(why, sizeof(why), "rank %d announced %d sockets for tag %d, an earlier socket %d",
             (int)h->srcRank, (int)h->nsocks, (int)h->tag, f->nsocks);
    refuse(l, p->fd, &p->peer, why);
    return;
  }
  if (f != NULL && f->fds[h->sockIndex] >= 0) {
    snprintf(why, sizeof(why), "duplicate socket %d of rank %d for tag %d (is rank %d running twice?)",
             (int)h->sockIndex, (int)h->srcRank, (int)h->tag, (int)h->srcRank);
    refuse(l, p->fd, &p->peer, why);
    return;
  }
  if (f == NULL) {
    if (l->nfiled == l->filedCap) {
      int cap = l->filedCap ? 2 * l->filedCap : 8;
      filed_t* nf = realloc(l->filed, (size_t)cap * sizeof(*nf));
      if (nf == NULL) {
        refuse(l, p->fd, &p->peer, "out of memory filing the connection");
        return;
      }
      l->filed = nf;
      l->filedCap = cap;
    }
    f = &l->filed[l->nfiled++];
    f->srcRank = h->srcRank;
    f->tag = h->tag;
    f->nsocks = h->nsocks;
    f->count = 0;
    for (int i = 0; i < GB_NET_TCP_MAX_SOCKS; i++) f->fds[i] = -1;
  }
  f->fds[h->sockIndex] = p->fd;
  f->count++;
  GB_TRACE(GB_LOG_NET, "rank %d tag %d: socket %d of %d arrived", f->srcRank, f->tag, (int)h->sockIndex, f->nsocks);
  if (f->count == f->nsocks) pthread_cond_broadcast(&l->filedCond);
}

/* Reads what pending[i] has sent; returns 1 when it left the pending list. */
static int advance(gbNetListener_t* l, int i, int64_t now) {
  pending_t* p = &l->pending[i];
  char err[128], why[256];
  if (l->pfd[1 + i].revents != 0) {
    l->pfd[1 + i].revents = 0;
    size_t want = sizeof(p->u.bytes) - p->got;
    ssize_t n = gbSockTryRecv(p->fd, p->u.bytes + p->got, want, err, sizeof(err));
    if (n < 0) {
      snprintf(why, sizeof(why), "closed before a full hello (%zu of %zu bytes; %s)", p->got,
               sizeof(p->u.bytes), err);
      refuse(l, p->fd, &p->peer, why);
      dropPending(l, i);
      return 1;
    }
    p->got += (size_t)n;
    /* Garbage is refused as soon as the magic is wrong, not after 10 s. */
    if (p->got == sizeof(p->u.bytes) ||
        (p->got >= sizeof(uint64_t) && p->u.hello.magic != GB_NET_HELLO_MAGIC)) {
      pending_t done = *p;
      dropPending(l, i);
      if (done.got < sizeof(done.u.bytes)) refuse(l, done.fd, &done.peer, "bad magic (not a gpubridge peer, or garbage)");
      else judge(l, &done);
      return 1;
    }
  }
  if (now - p->since > HELLO_TIMEOUT_NS) {
    snprintf(why, sizeof(why), "no hello within 10 s (%zu of %zu bytes arrived)", p->got, sizeof(p->u.bytes));
    refuse(l, p->fd, &p->peer, why);
    dropPending(l, i);
    return 1;
  }
  return 0;
}

static gbResult_t growPending(gbNetListener_t* l) {
  int cap = 2 * l->cap;
  pending_t* np = realloc(l->pending, (size_t)cap * sizeof(*np));
  if (np == NULL) return gbErrorSet(gbSystemError, "out of memory accepting connections");
  l->pending = np;
  struct pollfd* nfd = realloc(l->pfd, (size_t)(cap + 1) * sizeof(*nfd));
  if (nfd == NULL) return gbErrorSet(gbSystemError, "out of memory accepting connections");
  l->pfd = nfd;
  l->cap = cap;
  return gbSuccess;
}

/* Drops the stranger that has waited longest for its hello, to make room
 * (why says for what); 0 when every waiting one is too young to judge. */
static int evictOldest(gbNetListener_t* l, int64_t now, const char* why) {
  int i = gbNetStrangersOldest(&l->pending[0].since, l->npending, sizeof(pending_t), now);
  if (i < 0) return 0;
  char text[224];
  snprintf(text, sizeof(text), "dropped after %.2f s without a full hello (%zu of %zu bytes): %s",
           (double)(now - l->pending[i].since) / 1e9, l->pending[i].got, sizeof(l->pending[i].u.bytes), why);
  refuse(l, l->pending[i].fd, &l->pending[i].peer, text);
  dropPending(l, i);
  return 1;
}

static void pauseAccepting(gbNetListener_t* l, int64_t now) {
  l->pausedUntil = now + GB_NET_ACCEPT_PAUSE_NS;
  l->pfd[0].events = 0; /* poll() must not report the queue until then */
}

/* Takes up to ACCEPT_BURST queued connections. Running out of descriptors,
 * or a flood past MAX_PENDING, costs the oldest stranger its place, never
 * the listener: a real peer behind the strangers still gets in. */
static void acceptSome(gbNetListener_t* l, int64_t now) {
  char eb[128];
  for (int k = 0; k < ACCEPT_BURST; k++) {
    if (l->npending >= MAX_PENDING &&
        !evictOldest(l, now, "too many connections waiting for their hello (a flood?)")) {
      pauseAccepting(l, now);
      return;
    }
    if (l->npending == l->cap && growPending(l) != gbSuccess) {
      pauseAccepting(l, now);
      return;
    }
    int fd;
    gbSockAddr_t peer;
    if (gbSockAccept(l->fd, &fd, &peer) != gbSuccess) { /* logged; not this listener's end */
      pauseAccepting(l, now);
      return;
    }
    if (fd < 0) {
      int e = errno;
      if (e == 0) return; /* the queue is empty */
      gbNetStrangersNoFds(&l->strangers, strerror_r(e, eb, sizeof(eb)), l->npending);
      if (evictOldest(l, now, "this process is out of descriptors")) continue;
      pauseAccepting(l, now);
      return;
    }
    pending_t* p = &l->pending[l->npending];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->peer = peer;
    p->since = now;
    /* A new peer has likely sent its hello already: read it now. */
    l->pfd[1 + l->npending] = (struct pollfd){fd, POLLIN, POLLIN};
    l->npending++;
  }
}

/* One round of serving, under the lock; never blocks. */
static gbResult_t serveLocked(gbNetListener_t* l) {
  int64_t now = gbClockNowNs();
  if (l->pfd[0].events == 0 && now >= l->pausedUntil) l->pfd[0].events = POLLIN;
  /* One poll tells which sockets have something, so a serve costs one
   * system call plus one per socket that has news. */
  int rc = poll(l->pfd, (nfds_t)(1 + l->npending), 0);
  if (rc < 0 && errno != EINTR) {
    char eb[128];
    return gbErrorSet(gbSystemError, "poll on the listener %s: %s", l->addrText, strerror_r(errno, eb, sizeof(eb)));
  }
  if (rc < 0) {
    /* Interrupted: no news, only the hello deadlines can have changed. */
    for (int i = 0; i <= l->npending; i++) l->pfd[i].revents = 0;
  }
  if (l->pfd[0].revents != 0) acceptSome(l, now);
  /* Backwards, so the swap in dropPending brings in one already seen. */
  for (int i = l->npending - 1; i >= 0; i--) advance(l, i, now);
  gbNetStrangersFlush(&l->strangers, 0);
  return gbSuccess;
}

static void* serveMain(void* arg) {
  gbNetListener_t* l = arg;
  struct pollfd* fds = NULL;
  int fdsCap = 0;
  pthread_mutex_lock(&l->lock);
  while (!l->stop) {
    (void)serveLocked(l); /* a failed poll was logged; the next round tries again */
    int n = 1 + l->npending;
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
      memcpy(fds, l->pfd, sizeof(*fds) * (size_t)n);
      fds[n] = (struct pollfd){l->wakeFd, POLLIN, 0};
      count = n + 1;
    }
    if (l->pfd[0].events == 0) {
      int64_t left = (l->pausedUntil - gbClockNowNs()) / 1000000 + 1;
      if (left < timeoutMs) timeoutMs = left > 0 ? (int)left : 0;
    }
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
                          gbDeadline_t deadline, const volatile int* abortFlag, gbNetConn_t** out) {
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
    if (f != NULL && f->count == f->nsocks) {
      filed_t got = *f;
      *f = l->filed[--l->nfiled];
      pthread_mutex_unlock(&l->lock);
      GB_CHECK(gbNetTcpConnCreate(got.fds, got.nsocks, label, out));
      res = label.sameHost ? gbNetTcpShmAnswer(*out, deadline, abortFlag) : gbSuccess;
      if (res != gbSuccess) {
        gbNetTcpClose(*out);
        *out = NULL;
      }
      return res;
    }
    if (abortFlag != NULL && __atomic_load_n(abortFlag, __ATOMIC_RELAXED)) {
      pthread_mutex_unlock(&l->lock);
      return gbErrorSet(gbRemoteError, "%s: aborted while waiting for rank %d to connect", group, srcRank);
    }
    if (gbDeadlinePassed(deadline)) {
      char sb[32], part[64] = "";
      if (f != NULL) snprintf(part, sizeof(part), " (%d of its %d sockets arrived)", f->count, f->nsocks);
      pthread_mutex_unlock(&l->lock);
      return gbErrorSet(gbTimeout,
                        "rank %d did not connect (group %s) within %s s%s; is it running, and can "
                        "it reach %s? GPUBRIDGE_SOCKET_IFNAME picks the interface, GPUBRIDGE_TIMEOUT the limit",
                        srcRank, group, secsText((double)(gbClockNowNs() - start) / 1e9, sb, sizeof(sb)),
                        part, l->addrText);
    }
    /* The serving thread files connections and wakes this wait. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)gbDeadlineRemainingMs(deadline, POLL_CAP_MS) * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&l->filedCond, &l->lock, &ts);
  }
}

void gbNetTcpListenerClose(gbNetListener_t* l) {
  if (l == NULL) return;
  pthread_mutex_lock(&l->lock);
  l->stop = 1;
  pthread_mutex_unlock(&l->lock);
  uint64_t one = 1;
  if (write(l->wakeFd, &one, sizeof(one)) < 0) { /* the thread still sees stop within SERVE_MS */ }
  pthread_join(l->thread, NULL);
  gbSockClose(l->fd);
  for (int i = 0; i < l->npending; i++)
    refuse(l, l->pending[i].fd, &l->pending[i].peer, "the listener closed before a full hello arrived");
  gbNetStrangersFlush(&l->strangers, 1);
  for (int i = 0; i < l->nfiled; i++)
    for (int k = 0; k < GB_NET_TCP_MAX_SOCKS; k++) gbSockClose(l->filed[i].fds[k]);
  close(l->wakeFd);
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->filedCond);
  free(l->filed);
  freeListener(l);
}
