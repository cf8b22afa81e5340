/* The table of waiting connections of net/pending.h. */
#include "net/pending.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/result.h"
#include "os/fdbudget.h"

#define FIRST_CAP 16

static gbNetPendingConn_t* conn(gbNetPending_t* t, int i) {
  return (gbNetPendingConn_t*)(t->conns + (size_t)i * t->stride);
}

/* Removes conns i (its socket now belongs to someone else or is closed). */
static void drop(gbNetPending_t* t, int i) {
  gbFdStrangersHeld(-1);
  int last = --t->n;
  if (i != last) memcpy(conn(t, i), conn(t, last), t->stride);
  t->pfd[1 + i] = t->pfd[1 + last];
}

static void refuse(gbNetPending_t* t, int i, const char* why) {
  gbNetStrangersRefused(&t->strangers, &conn(t, i)->peer, why);
  gbSockClose(conn(t, i)->fd);
  drop(t, i);
}

/* Room for cap connections; 0 when out of memory. */
static int grow(gbNetPending_t* t, int cap) {
  unsigned char* nc = realloc(t->conns, (size_t)cap * t->stride);
  if (nc == NULL) return 0;
  t->conns = nc;
  struct pollfd* nfd = realloc(t->pfd, (size_t)(cap + 1) * sizeof(*nfd));
  if (nfd == NULL) return 0;
  t->pfd = nfd;
  t->cap = cap;
  return 1;
}

gbResult_t gbNetPendingListen(gbNetPending_t* t, const gbNetPendingOps_t* ops, void* ctx, const gbSockAddr_t* addr,
                              int* fd, gbSockAddr_t* bound) {
  memset(t, 0, sizeof(*t));
  t->ops = ops;
  t->ctx = ctx;
  size_t align = _Alignof(gbNetPendingConn_t);
  t->stride = (sizeof(gbNetPendingConn_t) + ops->msgBytes + align - 1) / align * align;
  gbResult_t res = grow(t, FIRST_CAP) ? gbSockListen(addr, fd, bound)
                                      : gbErrorSet(gbSystemError, "out of memory creating a listener");
  if (res != gbSuccess) {
    int e = errno; /* the bind's cause, for the caller */
    free(t->conns);
    free(t->pfd);
    errno = e;
    return res;
  }
  t->pfd[0] = (struct pollfd){*fd, POLLIN, 0};
  gbNetStrangersInit(&t->strangers, ops->logPrefix, ops->logSuffix, bound);
  return gbSuccess;
}

void gbNetPendingFini(gbNetPending_t* t, const char* why) {
  for (int i = 0; i < t->n; i++) {
    gbNetStrangersRefused(&t->strangers, &conn(t, i)->peer, why);
    gbSockClose(conn(t, i)->fd);
  }
  gbNetStrangersFlush(&t->strangers, 1);
  gbFdStrangersHeld(-t->n);
  t->n = 0;
  free(t->conns);
  free(t->pfd);
  t->conns = NULL;
  t->pfd = NULL;
}

int gbNetPendingSleepMs(const gbNetPending_t* t, int64_t now, int capMs) {
  if (t->pfd[0].events != 0) return capMs;
  int64_t left = (t->pausedUntil - now) / 1000000 + 1;
  if (left >= capMs) return capMs;
  return left > 0 ? (int)left : 0;
}

int gbNetPendingPoll(gbNetPending_t* t, int64_t now, int timeoutMs) {
  t->pfd[0].events = now >= t->pausedUntil ? POLLIN : 0;
  int rc = poll(t->pfd, (nfds_t)(1 + t->n), gbNetPendingSleepMs(t, now, timeoutMs));
  if (rc < 0) {
    int e = errno;
    for (int i = 0; i <= t->n; i++) t->pfd[i].revents = 0;
    errno = e;
  }
  return rc;
}

/* Reads what conns i has sent and judges it; 1 when it left the table. */
static int readSome(gbNetPending_t* t, int i) {
  const gbNetPendingOps_t* ops = t->ops;
  gbNetPendingConn_t* c = conn(t, i);
  char err[128], why[256];
  while (c->got < ops->msgBytes) {
    ssize_t n = gbSockTryRecv(c->fd, c->msg + c->got, ops->msgBytes - c->got, err, sizeof(err));
    if (n < 0) {
      ops->closedWhy(c, err, why, sizeof(why));
      refuse(t, i, why);
      return 1;
    }
    if (n == 0) return 0;
    c->got += (size_t)n;
    const char* bad = ops->check(t->ctx, c, why, sizeof(why));
    if (bad != NULL) {
      refuse(t, i, bad);
      return 1;
    }
  }
  const char* bad = ops->take(t->ctx, c, why, sizeof(why));
  if (bad != NULL) refuse(t, i, bad);
  else drop(t, i);
  return 1;
}

static void advance(gbNetPending_t* t, int i, int64_t now) {
  if (t->pfd[1 + i].revents != 0) {
    t->pfd[1 + i].revents = 0;
    if (readSome(t, i)) return;
  }
  if (now - conn(t, i)->since > GB_NET_PENDING_IDLE_NS) {
    char why[256];
    t->ops->idleWhy(conn(t, i), why, sizeof(why));
    refuse(t, i, why);
  }
}

/* Drops the stranger that has waited longest, to make room (why says for
 * what); 0 when every waiting one is too young to judge. */
static int evictOldest(gbNetPending_t* t, int64_t now, const char* why) {
  int i = gbNetStrangersOldest(&conn(t, 0)->since, t->n, t->stride, now);
  if (i < 0) return 0;
  char text[384];
  snprintf(text, sizeof(text), "dropped after %.2f s without %s (%zu of %zu bytes): %s",
           (double)(now - conn(t, i)->since) / 1e9, t->ops->msgName, conn(t, i)->got, t->ops->msgBytes, why);
  refuse(t, i, text);
  return 1;
}

static void pauseAccepting(gbNetPending_t* t, int64_t now) {
  t->pausedUntil = now + GB_NET_ACCEPT_PAUSE_NS;
  t->pfd[0].events = 0; /* poll() must not report the queue until then */
}

static void add(gbNetPending_t* t, int fd, const gbSockAddr_t* peer, int64_t now) {
  gbNetPendingConn_t* c = conn(t, t->n);
  memset(c, 0, t->stride);
  c->fd = fd;
  c->peer = *peer;
  /* Its age counts from when the kernel completed it, so strangers that
   * waited in the queue behind a flood can make room at once, and the queue
   * drains at accept()'s pace rather than a budget per GB_NET_EVICT_MIN_AGE_NS. */
  c->since = now - gbSockQueuedNs(fd);
  t->pfd[1 + t->n] = (struct pollfd){fd, POLLIN, 0};
  t->n++;
  gbFdStrangersHeld(1);
}

enum { ACCEPTED, EMPTY, STUCK };

/* Whether one more waiting connection fits: this table's GB_NET_PENDING_MAX
 * and the process's budget (os/fdbudget.h: half the open-file limit, the
 * rest kept for the job's own sockets); else the oldest here makes room,
 * or, with none here at all, the other listeners are asked to. */
static int makeRoom(gbNetPending_t* t, int64_t now) {
  int budget = gbFdStrangerBudget();
  if (t->n < GB_NET_PENDING_MAX && gbFdStrangersCount() < budget) return ACCEPTED;
  /* Nobody goes for a connection that is not there. */
  struct pollfd queued = {t->pfd[0].fd, POLLIN, 0};
  if (poll(&queued, 1, 0) <= 0) return EMPTY;
  char why[224];
  snprintf(why, sizeof(why), "%s: %d connections wait for their first message in this process, the most it lets "
           "strangers hold (half its open-file limit, at most %d)", t->ops->floodWhy, gbFdStrangersCount(),
           GB_FD_STRANGERS_MAX);
  if (evictOldest(t, now, why)) return ACCEPTED;
  if (t->n == 0) (void)gbFdAskRelief(EMFILE); /* the others hold the budget */
  return STUCK;
}

/* One accept(): a new connection (read at once: a peer sends right after
 * connecting), or the oldest stranger evicted to make room for it. */
static int acceptOne(gbNetPending_t* t, int64_t now) {
  int room = makeRoom(t, now);
  if (room != ACCEPTED) return room;
  if (t->n == t->cap && !grow(t, 2 * t->cap)) {
    (void)gbErrorSet(gbSystemError, "out of memory accepting connections");
    return STUCK;
  }
  int fd;
  gbSockAddr_t peer;
  if (gbSockAccept(t->pfd[0].fd, &fd, &peer) != gbSuccess) return STUCK; /* logged; not the listener's end */
  if (fd < 0) {
    int e = errno;
    if (e == 0) return EMPTY;
    char eb[128];
    gbNetStrangersNoFds(&t->strangers, strerror_r(e, eb, sizeof(eb)), t->n);
    if (evictOldest(t, now, "this process is out of descriptors")) return ACCEPTED;
    if (t->n == 0) (void)gbFdAskRelief(e); /* another listener of this process may hold some */
    return STUCK;
  }
  add(t, fd, &peer, now);
  readSome(t, t->n - 1);
  return ACCEPTED;
}

/* Takes up to GB_NET_ACCEPT_BURST queued connections. Running out of
 * descriptors, or a flood past GB_NET_PENDING_MAX, costs the oldest stranger
 * its place, never the listener: a real peer behind the strangers still
 * gets in. */
static void acceptSome(gbNetPending_t* t, int64_t now) {
  for (int k = 0; k < GB_NET_ACCEPT_BURST; k++) {
    int r = acceptOne(t, now);
    if (r == EMPTY) return;
    if (r == STUCK) {
      pauseAccepting(t, now);
      return;
    }
  }
}

/* Drops the oldest waiting connections that a socket of ours, out of
 * descriptors, asked for (os/fdbudget.h); one this table cannot drop (none
 * old enough) is left for another listener. */
static void relieve(gbNetPending_t* t, int64_t now) {
  while (t->n > 0 && gbFdReliefTake()) {
    if (!evictOldest(t, now, "this process ran out of descriptors for its own sockets")) {
      gbFdReliefReturn();
      return;
    }
  }
}

void gbNetPendingServe(gbNetPending_t* t, int64_t now) {
  relieve(t, now);
  /* Backwards, so the swap in drop brings in one already seen. */
  for (int i = t->n - 1; i >= 0; i--) advance(t, i, now);
  if (t->pfd[0].revents != 0) acceptSome(t, now);
  gbNetStrangersFlush(&t->strangers, 0);
}

int gbNetSecretEqual(const uint8_t* a, const uint8_t* b) {
  unsigned diff = 0;
  for (int i = 0; i < GB_NET_SECRET_BYTES; i++) diff |= (unsigned)(a[i] ^ b[i]);
  return diff == 0;
}
