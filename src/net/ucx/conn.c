/* UCX connections: the control connection (the TCP transport's, one
 * socket), the worker and endpoint, the trade of addresses and tags, and the
 * proof of the secret on UCX itself (ucx.h says why two of each). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/result.h"
#include "net/pending.h"
#include "net/ucx/ucx.h"
#include "os/backoff.h"

#define CARD_MAGIC 0x6762756378636172ull /* "gbucxcar" */
#define NONCE_BYTES 32
#define MAX_ADDRESS_BYTES (64u << 10)
/* How long a close waits for UCX to deliver what was sent before it ends
 * the endpoint anyway. */
#define CLOSE_FLUSH_S 2

/* What each side tells the other over the control socket, then its worker
 * address (addrLen bytes). */
typedef struct {
  uint64_t magic;
  uint64_t recvTag; /* the tag this side receives on */
  uint8_t nonce[NONCE_BYTES];
  uint32_t addrLen;
  uint32_t reserved;
} card_t;

/* The connecting side's first message on UCX: its hello again and the
 * accepting side's nonce. */
typedef struct {
  gbNetHello_t hello;
  uint8_t nonce[NONCE_BYTES];
} proof_t;

typedef struct {
  gbNetListener_t* tcp;
  uint8_t secret[GB_NET_SECRET_BYTES];
  uint64_t commHash;
  gbNetUcxWorker_t* w; /* the communicator's, held while it listens */
} listener_t;

/* ------------------------------------------------------------- listener */

gbResult_t gbNetUcxListen(const gbSockAddr_t* addr, const uint8_t* secret, uint64_t commHash, gbNetListener_t** out) {
  const gbNetUcxLib_t* lib;
  *out = NULL;
  GB_CHECK(gbNetUcxLib(&lib));
  listener_t* l = calloc(1, sizeof(*l));
  if (l == NULL) return gbErrorSet(gbSystemError, "out of memory creating a listener");
  gbResult_t res = gbNetUcxWorkerGet(lib, commHash, &l->w);
  if (res == gbSuccess) res = gbNetTcpOps.listen(addr, secret, commHash, &l->tcp);
  if (res != gbSuccess) {
    gbNetUcxWorkerPut(l->w);
    free(l);
    return res;
  }
  memcpy(l->secret, secret, GB_NET_SECRET_BYTES);
  l->commHash = commHash;
  *out = (gbNetListener_t*)l;
  return gbSuccess;
}

static listener_t* lis(gbNetListener_t* l) { return (listener_t*)l; }
gbResult_t gbNetUcxListenerAddr(gbNetListener_t* l, gbSockAddr_t* out) { return gbNetTcpOps.listenerAddr(lis(l)->tcp, out); }
gbResult_t gbNetUcxListenerServe(gbNetListener_t* l) { return gbNetTcpOps.listenerServe(lis(l)->tcp); }
void gbNetUcxListenerFail(gbNetListener_t* l, const gbNetCause_t* cause) { gbNetTcpOps.listenerFail(lis(l)->tcp, cause); }

int gbNetUcxAsk(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbDeadline_t deadline, gbNetCause_t* out) {
  return gbNetTcpOps.ask(addr, hello, deadline, out);
}

void gbNetUcxTell(const gbSockAddr_t* addr, const gbNetHello_t* hello, const gbNetCause_t* cause,
                  gbDeadline_t deadline) {
  gbNetTcpOps.tell(addr, hello, cause, deadline);
}

void gbNetUcxListenerClose(gbNetListener_t* l) {
  if (l == NULL) return;
  gbNetTcpOps.listenerClose(lis(l)->tcp);
  gbNetUcxWorkerPut(lis(l)->w);
  free(l);
}

/* ---------------------------------------------------------------- errors */

gbResult_t gbNetUcxConnFail(gbNetUcxConn_t* c, gbResult_t code, const char* text, const gbNetCause_t* blame) {
  if (c->err == gbSuccess) {
    c->err = code;
    snprintf(c->errMsg, sizeof(c->errMsg), "%s", text);
    c->blamed = blame != NULL;
    if (blame) c->blame = *blame;
    gbErrorSet(c->err, "%s", c->errMsg);
  } else {
    gbErrorRecord(c->errMsg);
  }
  if (c->blamed) gbNetNoteFailure(gbErrorLast(), &c->blame);
  return c->err;
}

int gbNetUcxPeerGone(ucs_status_t st) {
  return st == GB_UCS_ERR_CONNECTION_RESET || st == GB_UCS_ERR_NOT_CONNECTED || st == GB_UCS_ERR_TIMED_OUT ||
         st == GB_UCS_ERR_REJECTED || (st <= GB_UCS_ERR_FIRST_LINK_FAILURE && st >= GB_UCS_ERR_LAST_ENDPOINT_FAILURE);
}

gbResult_t gbNetUcxShutHere(gbNetUcxConn_t* c, const char* what) {
  char msg[sizeof(c->errMsg)];
  snprintf(msg, sizeof(msg), "%s: the connection to rank %d was shut down by this rank (aborted) while %s", c->group,
           c->peerRank, what);
  return gbNetUcxConnFail(c, gbRemoteError, msg, NULL);
}

gbResult_t gbNetUcxStatusFail(gbNetUcxConn_t* c, ucs_status_t st, const char* what) {
  char msg[sizeof(c->errMsg)];
  const char* words = c->lib->api.ucs_status_string(st);
  gbNetCause_t peer = {.faultRank = c->peerRank, .seenBy = -1, .code = gbRemoteError};
  if (atomic_load(&c->shut)) return gbNetUcxShutHere(c, what);
  if (st == GB_UCS_ERR_NO_MEMORY || st == GB_UCS_ERR_NO_RESOURCE || st == GB_UCS_ERR_EXCEEDS_LIMIT) {
    snprintf(msg, sizeof(msg), "%s: this rank ran out of UCX resources with rank %d while %s (%s); check its "
             "memory and locked-memory limit (ulimit -l)", c->group, c->peerRank, what, words);
    return gbNetUcxConnFail(c, gbSystemError, msg, NULL);
  }
  if (gbNetUcxPeerGone(st)) {
    snprintf(msg, sizeof(msg), "%s: rank %d closed the connection while %s (it died, or failed without telling "
             "why; see its log) (UCX: %s)", c->group, c->peerRank, what, words);
    return gbNetUcxConnFail(c, gbRemoteError, msg, &peer);
  }
  if (st == GB_UCS_ERR_UNREACHABLE || st == GB_UCS_ERR_NO_DEVICE || st == GB_UCS_ERR_UNSUPPORTED) {
    snprintf(msg, sizeof(msg), "%s: cannot reach rank %d over UCX while %s (%s); check UCX_TLS and "
             "UCX_NET_DEVICES on both hosts (ucx_info -d)", c->group, c->peerRank, what, words);
    peer.code = gbSystemError;
    return gbNetUcxConnFail(c, gbSystemError, msg, &peer);
  }
  if (st == GB_UCS_ERR_MESSAGE_TRUNCATED || st == GB_UCS_ERR_INVALID_PARAM) {
    snprintf(msg, sizeof(msg), "%s: UCX refused a message with rank %d while %s (%s): the two sides posted "
             "different sizes, a bug in gpubridge", c->group, c->peerRank, what, words);
    return gbNetUcxConnFail(c, gbInternalError, msg, NULL);
  }
  snprintf(msg, sizeof(msg), "%s: the UCX connection to rank %d failed while %s: %s (status %d)", c->group,
           c->peerRank, what, words, (int)st);
  peer.code = gbSystemError;
  return gbNetUcxConnFail(c, gbSystemError, msg, &peer);
}

int gbNetUcxCtlEnded(gbNetUcxConn_t* c) {
  if (c->ctlEndNs) return 1;
  char b;
  ssize_t n = recv(c->ctlFd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  /* Nothing travels on the socket after set-up: data or its end both mean
   * the peer is done with it. */
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) || n > 0) {
    c->ctlEndNs = gbClockNowNs();
    return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------- set-up */

static void onPeerFailure(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  gbNetUcxConn_t* c = arg;
  int ok = GB_UCS_OK;
  atomic_compare_exchange_strong(&c->epStatus, &ok, status);
}

static gbResult_t connCreate(const gbNetUcxLib_t* lib, uint64_t commHash, gbNetConn_t* ctl, gbNetLabel_t label,
                             gbNetUcxConn_t** out) {
  gbNetUcxConn_t* c = calloc(1, sizeof(*c));
  *out = c;
  if (c == NULL) {
    gbNetTcpOps.close(ctl);
    return gbErrorSet(gbSystemError, "out of memory creating a connection to rank %d", label.peerRank);
  }
  c->lib = lib;
  c->ctl = ctl;
  c->ctlFd = gbNetTcpConnFd(ctl, 0);
  c->peerRank = label.peerRank;
  snprintf(c->group, sizeof(c->group), "%s", label.group ? label.group : "net");
  atomic_init(&c->shut, 0);
  atomic_init(&c->epStatus, GB_UCS_OK);
  return gbNetUcxWorkerGet(lib, commHash, &c->w);
}

/* Waits for the control connection's requests. */
static gbResult_t ctlWait(gbNetUcxConn_t* c, gbNetReq_t** reqs, int n, gbDeadline_t deadline,
                          const atomic_int* abortFlag) {
  gbResult_t res = gbNetWaitAll(reqs, n, deadline, abortFlag);
  if (res == gbSuccess) return gbSuccess;
  /* The control connection's own verdict stands: a cause the peer relayed
   * (its listener refused us naming who failed first), or this rank's abort. */
  gbNetCause_t k, peer = {.faultRank = c->peerRank, .seenBy = -1, .code = res};
  int relayed = gbNetFailureCause(gbErrorLast(), &k);
  int aborted = abortFlag && atomic_load_explicit(abortFlag, memory_order_relaxed);
  char msg[sizeof(c->errMsg)];
  snprintf(msg, sizeof(msg), "%s: setting up UCX with rank %d: %s", c->group, c->peerRank, gbErrorLast());
  return gbNetUcxConnFail(c, res, msg, relayed ? &k : aborted ? NULL : &peer);
}

/* Trades cards and worker addresses over the control connection, then
 * makes the endpoint to the peer's worker. */
static gbResult_t trade(gbNetUcxConn_t* c, int sameHost, card_t* mine, card_t* theirs, gbDeadline_t deadline,
                        const atomic_int* abortFlag) {
  const gbUcpApi_t* u = &c->lib->api;
  ucp_worker_attr_t wa = {.field_mask = GB_UCP_WORKER_ATTR_FIELD_ADDRESS | GB_UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                          .address_flags = sameHost ? 0 : (uint32_t)GB_UCP_WORKER_ADDRESS_FLAG_NET_ONLY};
  ucs_status_t st = u->ucp_worker_query(c->w->h, &wa);
  if (st != GB_UCS_OK) return gbNetUcxStatusFail(c, st, "reading its UCX worker's address");
  *mine = (card_t){.magic = CARD_MAGIC, .addrLen = (uint32_t)wa.address_length};
  gbResult_t res = gbRandomBytes(&mine->recvTag, sizeof(mine->recvTag));
  if (res == gbSuccess) res = gbRandomBytes(mine->nonce, sizeof(mine->nonce));
  mine->recvTag &= ~(1ull << 63); /* the top bit is kept for later use */
  c->recvTag = mine->recvTag;
  gbNetReq_t* r[2];
  char* peerAddr = NULL;
  if (res == gbSuccess && (res = gbNetTcpOps.isend(c->ctl, mine, sizeof(*mine), &r[0])) == gbSuccess &&
      (res = gbNetTcpOps.irecv(c->ctl, theirs, sizeof(*theirs), &r[1])) == gbSuccess)
    res = ctlWait(c, r, 2, deadline, abortFlag);
  if (res == gbSuccess && (theirs->magic != CARD_MAGIC || theirs->addrLen == 0 || theirs->addrLen > MAX_ADDRESS_BYTES)) {
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: rank %d answered the UCX set-up with something else (magic %#llx, %u address "
             "bytes): is it using GPUBRIDGE_TRANSPORT=ucx too, with the same gpubridge?", c->group, c->peerRank,
             (unsigned long long)theirs->magic, theirs->addrLen);
    gbNetCause_t peer = {.faultRank = c->peerRank, .seenBy = -1, .code = gbInvalidUsage};
    res = gbNetUcxConnFail(c, gbInvalidUsage, msg, &peer);
  }
  if (res == gbSuccess && (peerAddr = malloc(theirs->addrLen)) == NULL)
    res = gbErrorSet(gbSystemError, "out of memory for rank %d's UCX address", c->peerRank);
  if (res == gbSuccess && (res = gbNetTcpOps.isend(c->ctl, wa.address, wa.address_length, &r[0])) == gbSuccess &&
      (res = gbNetTcpOps.irecv(c->ctl, peerAddr, theirs->addrLen, &r[1])) == gbSuccess)
    res = ctlWait(c, r, 2, deadline, abortFlag);
  u->ucp_worker_release_address(c->w->h, wa.address);
  if (res == gbSuccess) {
    c->sendTag = theirs->recvTag;
    ucp_ep_params_t ep = {.field_mask = GB_UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | GB_UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        GB_UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (const ucp_address_t*)peerAddr,
                          .err_mode = GB_UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = onPeerFailure, .arg = c}};
    st = u->ucp_ep_create(c->w->h, &ep, &c->ep);
    if (st != GB_UCS_OK) res = gbNetUcxStatusFail(c, st, "connecting to its UCX worker");
  }
  free(peerAddr);
  return res;
}

static gbResult_t finish(gbNetUcxConn_t* c, gbResult_t res, gbNetConn_t** out) {
  if (res != gbSuccess) {
    gbNetUcxClose((gbNetConn_t*)c);
    return res;
  }
  *out = (gbNetConn_t*)c;
  return gbSuccess;
}

gbResult_t gbNetUcxConnect(const gbSockAddr_t* addr, const gbNetHello_t* hello, gbNetLabel_t label,
                           gbDeadline_t deadline, const atomic_int* abortFlag, gbNetConn_t** out) {
  const gbNetUcxLib_t* lib;
  *out = NULL;
  GB_CHECK(gbNetUcxLib(&lib));
  gbNetHello_t h = *hello;
  h.nsocks = 1; /* UCX carries the data; the control connection only sets up and watches */
  gbNetLabel_t ctlLabel = {label.peerRank, label.group, 0};
  gbNetConn_t* ctl;
  GB_CHECK(gbNetTcpOps.connect(addr, &h, ctlLabel, deadline, abortFlag, &ctl));
  gbNetUcxConn_t* c;
  gbResult_t res = connCreate(lib, hello->commHash, ctl, label, &c);
  if (c == NULL) return res;
  card_t mine, theirs;
  proof_t p = {.hello = h}; /* lives until finish(): a send that failed may still name it */
  if (res == gbSuccess) res = trade(c, label.sameHost, &mine, &theirs, deadline, abortFlag);
  if (res == gbSuccess) {
    memcpy(p.nonce, theirs.nonce, NONCE_BYTES);
    gbNetReq_t* r;
    res = gbNetUcxIsend((gbNetConn_t*)c, &p, sizeof(p), &r);
    if (res == gbSuccess) res = gbNetUcxWaitOne(c, (gbNetUcxReq_t*)r, deadline, abortFlag);
  }
  return finish(c, res, out);
}

static int proofGood(const listener_t* l, const proof_t* p, const gbNetHello_t* want, const card_t* mine) {
  return p->hello.magic == GB_NET_HELLO_MAGIC && gbNetSecretEqual(p->hello.secret, l->secret) &&
         p->hello.commHash == l->commHash && p->hello.srcRank == want->srcRank && p->hello.tag == want->tag &&
         memcmp(p->nonce, mine->nonce, NONCE_BYTES) == 0;
}

gbResult_t gbNetUcxAccept(gbNetListener_t* lp, int srcRank, int tag, gbNetLabel_t label, gbDeadline_t deadline,
                          const atomic_int* abortFlag, gbNetConn_t** out) {
  listener_t* l = lis(lp);
  const gbNetUcxLib_t* lib;
  *out = NULL;
  GB_CHECK(gbNetUcxLib(&lib));
  gbNetLabel_t ctlLabel = {label.peerRank, label.group, 0};
  gbNetConn_t* ctl;
  GB_CHECK(gbNetTcpOps.accept(l->tcp, srcRank, tag, ctlLabel, deadline, abortFlag, &ctl));
  gbNetUcxConn_t* c;
  gbResult_t res = connCreate(lib, l->commHash, ctl, label, &c);
  if (c == NULL) return res;
  card_t mine, theirs;
  proof_t p;
  memset(&p, 0, sizeof(p));
  if (res == gbSuccess) res = trade(c, label.sameHost, &mine, &theirs, deadline, abortFlag);
  if (res == gbSuccess) {
    gbNetReq_t* r;
    res = gbNetUcxIrecv((gbNetConn_t*)c, &p, sizeof(p), &r);
    if (res == gbSuccess) res = gbNetUcxWaitOne(c, (gbNetUcxReq_t*)r, deadline, abortFlag);
  }
  gbNetHello_t want = {.srcRank = srcRank, .tag = tag};
  if (res == gbSuccess && !proofGood(l, &p, &want, &mine)) {
    GB_WARN("refused a UCX connection claiming to be rank %d (%s): its proof of the job secret on UCX did not "
            "match the control socket's", srcRank, c->group);
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: rank %d's UCX connection did not prove the job secret: refused (another job, "
             "or a stranger, reached this rank's UCX worker)", c->group, srcRank);
    gbNetCause_t peer = {.faultRank = srcRank, .seenBy = -1, .code = gbRemoteError};
    res = gbNetUcxConnFail(c, gbRemoteError, msg, &peer);
  }
  return finish(c, res, out);
}

/* ------------------------------------------------------------- shutdown */

/* The cause travels on the control socket, which carries nothing else
 * after set-up, then the socket's end: the peer reads both while it waits
 * (xfer.c), so it names the rank that failed first, here or across hosts.
 * send(2) and shutdown(2) are safe while the owning thread uses the
 * connection; the first shutdown tells the cause. */
void gbNetUcxShutdown(gbNetConn_t* cp, const gbNetCause_t* cause) {
  gbNetUcxConn_t* c = (gbNetUcxConn_t*)cp;
  if (c == NULL) return;
  if (atomic_exchange(&c->shut, 1) == 0 && cause != NULL)
    (void)send(c->ctlFd, cause, sizeof(*cause), MSG_DONTWAIT | MSG_NOSIGNAL);
  gbNetTcpOps.shutdown(c->ctl, NULL);
}

int gbNetUcxTold(gbNetConn_t* cp, gbNetCause_t* out) {
  gbNetUcxConn_t* c = (gbNetUcxConn_t*)cp;
  ssize_t n = recv(c->ctlFd, out, sizeof(*out), MSG_PEEK | MSG_DONTWAIT);
  return n == (ssize_t)sizeof(*out) && gbNetCauseSanitize(out);
}

/* Healthy: UCX first delivers what was sent (a send completes once UCX
 * holds its bytes, not once the peer has them), for at most CLOSE_FLUSH_S;
 * the peer's side answers from any wait of its own (every wait progresses
 * its communicator's worker). After a failure or a shutdown the endpoint
 * ends at once. */
static void closeEndpoint(gbNetUcxConn_t* c, gbDeadline_t d) {
  const gbUcpApi_t* u = &c->lib->api;
  int force = c->err != gbSuccess || atomic_load(&c->shut) || atomic_load(&c->epStatus) != GB_UCS_OK ||
              gbNetUcxCtlEnded(c);
  ucp_request_param_t p = {.op_attr_mask = GB_UCP_OP_ATTR_FIELD_FLAGS, .flags = force ? GB_UCP_EP_CLOSE_FLAG_FORCE : 0};
  void* req = u->ucp_ep_close_nbx(c->ep, &p);
  if (req == NULL || GB_UCS_PTR_IS_ERR(req)) return;
  int64_t t0 = gbClockNowNs();
  while (u->ucp_request_check_status(req) == GB_UCS_INPROGRESS && !gbDeadlinePassed(d)) {
    if (u->ucp_worker_progress(c->w->h) == 0) gbOsBackoff(gbClockNowNs() - t0, GB_OS_YIELD_WOKEN_NS, 0);
  }
  u->ucp_request_free(req);
}

/* How many of the connection's requests UCX has not ended. */
static int pending(const gbNetUcxConn_t* c) {
  int n = 0;
  for (const gbNetUcxReq_t* r = c->head; r != NULL; r = r->next) n += !atomic_load(&r->done);
  return n;
}

/* Progress until UCX ended every request of the connection (cancelled, or
 * purged with its endpoint), within d: a rendezvous receive under way or a
 * zero-copy send may still touch its buffer, which the caller frees next. */
static void drain(gbNetUcxConn_t* c, gbDeadline_t d) {
  int64_t t0 = gbClockNowNs();
  while (pending(c) > 0 && !gbDeadlinePassed(d))
    if (c->lib->api.ucp_worker_progress(c->w->h) == 0) gbOsBackoff(gbClockNowNs() - t0, GB_OS_YIELD_WOKEN_NS, 0);
  int left = pending(c);
  if (left > 0)
    GB_WARN("%s: closing the UCX connection to rank %d with %d request(s) UCX did not end within %d s; their buffers "
            "may still be written after this", c->group, c->peerRank, left, CLOSE_FLUSH_S);
}

void gbNetUcxClose(gbNetConn_t* cp) {
  gbNetUcxConn_t* c = (gbNetUcxConn_t*)cp;
  if (c == NULL) return;
  const gbUcpApi_t* u = &c->lib->api;
  if (c->w) {
    gbDeadline_t d = gbDeadlineIn(CLOSE_FLUSH_S);
    for (gbNetUcxReq_t* r = c->head; r != NULL; r = r->next)
      if (!atomic_load(&r->done) && r->ucx) u->ucp_request_cancel(c->w->h, r->ucx);
    if (c->ep) closeEndpoint(c, d);
    gbNetUcxWorkerProgress(c->w);
    drain(c, d);
    gbNetUcxReqsRelease(c); /* no callback of UCX's reaches ours after this */
    gbNetUcxWorkerPut(c->w);
  }
  gbNetTcpOps.close(c->ctl);
  for (gbNetUcxReq_t* r = c->head; r != NULL;) {
    gbNetUcxReq_t* next = r->next;
    free(r);
    r = next;
  }
  for (gbNetUcxReq_t* r = c->freeList; r != NULL;) {
    gbNetUcxReq_t* next = r->next;
    free(r);
    r = next;
  }
  free(c);
}
