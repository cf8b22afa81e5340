/* Moving messages over a connection's sockets. A message of B bytes is cut
 * into pieces of max(64 KiB, ceil(B / nsocks)) bytes; piece k travels on
 * socket k. Both sides compute the same cut, so no headers travel. Each
 * socket keeps its own cursor per direction, so sockets progress
 * independently; a request is done when all its pieces are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "net/tcp/tcp.h"

/* Freed requests kept per connection for reuse. */
#define FREE_KEEP 16

static gbResult_t sticky(gbNetConn_t* c) { return gbNetTcpConnFail(c, c->err, c->errMsg, NULL); }

static const char* dirWord(int dir) { return dir == GB_DIR_SEND ? "sending" : "receiving"; }

/* Records the connection's error once; every later call returns it. */
static gbResult_t fail(gbNetConn_t* c, const gbNetReq_t* r, const char* err, int e) {
  char msg[sizeof(c->errMsg)];
  gbNetCause_t peer = {.faultRank = c->peerRank, .seenBy = -1, .code = gbRemoteError};
  if (atomic_load(&c->shut)) {
    snprintf(msg, sizeof(msg),
             "%s: the connection to rank %d was shut down by this rank (aborted) while it was %s %zu bytes",
             c->group, c->peerRank, dirWord(r->dir), r->bytes);
    return gbNetTcpConnFail(c, gbRemoteError, msg, NULL);
  }
  /* A peer that failed before it took this connection answered why. */
  if (c->answerLeft > 0 && gbNetTcpAnswerPoll(c) != gbSuccess) return c->err;
  if (e == 0 || e == ECONNRESET || e == EPIPE) {
    char how[160] = "";
    if (e != 0) snprintf(how, sizeof(how), " (%s)", err);
    /* No cause came with the end: the peer died (killed, crashed) or is of a
     * build that does not tell. */
    snprintf(msg, sizeof(msg),
             "%s: rank %d closed the connection%s while this rank was %s %zu bytes (it died, or failed "
             "without telling why; see its log)", c->group, c->peerRank, how, dirWord(r->dir), r->bytes);
    return gbNetTcpConnFail(c, gbRemoteError, msg, &peer);
  }
  snprintf(msg, sizeof(msg), "%s: the connection to rank %d failed while this rank was %s %zu bytes: %s",
           c->group, c->peerRank, dirWord(r->dir), r->bytes, err);
  peer.code = gbSystemError;
  return gbNetTcpConnFail(c, gbSystemError, msg, &peer);
}

/* Moves as much as the socket takes without blocking, in one direction. */
static gbResult_t drive(gbNetConn_t* c, int s, int dir) {
  gbNetTcpSock_t* k = &c->socks[s];
  char err[128];
  for (gbNetReq_t* r = k->cur[dir]; r != NULL; r = k->cur[dir]) {
    size_t base = (size_t)s * r->piece;
    size_t len = r->bytes - base < r->piece ? r->bytes - base : r->piece;
    char* p = r->buf + base + k->off[dir];
    ssize_t n = dir == GB_DIR_SEND ? gbSockTrySend(k->fd, p, len - k->off[dir], err, sizeof(err))
                                   : gbSockTryRecv(k->fd, p, len - k->off[dir], err, sizeof(err));
    if (n < 0) return fail(c, r, err, errno);
    k->off[dir] += (size_t)n;
    /* Short: the kernel has no more room or data now; poll will say when. */
    if (k->off[dir] < len) break;
    k->off[dir] = 0;
    if (--r->piecesLeft == 0) r->done = 1;
    gbNetReq_t* next = r->next;
    while (next != NULL && next->npieces <= s) next = next->next;
    k->cur[dir] = next;
  }
  return gbSuccess;
}

static gbResult_t progress(gbNetConn_t* c) {
  if (c->shm) return gbNetTcpShmProgress(c);
  if (c->answerLeft > 0) GB_CHECK(gbNetTcpAnswerPoll(c));
  for (int s = 0; s < c->nsocks; s++) {
    for (int dir = 0; dir < 2; dir++)
      if (c->socks[s].cur[dir] != NULL && !(s == 0 && dir == GB_DIR_RECV && c->answerLeft > 0))
        GB_CHECK(drive(c, s, dir));
  }
  return gbSuccess;
}

static gbResult_t post(gbNetConn_t* c, char* buf, size_t bytes, int dir, gbNetReq_t** req) {
  *req = NULL;
  if (c->err != gbSuccess) return sticky(c);
  gbNetReq_t* r = c->freeList;
  if (r != NULL) {
    c->freeList = r->next;
    c->nfree--;
  } else if ((r = malloc(sizeof(*r))) == NULL) {
    return gbErrorSet(gbSystemError, "%s: out of memory posting a %s of %zu bytes to rank %d", c->group,
                      dir == GB_DIR_SEND ? "send" : "receive", bytes, c->peerRank);
  }
  memset(r, 0, sizeof(*r));
  r->ops = &gbNetTcpOps;
  r->conn = c;
  r->buf = buf;
  r->bytes = bytes;
  r->dir = dir;
  if (bytes > 0) {
    size_t share = (bytes + (size_t)c->nsocks - 1) / (size_t)c->nsocks;
    r->piece = share > GB_NET_TCP_MIN_PIECE ? share : GB_NET_TCP_MIN_PIECE;
    r->npieces = (int)((bytes + r->piece - 1) / r->piece);
  }
  r->piecesLeft = r->npieces;
  r->done = r->npieces == 0;
  r->prev = c->tail[dir];
  if (c->tail[dir] != NULL) c->tail[dir]->next = r;
  else c->head[dir] = r;
  c->tail[dir] = r;
  *req = r;
  if (c->shm) return gbSuccess; /* the rings drain the queue in order */
  /* An idle socket starts on this request; a busy one reaches it in order. */
  for (int s = 0; s < r->npieces; s++) {
    if (c->socks[s].cur[dir] == NULL) {
      c->socks[s].cur[dir] = r;
      c->socks[s].off[dir] = 0;
    }
  }
  return gbSuccess;
}

gbResult_t gbNetTcpIsend(gbNetConn_t* c, const void* buf, size_t bytes, gbNetReq_t** req) {
  return post(c, (char*)buf, bytes, GB_DIR_SEND, req);
}

gbResult_t gbNetTcpIrecv(gbNetConn_t* c, void* buf, size_t bytes, gbNetReq_t** req) {
  return post(c, buf, bytes, GB_DIR_RECV, req);
}

void gbNetTcpReqFree(gbNetConn_t* c, gbNetReq_t* r) {
  if (c->nfree < FREE_KEEP) {
    r->next = c->freeList;
    c->freeList = r;
    c->nfree++;
  } else {
    free(r);
  }
}

gbResult_t gbNetTcpTest(gbNetReq_t* r, int* done) {
  *done = 0;
  if (r == NULL) return gbErrorSet(gbInternalError, "net test on a NULL request");
  gbNetConn_t* c = r->conn;
  if (!r->done) {
    if (c->err != gbSuccess) return sticky(c);
    GB_CHECK(progress(c));
    if (!r->done) return gbSuccess;
  }
  if (r->prev != NULL) r->prev->next = r->next;
  else c->head[r->dir] = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  else c->tail[r->dir] = r->prev;
  gbNetTcpReqFree(c, r);
  *done = 1;
  return gbSuccess;
}

int gbNetTcpPollFds(gbNetReq_t* r, uint64_t round, struct pollfd* fds, int max) {
  gbNetConn_t* c = r->conn;
  if (c->shm) return -1; /* nothing to poll: gbNetWaitAll tests again after a backoff */
  if (c->pollRound == round) return 0;
  c->pollRound = round;
  int m = 0;
  for (int s = 0; s < c->nsocks && m < max; s++) {
    short ev = (short)((c->socks[s].cur[GB_DIR_SEND] ? POLLOUT : 0) |
                       (c->socks[s].cur[GB_DIR_RECV] || (s == 0 && c->answerLeft > 0) ? POLLIN : 0));
    if (ev != 0) fds[m++] = (struct pollfd){c->socks[s].fd, ev, 0};
  }
  return m;
}

void gbNetTcpReqInfo(gbNetReq_t* r, gbNetLabel_t* label, int* isSend, size_t* bytes) {
  label->peerRank = r->conn->peerRank;
  label->group = r->conn->group;
  *isSend = r->dir == GB_DIR_SEND;
  *bytes = r->bytes;
}
