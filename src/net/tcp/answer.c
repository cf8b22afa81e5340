/* The accepting side's answer to a connection, on socket 0 after the hellos
 * (and after the shared-memory offer, for a same-host peer): accepted, over
 * TCP or shared memory, or refused because the accepting rank failed before
 * it took the connection, with that failure's cause (who failed first). The
 * connecting side reads it first, so the first thing every connection
 * receives is this fixed message, over TCP and shared memory alike, never
 * data. A same-host pair waits for it in connect (the offer needs it); over
 * TCP alone connect returns at once and the answer is read before the first
 * data socket 0 receives, or when the connection fails (so connect, then
 * accept, on one thread still works). Only connections whose hello passed
 * (this job's secret, this communicator) are answered: strangers hear
 * nothing (net/pending.c). gbNetTcpAsk opens a connection only to read that
 * answer: its hello's tag is one no accept takes, so a failed listener
 * refuses it with the cause and a healthy one leaves it unanswered. The
 * other way round, gbNetTcpTell sends a cause after its hello to a rank
 * that waits for this one's connection; its accept reads it (listener.c). */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/result.h"
#include "net/tcp/tcp.h"

#define ANSWER_MAGIC 0x67626173u /* "gbas" */

typedef struct {
  uint32_t magic;
  int32_t status;     /* GB_NET_ANSWER_* */
  gbNetCause_t cause; /* GB_NET_ANSWER_REFUSED: why this side gave up */
} answer_t;
_Static_assert(sizeof(answer_t) <= sizeof(((gbNetConn_t*)0)->answerBuf), "answerBuf holds an answer");

gbResult_t gbNetTcpAnswerSend(gbNetConn_t* c, int status, gbDeadline_t deadline, const atomic_int* abortFlag) {
  answer_t a;
  memset(&a, 0, sizeof(a));
  a.magic = ANSWER_MAGIC;
  a.status = status;
  char what[96];
  snprintf(what, sizeof(what), "%s: answer to rank %d's connection", c->group, c->peerRank);
  return gbSockSendAll(c->socks[0].fd, &a, sizeof(a), deadline, abortFlag, what);
}

/* Reads and drops what the peer sent that nobody will read (its offer), so
 * the close that follows is an orderly end, not a reset that could reach the
 * peer before the answer does. */
static void drain(int fd) {
  char buf[512];
  for (int i = 0; i < 16 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++) {
  }
}

void gbNetTcpAnswerRefuse(int fd, const gbNetCause_t* cause) {
  answer_t a;
  memset(&a, 0, sizeof(a));
  a.magic = ANSWER_MAGIC;
  a.status = GB_NET_ANSWER_REFUSED;
  a.cause = *cause;
  drain(fd);
  /* A fresh socket's buffer takes these bytes at once; if not, the peer
   * hears the close as before. */
  if (send(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(a)) shutdown(fd, SHUT_WR);
}

void gbNetTcpAnswerClose(int fd) {
  if (fd < 0) return;
  drain(fd);
  gbSockClose(fd);
}

/* A complete answer: *status, or the connection failed with the refusal's
 * cause (or as garbled). */
static gbResult_t judge(gbNetConn_t* c, const answer_t* a, int* status) {
  char msg[sizeof(c->errMsg)];
  if (a->magic != ANSWER_MAGIC || a->status < GB_NET_ANSWER_TCP || a->status > GB_NET_ANSWER_REFUSED) {
    snprintf(msg, sizeof(msg), "%s: rank %d's answer to this rank's connection is no gpubridge answer (magic %08x, "
             "status %d)", c->group, c->peerRank, (unsigned)a->magic, (int)a->status);
    return gbNetTcpConnFail(c, gbSystemError, msg, NULL);
  }
  if (a->status == GB_NET_ANSWER_REFUSED) {
    gbNetCause_t k = a->cause;
    if (!gbNetCauseSanitize(&k)) k = (gbNetCause_t){.faultRank = c->peerRank, .seenBy = c->peerRank, .code = gbRemoteError};
    gbNetCauseText(msg, sizeof(msg), c->group, c->peerRank, &k, " (its answer to this rank's connection)");
    return gbNetTcpConnFail(c, gbRemoteError, msg, &k);
  }
  *status = a->status;
  return gbSuccess;
}

gbResult_t gbNetTcpAnswerPoll(gbNetConn_t* c) {
  char err[128], msg[sizeof(c->errMsg)];
  /* This rank shut the connection down itself: the answer no longer
   * matters, and the end read below would be its own (xfer.c says so). */
  if (atomic_load(&c->shut)) {
    c->answerLeft = 0;
    return gbSuccess;
  }
  size_t have = sizeof(answer_t) - c->answerLeft;
  ssize_t n = gbSockTryRecv(c->socks[0].fd, c->answerBuf + have, c->answerLeft, err, sizeof(err));
  if (n < 0) {
    snprintf(msg, sizeof(msg), "%s: rank %d closed the connection before it answered it (%s; it died, or failed "
             "without telling why; see its log)", c->group, c->peerRank, err);
    gbNetCause_t k = {.faultRank = c->peerRank, .seenBy = -1, .code = gbRemoteError};
    return gbNetTcpConnFail(c, gbRemoteError, msg, &k);
  }
  c->answerLeft -= (size_t)n;
  if (c->answerLeft > 0) return gbSuccess;
  answer_t a;
  memcpy(&a, c->answerBuf, sizeof(a));
  int status = 0;
  return judge(c, &a, &status);
}

void gbNetTcpAnswerExpect(gbNetConn_t* c) { c->answerLeft = sizeof(answer_t); }

/* One socket to addr carrying hello (as socket 0 of 1) and, when cause is
 * not NULL, the cause after it; -1 when it could not be sent. A fresh
 * socket's buffer takes both at once; what was sent stays readable after a
 * close. Quiet. */
static int sendHello(const gbSockAddr_t* addr, const gbNetHello_t* hello, const gbNetCause_t* cause,
                     gbDeadline_t deadline) {
  int fd;
  if (gbSockConnectOnce(addr, deadline, NULL, &fd) != 0) return -1;
  struct {
    gbNetHello_t hello;
    gbNetCause_t cause;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.hello = *hello;
  msg.hello.sockIndex = 0;
  msg.hello.nsocks = 1;
  if (cause) msg.cause = *cause;
  size_t bytes = cause ? sizeof(msg) : sizeof(msg.hello);
  char err[128];
  if (gbSockTrySend(fd, &msg, bytes, err, sizeof(err)) != (ssize_t)bytes) {
    gbSockClose(fd);
    return -1;
  }
  return fd;
}

int gbNetTcpAsk(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbDeadline_t deadline, gbNetCause_t* out) {
  int fd = sendHello(addr, hello, NULL, deadline);
  if (fd < 0) return 0;
  answer_t a;
  size_t got = 0;
  char err[128];
  int ok = 1;
  while (ok && got < sizeof(a)) {
    struct pollfd p = {fd, POLLIN, 0};
    if (gbDeadlinePassed(deadline) || (poll(&p, 1, gbDeadlineRemainingMs(deadline, 50)) < 0 && errno != EINTR)) {
      ok = 0;
      break;
    }
    ssize_t n = gbSockTryRecv(fd, (char*)&a + got, sizeof(a) - got, err, sizeof(err));
    if (n < 0) ok = 0;
    else got += (size_t)n;
  }
  gbSockClose(fd);
  if (!ok || a.magic != ANSWER_MAGIC || a.status != GB_NET_ANSWER_REFUSED) return 0;
  *out = a.cause;
  return gbNetCauseSanitize(out);
}

void gbNetTcpTell(const gbSockAddr_t* addr, const gbNetHello_t* hello, const gbNetCause_t* cause, gbDeadline_t deadline) {
  int fd = sendHello(addr, hello, cause, deadline);
  if (fd >= 0) gbSockClose(fd);
}

int gbNetTcpToldOn(int fd, gbNetCause_t* out) {
  if (fd < 0 || recv(fd, out, sizeof(*out), MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof(*out)) return 0;
  return gbNetCauseSanitize(out);
}

gbResult_t gbNetTcpAnswerRead(gbNetConn_t* c, gbDeadline_t deadline, const atomic_int* abortFlag, int* status) {
  answer_t a;
  char what[96], msg[sizeof(c->errMsg)];
  snprintf(what, sizeof(what), "%s: rank %d's answer to this rank's connection", c->group, c->peerRank);
  gbResult_t res = gbSockRecvAll(c->socks[0].fd, &a, sizeof(a), deadline, abortFlag, what);
  if (res != gbSuccess) {
    if (abortFlag && atomic_load_explicit(abortFlag, memory_order_relaxed)) return res;
    /* It closed or stalled before answering: that peer is the one at fault. */
    gbNetCause_t k = {.faultRank = c->peerRank, .seenBy = -1, .code = res};
    snprintf(msg, sizeof(msg), "%s", gbErrorLast());
    return gbNetTcpConnFail(c, res, msg, &k);
  }
  return judge(c, &a, status);
}
