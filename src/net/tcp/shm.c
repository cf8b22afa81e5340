/* Shared-memory rings for a same-host peer. One segment holds two
 * single-producer single-consumer byte rings (connecting side to accepting
 * side, and back). A message is a byte stream of the size both sides posted,
 * so requests simply drain in order through the ring. The TCP sockets stay
 * open: socket 0 carries the set-up, and its end tells that the peer died
 * (checked while the rings are idle).
 *
 * The segment is a nameless memfd (os/memfd.h): the connecting side makes it
 * and offers (pid, fd, nonce) over socket 0, the peer reopens it through
 * /proc (pidfd_getfd would need ptrace attach access, refused under Yama's
 * ptrace_scope 1). Anything that fails declines, and the pair stays on TCP. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "os/memfd.h"
#include "os/socket.h"
#include "net/tcp/tcp.h"

#define RING_BYTES ((size_t)1 << 21)
#define OFFER_MAGIC 0x67626d66u /* "gbmf": a memfd reopened through /proc */
#define MEMFD_NAME "gpubridge-ring"
#define NONCE_BYTES GB_MEMFD_NONCE_BYTES
/* Idle progress calls between checks that the peer's socket is still open. */
#define IDLE_CHECK_EVERY 256

typedef struct {
  _Atomic uint64_t head; /* bytes written, by the producer */
  char pad0[56];
  _Atomic uint64_t tail; /* bytes read, by the consumer */
  char pad1[56];
  _Atomic int closed;    /* the producer shut down; cause is set first */
  char pad2[60];
  gbNetCause_t cause;    /* why the producer shut down (faultRank -1: not told) */
} ringCtl_t;

/* The segment's first bytes: proof that the peer opened the offered one. */
typedef struct {
  uint8_t nonce[NONCE_BYTES];
  char pad[64 - NONCE_BYTES];
} segHead_t;

struct gbNetShm {
  void* base;
  size_t bytes;
  ringCtl_t* tx;
  char* txData;
  ringCtl_t* rx;
  char* rxData;
};

typedef struct {
  uint32_t magic;
  uint32_t ringBytes;
  int32_t pid; /* the offering process; 0 declines */
  int32_t fd;  /* its descriptor of the segment */
  uint8_t nonce[NONCE_BYTES];
} offer_t;

static size_t segmentBytes(void) { return sizeof(segHead_t) + 2 * (sizeof(ringCtl_t) + RING_BYTES); }

static void attach(gbNetConn_t* c, void* base, int connector) {
  gbNetShm_t* s = c->shm;
  s->base = base;
  s->bytes = segmentBytes();
  ringCtl_t* r0 = (ringCtl_t*)((char*)base + sizeof(segHead_t));
  char* d0 = (char*)r0 + sizeof(ringCtl_t);
  ringCtl_t* r1 = (ringCtl_t*)(d0 + RING_BYTES);
  char* d1 = (char*)r1 + sizeof(ringCtl_t);
  s->tx = connector ? r0 : r1;
  s->txData = connector ? d0 : d1;
  s->rx = connector ? r1 : r0;
  s->rxData = connector ? d1 : d0;
}

/* A nameless segment holding nonce (os/memfd.h): its fd, mapped at *base,
 * or -1 (then the pair stays on TCP). */
static int createSegment(const uint8_t* nonce, void** base) {
  const char* why = "";
  int fd = gbMemfdCreate(MEMFD_NAME, segmentBytes(), nonce, base, &why);
  if (fd < 0)
    GB_INFO(GB_LOG_NET, "no shared-memory segment of %zu bytes (%s): staying on TCP", segmentBytes(), why);
  return fd;
}

static int wanted(const gbNetConn_t* c) { return gbParamInt(GB_PARAM_SHM) != 0; }

gbResult_t gbNetTcpShmOffer(gbNetConn_t* c, gbDeadline_t deadline, const atomic_int* abortFlag) {
  offer_t o;
  memset(&o, 0, sizeof(o));
  o.magic = OFFER_MAGIC;
  o.ringBytes = (uint32_t)RING_BYTES;
  o.fd = -1;
  void* base = NULL;
  if (wanted(c) && gbRandomBytes(o.nonce, sizeof(o.nonce)) == gbSuccess) o.fd = createSegment(o.nonce, &base);
  if (o.fd >= 0) o.pid = (int32_t)getpid();
  char what[96];
  snprintf(what, sizeof(what), "%s: shared-memory offer to rank %d", c->group, c->peerRank);
  gbResult_t res = gbSockSendAll(c->socks[0].fd, &o, sizeof(o), deadline, abortFlag, what);
  if (res != gbSuccess && !(abortFlag && atomic_load_explicit(abortFlag, memory_order_relaxed))) {
    gbNetCause_t k = {.faultRank = c->peerRank, .seenBy = -1, .code = res};
    char msg[sizeof(c->errMsg)];
    snprintf(msg, sizeof(msg), "%s", gbErrorLast());
    res = gbNetTcpConnFail(c, res, msg, &k);
  }
  int status = 0;
  if (res == gbSuccess) res = gbNetTcpAnswerRead(c, deadline, abortFlag, &status);
  int ack = status == GB_NET_ANSWER_SHM;
  /* The peer has its own descriptor or mapping now (or never will): ours
   * can go, the mapping keeps the memory. */
  if (o.fd >= 0) close(o.fd);
  if (res != gbSuccess || !ack || !base) {
    if (base) munmap(base, segmentBytes());
    return res;
  }
  c->shm = calloc(1, sizeof(gbNetShm_t));
  if (!c->shm) {
    munmap(base, segmentBytes());
    return gbErrorSet(gbSystemError, "%s: out of memory for shared memory with rank %d", c->group, c->peerRank);
  }
  attach(c, base, 1);
  GB_INFO(GB_LOG_NET, "%s: rank %d is on this host: shared-memory rings of %zu KiB", c->group, c->peerRank,
          RING_BYTES >> 10);
  return gbSuccess;
}

gbResult_t gbNetTcpShmAnswer(gbNetConn_t* c, gbDeadline_t deadline, const atomic_int* abortFlag) {
  offer_t o;
  char what[96];
  snprintf(what, sizeof(what), "%s: shared-memory offer from rank %d", c->group, c->peerRank);
  gbResult_t got = gbSockRecvAll(c->socks[0].fd, &o, sizeof(o), deadline, abortFlag, what);
  if (got != gbSuccess) {
    if (abortFlag && atomic_load_explicit(abortFlag, memory_order_relaxed)) return got;
    /* It closed or stalled before its offer: that peer is the one at fault. */
    gbNetCause_t k = {.faultRank = c->peerRank, .seenBy = -1, .code = got};
    char msg[sizeof(c->errMsg)];
    snprintf(msg, sizeof(msg), "%s", gbErrorLast());
    return gbNetTcpConnFail(c, got, msg, &k);
  }
  void* base = NULL;
  if (o.magic == OFFER_MAGIC && o.ringBytes == RING_BYTES && o.pid > 0 && o.fd >= 0 && wanted(c)) {
    const char* why = "";
    base = gbMemfdOpenPeer(MEMFD_NAME, o.pid, o.fd, segmentBytes(), o.nonce, &why);
    if (!base)
      GB_INFO(GB_LOG_NET, "%s: cannot open rank %d's shared-memory segment (/proc/%d/fd/%d: %s): staying on TCP",
              c->group, c->peerRank, (int)o.pid, (int)o.fd, why);
  }
  if (base) {
    c->shm = calloc(1, sizeof(gbNetShm_t));
    if (!c->shm) {
      munmap(base, segmentBytes());
      base = NULL;
    }
  }
  int ack = base != NULL;
  gbResult_t res = gbNetTcpAnswerSend(c, ack ? GB_NET_ANSWER_SHM : GB_NET_ANSWER_TCP, deadline, abortFlag);
  if (ack && res == gbSuccess) {
    attach(c, base, 0);
    GB_INFO(GB_LOG_NET, "%s: rank %d is on this host: shared-memory rings of %zu KiB", c->group, c->peerRank,
            RING_BYTES >> 10);
  } else if (ack) {
    munmap(base, segmentBytes());
    free(c->shm);
    c->shm = NULL;
  }
  return res;
}

int gbNetTcpShmTold(gbNetConn_t* c, gbNetCause_t* out) {
  if (c == NULL || !c->shm || !atomic_load_explicit(&c->shm->rx->closed, memory_order_acquire)) return 0;
  memcpy(out, &c->shm->rx->cause, sizeof(*out));
  return gbNetCauseSanitize(out);
}

/* The peer's end, as this rank sees it: with the cause it left in the
 * segment (relayed: it names the rank that failed first), or without one
 * (the peer died, or did not say). */
static gbResult_t peerGone(gbNetConn_t* c, int closed) {
  char msg[sizeof(c->errMsg)];
  gbNetCause_t k;
  if (gbNetTcpShmTold(c, &k)) {
    gbNetCauseText(msg, sizeof(msg), c->group, c->peerRank, &k, " (shared memory)");
    return gbNetTcpConnFail(c, gbRemoteError, msg, &k);
  }
  if (atomic_load_explicit(&c->shm->rx->closed, memory_order_acquire)) closed = 1;
  snprintf(msg, sizeof(msg), "%s: rank %d %s without telling why (%s; see its log) (shared memory)", c->group,
           c->peerRank, closed ? "shut the connection down" : "closed the connection",
           closed ? "it failed" : "it died or was killed");
  k = (gbNetCause_t){.faultRank = c->peerRank, .seenBy = -1, .code = gbRemoteError};
  return gbNetTcpConnFail(c, gbRemoteError, msg, &k);
}

/* Whether the peer let go of its end of socket 0 (it closed, shut down or died). */
static int socketGone(gbNetConn_t* c) {
  char b;
  ssize_t n = recv(c->socks[0].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static size_t sendSome(gbNetShm_t* s, gbNetReq_t* r) {
  uint64_t head = atomic_load_explicit(&s->tx->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&s->tx->tail, memory_order_acquire);
  size_t room = RING_BYTES - (size_t)(head - tail), left = r->bytes - r->moved;
  size_t n = left < room ? left : room;
  size_t at = (size_t)(head % RING_BYTES), first = n < RING_BYTES - at ? n : RING_BYTES - at;
  memcpy(s->txData + at, r->buf + r->moved, first);
  memcpy(s->txData, r->buf + r->moved + first, n - first);
  atomic_store_explicit(&s->tx->head, head + n, memory_order_release);
  r->moved += n;
  return n;
}

static size_t recvSome(gbNetShm_t* s, gbNetReq_t* r) {
  uint64_t tail = atomic_load_explicit(&s->rx->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&s->rx->head, memory_order_acquire);
  size_t avail = (size_t)(head - tail), left = r->bytes - r->moved;
  size_t n = left < avail ? left : avail;
  size_t at = (size_t)(tail % RING_BYTES), first = n < RING_BYTES - at ? n : RING_BYTES - at;
  memcpy(r->buf + r->moved, s->rxData + at, first);
  memcpy(r->buf + r->moved + first, s->rxData, n - first);
  atomic_store_explicit(&s->rx->tail, tail + n, memory_order_release);
  r->moved += n;
  return n;
}

gbResult_t gbNetTcpShmProgress(gbNetConn_t* c) {
  gbNetShm_t* s = c->shm;
  if (c->err != gbSuccess) return gbNetTcpConnFail(c, c->err, c->errMsg, NULL);
  if (atomic_load(&c->shut)) {
    char msg[sizeof(c->errMsg)];
    snprintf(msg, sizeof(msg), "%s: the connection was shut down by this rank (aborted) (rank %d, shared memory)",
             c->group, c->peerRank);
    return gbNetTcpConnFail(c, gbRemoteError, msg, NULL);
  }
  /* A peer that shut down may have left data in the ring (as TCP keeps what
   * arrived before the end): look at its end first, drain, and fail only
   * when nothing moves. (Looking after the drain would miss data the peer
   * wrote between the two just before it left.) */
  int peerClosed = atomic_load_explicit(&s->rx->closed, memory_order_acquire);
  int peerLeft = !peerClosed && ++c->idle % IDLE_CHECK_EVERY == 0 && socketGone(c);
  size_t moved = 0;
  for (int dir = 0; dir < 2; dir++) {
    for (gbNetReq_t* r = c->head[dir]; r != NULL; r = r->next) {
      if (r->done) continue;
      size_t n = dir == GB_DIR_SEND ? sendSome(s, r) : recvSome(s, r);
      moved += n;
      if (r->moved < r->bytes) break; /* the ring is full (or empty): later requests wait their turn */
      r->done = 1;
    }
  }
  if (moved) {
    c->idle = 0;
    return gbSuccess;
  }
  if (peerClosed || peerLeft) return peerGone(c, peerClosed);
  return gbSuccess; /* gbNetWaitAll backs off (yields, then sleeps) between passes */
}

void gbNetTcpShmShutdown(gbNetConn_t* c, const gbNetCause_t* cause) {
  if (!c->shm) return;
  /* Only the first shutdown comes here (conn.c), so the peer never reads a
   * cause being written: closed's release store publishes it. */
  if (cause) memcpy(&c->shm->tx->cause, cause, sizeof(*cause));
  atomic_store_explicit(&c->shm->tx->closed, 1, memory_order_release);
}

void gbNetTcpShmClose(gbNetConn_t* c) {
  if (!c->shm) return;
  munmap(c->shm->base, c->shm->bytes);
  free(c->shm);
  c->shm = NULL;
}
