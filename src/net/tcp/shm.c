/* Shared-memory rings for a same-host peer. One segment holds two
 * single-producer single-consumer byte rings (connecting side to accepting
 * side, and back). A message is a byte stream of the size both sides posted,
 * so requests simply drain in order through the ring. The TCP sockets stay
 * open: socket 0 carries the set-up, and its end tells that the peer died
 * (checked while the rings are idle). The segment's name is unlinked as soon
 * as both sides mapped it, so nothing outlives the processes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "os/socket.h"
#include "net/tcp/tcp.h"

#define RING_BYTES ((size_t)1 << 21)
#define OFFER_MAGIC 0x67627368u /* "gbsh" */
/* Idle progress calls between checks that the peer's socket is still open. */
#define IDLE_CHECK_EVERY 256

typedef struct {
  _Atomic uint64_t head; /* bytes written, by the producer */
  char pad0[56];
  _Atomic uint64_t tail; /* bytes read, by the consumer */
  char pad1[56];
  _Atomic int closed;    /* either side shut down */
  char pad2[60];
} ringCtl_t;

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
  char name[56]; /* "" declines */
} offer_t;

static size_t segmentBytes(void) { return 2 * (sizeof(ringCtl_t) + RING_BYTES); }

static void attach(gbNetConn_t* c, void* base, int connector) {
  gbNetShm_t* s = c->shm;
  s->base = base;
  s->bytes = segmentBytes();
  ringCtl_t* r0 = base;
  char* d0 = (char*)base + sizeof(ringCtl_t);
  ringCtl_t* r1 = (ringCtl_t*)(d0 + RING_BYTES);
  char* d1 = (char*)r1 + sizeof(ringCtl_t);
  s->tx = connector ? r0 : r1;
  s->txData = connector ? d0 : d1;
  s->rx = connector ? r1 : r0;
  s->rxData = connector ? d1 : d0;
}

/* A segment in /dev/shm with its pages reserved (a full tmpfs then fails
 * here, not with SIGBUS later). */
static int createSegment(char* name, size_t nameLen, void** base) {
  uint8_t rnd[8];
  if (gbRandomBytes(rnd, sizeof(rnd)) != gbSuccess) return 0;
  snprintf(name, nameLen, "/gpubridge-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0], rnd[1], rnd[2],
           rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < 4 * segmentBytes()) return 0;
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return 0;
  int ok = posix_fallocate(fd, 0, (off_t)segmentBytes()) == 0;
  void* p = ok ? mmap(NULL, segmentBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name);
    return 0;
  }
  memset(p, 0, segmentBytes());
  *base = p;
  return 1;
}

static int wanted(const gbNetConn_t* c) { return gbParamInt(GB_PARAM_SHM) != 0; }

gbResult_t gbNetTcpShmOffer(gbNetConn_t* c, gbDeadline_t deadline, const volatile int* abortFlag) {
  offer_t o;
  memset(&o, 0, sizeof(o));
  o.magic = OFFER_MAGIC;
  o.ringBytes = (uint32_t)RING_BYTES;
  void* base = NULL;
  if (wanted(c) && !createSegment(o.name, sizeof(o.name), &base)) o.name[0] = '\0';
  char what[96];
  snprintf(what, sizeof(what), "%s: shared-memory offer to rank %d", c->group, c->peerRank);
  gbResult_t res = gbSockSendAll(c->socks[0].fd, &o, sizeof(o), deadline, abortFlag, what);
  uint8_t ack = 0;
  if (res == gbSuccess) res = gbSockRecvAll(c->socks[0].fd, &ack, 1, deadline, abortFlag, what);
  if (base) shm_unlink(o.name);
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

gbResult_t gbNetTcpShmAnswer(gbNetConn_t* c, gbDeadline_t deadline, const volatile int* abortFlag) {
  offer_t o;
  char what[96];
  snprintf(what, sizeof(what), "%s: shared-memory offer from rank %d", c->group, c->peerRank);
  GB_CHECK(gbSockRecvAll(c->socks[0].fd, &o, sizeof(o), deadline, abortFlag, what));
  o.name[sizeof(o.name) - 1] = '\0';
  void* base = MAP_FAILED;
  if (o.magic == OFFER_MAGIC && o.ringBytes == RING_BYTES && o.name[0] && wanted(c)) {
    int fd = shm_open(o.name, O_RDWR, 0600);
    if (fd >= 0) {
      base = mmap(NULL, segmentBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
    }
  }
  if (base != MAP_FAILED) {
    c->shm = calloc(1, sizeof(gbNetShm_t));
    if (!c->shm) {
      munmap(base, segmentBytes());
      base = MAP_FAILED;
    }
  }
  uint8_t ack = base != MAP_FAILED;
  gbResult_t res = gbSockSendAll(c->socks[0].fd, &ack, 1, deadline, abortFlag, what);
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

static gbResult_t failConn(gbNetConn_t* c, gbResult_t code, const char* why) {
  if (c->err == gbSuccess) {
    c->err = code;
    snprintf(c->errMsg, sizeof(c->errMsg), "%s: %s (rank %d, shared memory)", c->group, why, c->peerRank);
  }
  return gbErrorSet(c->err, "%s", c->errMsg);
}

/* Whether the peer still holds its end of socket 0. */
static gbResult_t checkPeer(gbNetConn_t* c) {
  char b;
  ssize_t n = recv(c->socks[0].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    return failConn(c, gbRemoteError, "the peer closed the connection (it failed or was aborted; see its log)");
  return gbSuccess;
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
  if (atomic_load(&c->shut)) return failConn(c, gbRemoteError, "the connection was shut down by this rank (aborted)");
  /* A peer that shut down may have left data in the ring (as TCP keeps what
   * arrived before the end): drain first, fail only when nothing moves. */
  int peerClosed = atomic_load(&s->tx->closed) || atomic_load(&s->rx->closed);
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
  if (peerClosed) return failConn(c, gbRemoteError, "the peer shut the connection down");
  if (++c->idle % IDLE_CHECK_EVERY == 0) GB_CHECK(checkPeer(c));
  return gbSuccess; /* gbNetWaitAll backs off (yields, then sleeps) between passes */
}

void gbNetTcpShmShutdown(gbNetConn_t* c) {
  if (c->shm) atomic_store(&c->shm->tx->closed, 1);
}

void gbNetTcpShmClose(gbNetConn_t* c) {
  if (!c->shm) return;
  munmap(c->shm->base, c->shm->bytes);
  free(c->shm);
  c->shm = NULL;
}
