/* TCP connections: several sockets to one peer, opened by connect() (each
 * sending the hello) or assembled by the listener's accept(). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/result.h"
#include "net/tcp/tcp.h"

gbResult_t gbNetTcpConnCreate(const int* fds, int nsocks, gbNetLabel_t label, gbNetConn_t** out) {
  gbNetConn_t* c = calloc(1, sizeof(*c));
  gbNetTcpSock_t* socks = calloc((size_t)nsocks, sizeof(*socks));
  if (c == NULL || socks == NULL) {
    free(c);
    free(socks);
    for (int i = 0; i < nsocks; i++) gbSockClose(fds[i]);
    return gbErrorSet(gbSystemError, "out of memory creating a connection to rank %d", label.peerRank);
  }
  for (int i = 0; i < nsocks; i++) socks[i].fd = fds[i];
  c->nsocks = nsocks;
  c->socks = socks;
  c->peerRank = label.peerRank;
  /* A copy: the label's text may not outlive the connection. */
  snprintf(c->group, sizeof(c->group), "%s", label.group ? label.group : "net");
  atomic_init(&c->shut, 0);
  c->err = gbSuccess;
  *out = c;
  return gbSuccess;
}

gbResult_t gbNetTcpConnect(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbNetLabel_t label,
                           gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out) {
  int fds[GB_NET_TCP_MAX_SOCKS];
  int n = hello->nsocks;
  const char* group = label.group ? label.group : "net";
  *out = NULL;
  if (n < 1 || n > GB_NET_TCP_MAX_SOCKS)
    return gbErrorSet(gbInvalidArgument, "%s: connection to rank %d asks for %d sockets (need 1..%d; "
                      "check GPUBRIDGE_NSOCKS_PERPEER)", group, label.peerRank, n, GB_NET_TCP_MAX_SOCKS);
  gbResult_t res = gbSuccess;
  int opened = 0;
  char what[96];
  snprintf(what, sizeof(what), "%s: hello to rank %d", group, label.peerRank);
  for (; opened < n; opened++) {
    res = gbSockConnect(addr, deadline, abortFlag, &fds[opened]);
    if (res != gbSuccess) { /* the socket layer knows only the address: say whose it is */
      gbErrorSet(res, "%s: connecting to rank %d: %s", group, label.peerRank, gbErrorLast());
      goto fail;
    }
    gbNetHello_t h = *hello;
    h.sockIndex = opened;
    res = gbSockSendAll(fds[opened], &h, sizeof(h), deadline, abortFlag, what);
    if (res != gbSuccess) {
      gbSockClose(fds[opened]);
      goto fail;
    }
  }
  GB_CHECK(gbNetTcpConnCreate(fds, n, label, out));
  /* The accepting side answers on socket 0 (answer.c): a same-host pair
   * waits for it after the offer of shared memory; over TCP alone it is
   * read before socket 0's first data. */
  if (!label.sameHost) {
    gbNetTcpAnswerExpect(*out);
    return gbSuccess;
  }
  res = gbNetTcpShmOffer(*out, deadline, abortFlag);
  if (res != gbSuccess) {
    gbNetTcpClose(*out);
    *out = NULL;
  }
  return res;
fail:
  for (int i = 0; i < opened; i++) gbSockClose(fds[i]);
  if (!(abortFlag && atomic_load_explicit(abortFlag, memory_order_relaxed))) {
    /* Refused, reset or silent: that peer is the one at fault. */
    gbNetCause_t k = {.faultRank = label.peerRank, .seenBy = -1, .code = res};
    gbNetNoteFailure(gbErrorLast(), &k);
  }
  return res;
}

int gbNetTcpConnFd(gbNetConn_t* c, int i) { return i >= 0 && i < c->nsocks ? c->socks[i].fd : -1; }

gbResult_t gbNetTcpConnFail(gbNetConn_t* c, gbResult_t code, const char* text, const gbNetCause_t* blame) {
  if (c->err == gbSuccess) {
    c->err = code;
    snprintf(c->errMsg, sizeof(c->errMsg), "%s", text);
    c->blamed = blame != NULL;
    if (blame) c->blame = *blame;
    gbErrorSet(c->err, "%s", c->errMsg);
  } else {
    gbErrorRecord(c->errMsg); /* logged once, when it happened */
  }
  if (c->blamed) gbNetNoteFailure(gbErrorLast(), &c->blame);
  return c->err;
}

/* Over TCP the cause is not sent: the sockets carry headerless pieces whose
 * sizes both sides know, so bytes after the data could complete a receive
 * the peer posted; the peer hears the end without a cause. A same-host peer
 * reads it from the shared-memory segment. */
void gbNetTcpShutdown(gbNetConn_t* c, const gbNetCause_t* cause) {
  if (c == NULL) return;
  /* The first shutdown tells the cause; later ones only repeat the end. */
  if (atomic_exchange(&c->shut, 1) == 0) gbNetTcpShmShutdown(c, cause);
  /* shutdown() (not close) is safe while another thread polls these fds. */
  for (int i = 0; i < c->nsocks; i++) shutdown(c->socks[i].fd, SHUT_RDWR);
}

void gbNetTcpClose(gbNetConn_t* c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nsocks; i++) gbSockClose(c->socks[i].fd);
  gbNetTcpShmClose(c);
  for (int d = 0; d < 2; d++) {
    for (gbNetReq_t* r = c->head[d]; r != NULL;) {
      gbNetReq_t* next = r->next;
      free(r);
      r = next;
    }
  }
  for (gbNetReq_t* r = c->freeList; r != NULL;) {
    gbNetReq_t* next = r->next;
    free(r);
    r = next;
  }
  free(c->socks);
  free(c);
}
