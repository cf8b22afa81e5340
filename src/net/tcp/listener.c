/* The TCP listener: accepts connections without ever blocking, reads each
 * one's hello bit by bit (a slow or silent stranger holds up nobody), refuses
 * strangers with a warning, and files good sockets by (srcRank, tag) until
 * accept() collects them. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/result.h"
#include "net/tcp/tcp.h"

#define HELLO_TIMEOUT_NS (10LL * 1000000000LL)
/* Strangers waiting for their hello beyond this many are refused at once. */
#define MAX_PENDING 1024
#define POLL_CAP_MS 50

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
  pending_t* pending;
  struct pollfd* pfd; /* pfd[0]: the listening socket; pfd[1 + i]: pending[i] */
  int npending, cap;
  filed_t* filed;
  int nfiled, filedCap;
};

gbResult_t gbNetTcpListen(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash,
                          gbNetListener_t** out) {
  gbNetListener_t* l = calloc(1, sizeof(*l));
  if (l == NULL) return gbErrorSet(gbSystemError, "out of memory creating a listener");
  l->cap = 16;
  l->pending = calloc((size_t)l->cap, sizeof(*l->pending));
  l->pfd = calloc((size_t)l->cap + 1, sizeof(*l->pfd));
  if (l->pending == NULL || l->pfd == NULL) {
    free(l->pending);
    free(l->pfd);
    free(l);
    return gbErrorSet(gbSystemError, "out of memory creating a listener");
  }
  gbResult_t res = gbSockListen(addr, &l->fd, &l->addr);
  if (res != gbSuccess) {
    free(l->pending);
    free(l->pfd);
    free(l);
    return res;
  }
  memcpy(l->secret, secret, GB_NET_SECRET_BYTES);
  l->commHash = commHash;
  l->pfd[0].fd = l->fd;
  l->pfd[0].events = POLLIN;
  gbSockAddrString(&l->addr, l->addrText, sizeof(l->addrText));
  GB_INFO(GB_LOG_NET, "listening for peers on %s", l->addrText);
  *out = l;
  return gbSuccess;
}

gbResult_t gbNetTcpListenerAddr(gbNetListener_t* l, gbSockAddr_t* out) {
  *out = l->addr;
  return gbSuccess;
}

static void refuse(gbNetListener_t* l, int fd, const gbSockAddr_t* peer, const char* why) {
  char ps[80];
  GB_WARN("refused a connection from %s on %s: %s", gbSockAddrString(peer, ps, sizeof(ps)), l->addrText, why);
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
}

/* Reads what pending[i] has sent; returns 1 when it left the pending list. */
static int advance(gbNetListener_t* l, int i, int64_t now) {
  pending_t* p = &l->pending[i];
  char err[128], why[256];
  if (l->pfd[1 + i].revents != 0) {
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

gbResult_t gbNetTcpListenerServe(gbNetListener_t* l) {
  /* One poll tells which sockets have something, so a serve costs one
   * system call plus one per socket that has news. */
  int rc = poll(l->pfd, (nfds_t)(1 + l->npending), 0);
  if (rc < 0 && errno != EINTR) {
    char eb[128];
    return gbErrorSet(gbSystemError, "poll on the listener %s: %s", l->addrText, strerror_r(errno, eb, sizeof(eb)));
  }
  int64_t now = gbClockNowNs();
  if (rc > 0 && l->pfd[0].revents != 0) {
    for (;;) {
      int fd;
      gbSockAddr_t peer;
      GB_CHECK(gbSockAccept(l->fd, &fd, &peer));
      if (fd < 0) break;
      if (l->npending >= MAX_PENDING) {
        refuse(l, fd, &peer, "too many connections waiting for their hello");
        continue;
      }
      if (l->npending == l->cap) {
        gbResult_t res = growPending(l);
        if (res != gbSuccess) {
          gbSockClose(fd);
          return res;
        }
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
  if (rc < 0) {
    /* Interrupted: no news, only the hello deadlines can have changed. */
    for (int i = l->npending - 1; i >= 0; i--) l->pfd[1 + i].revents = 0;
  }
  /* Backwards, so the swap in dropPending brings in one already seen. */
  for (int i = l->npending - 1; i >= 0; i--) advance(l, i, now);
  return gbSuccess;
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
  for (;;) {
    GB_CHECK(gbNetTcpListenerServe(l));
    filed_t* f = findFiled(l, srcRank, tag);
    if (f != NULL && f->count == f->nsocks) {
      filed_t got = *f;
      *f = l->filed[--l->nfiled];
      GB_CHECK(gbNetTcpConnCreate(got.fds, got.nsocks, label, out));
      gbResult_t res = label.sameHost ? gbNetTcpShmAnswer(*out, deadline, abortFlag) : gbSuccess;
      if (res != gbSuccess) {
        gbNetTcpClose(*out);
        *out = NULL;
      }
      return res;
    }
    if (abortFlag != NULL && __atomic_load_n(abortFlag, __ATOMIC_RELAXED))
      return gbErrorSet(gbRemoteError, "%s: aborted while waiting for rank %d to connect", group, srcRank);
    if (gbDeadlinePassed(deadline)) {
      char sb[32], part[64] = "";
      if (f != NULL) snprintf(part, sizeof(part), " (%d of its %d sockets arrived)", f->count, f->nsocks);
      return gbErrorSet(gbTimeout,
                        "rank %d did not connect (group %s) within %s s%s; is it running, and can "
                        "it reach %s? GPUBRIDGE_SOCKET_IFNAME picks the interface, GPUBRIDGE_TIMEOUT the limit",
                        srcRank, group, secsText((double)(gbClockNowNs() - start) / 1e9, sb, sizeof(sb)),
                        part, l->addrText);
    }
    if (poll(l->pfd, (nfds_t)(1 + l->npending), gbDeadlineRemainingMs(deadline, POLL_CAP_MS)) < 0 &&
        errno != EINTR) {
      char eb[128];
      return gbErrorSet(gbSystemError, "poll on the listener %s: %s", l->addrText, strerror_r(errno, eb, sizeof(eb)));
    }
  }
}

void gbNetTcpListenerClose(gbNetListener_t* l) {
  if (l == NULL) return;
  gbSockClose(l->fd);
  for (int i = 0; i < l->npending; i++) gbSockClose(l->pending[i].fd);
  for (int i = 0; i < l->nfiled; i++)
    for (int k = 0; k < GB_NET_TCP_MAX_SOCKS; k++) gbSockClose(l->filed[i].fds[k]);
  free(l->pending);
  free(l->pfd);
  free(l->filed);
  free(l);
}
