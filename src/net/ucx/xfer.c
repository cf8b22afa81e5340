/* Moving messages over a UCX connection: one tagged message per isend or
 * irecv (UCX cuts, pipelines and, for large messages, rendezvous-es it
 * itself), on the tag the receiving side chose; both sides post the same
 * sizes in the same order and UCX matches one tag in posted order. Progress
 * is made in test, on the communicator's worker; the control socket's end
 * is looked for while a request waits. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/result.h"
#include "net/ucx/ucx.h"
#include "os/backoff.h"

/* Freed requests kept per connection for reuse. */
#define FREE_KEEP 16
/* After the control socket ended, how long UCX may still deliver what the
 * peer sent before it closed (a send completes once UCX holds its bytes)
 * before a request still waiting fails. */
#define CTL_END_GRACE_NS ((int64_t)500 * 1000 * 1000)
#define CAUSE_GRACE_NS ((int64_t)50 * 1000 * 1000)

static gbResult_t sticky(gbNetUcxConn_t* c) { return gbNetUcxConnFail(c, c->err, c->errMsg, NULL); }

static void what(const gbNetUcxReq_t* r, char* out, size_t len) {
  snprintf(out, len, "this rank was %s %zu bytes", r->isSend ? "sending" : "receiving", r->bytes);
}

static void finished(gbNetUcxReq_t* r, ucs_status_t status) {
  r->status = status;
  atomic_store_explicit(&r->done, 1, memory_order_release);
}

static void sendDone(void* request, ucs_status_t status, void* user) {
  (void)request;
  finished(user, status);
}

static void recvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  (void)request;
  gbNetUcxReq_t* r = user;
  if (info) r->info = *info;
  finished(r, status);
}

static gbResult_t post(gbNetUcxConn_t* c, void* buf, size_t bytes, int isSend, gbNetReq_t** req) {
  *req = NULL;
  if (c->err != gbSuccess) return sticky(c);
  gbNetUcxReq_t* r = c->freeList;
  if (r != NULL) {
    c->freeList = r->next;
    c->nfree--;
  } else if ((r = malloc(sizeof(*r))) == NULL) {
    return gbErrorSet(gbSystemError, "%s: out of memory posting a %s of %zu bytes to rank %d", c->group,
                      isSend ? "send" : "receive", bytes, c->peerRank);
  }
  memset(r, 0, sizeof(*r));
  r->ops = &gbNetUcxOps;
  r->conn = c;
  r->bytes = bytes;
  r->isSend = isSend;
  r->info.length = bytes;
  const gbUcpApi_t* u = &c->lib->api;
  ucp_request_param_t p = {.op_attr_mask = GB_UCP_OP_ATTR_FIELD_CALLBACK | GB_UCP_OP_ATTR_FIELD_USER_DATA,
                           .user_data = r};
  void* ucx;
  if (bytes > 0 && (p.memh = gbNetUcxMemFind(buf, bytes)) != NULL) p.op_attr_mask |= GB_UCP_OP_ATTR_FIELD_MEMH;
  if (isSend) {
    p.cb.send = sendDone;
    ucx = u->ucp_tag_send_nbx(c->ep, buf, bytes, c->sendTag, &p);
  } else {
    p.cb.recv = recvDone;
    p.op_attr_mask |= GB_UCP_OP_ATTR_FIELD_RECV_INFO;
    p.recv_info.tag_info = &r->info; /* filled when UCX finishes at once */
    ucx = u->ucp_tag_recv_nbx(c->w->h, buf, bytes, c->recvTag, ~(ucp_tag_t)0, &p);
  }
  if (GB_UCS_PTR_IS_ERR(ucx)) {
    ucs_status_t st = GB_UCS_PTR_STATUS(ucx);
    if (!gbNetUcxPeerGone(st) || atomic_load(&c->shut)) {
      char w[96];
      what(r, w, sizeof(w));
      free(r);
      return gbNetUcxStatusFail(c, st, w);
    }
    /* An endpoint UCX already saw fail refuses at once: the request ends
     * badly in test, where the peer's cause gets its grace (stalled). */
    r->status = st;
    ucx = NULL;
  }
  r->ucx = ucx;
  if (ucx == NULL) atomic_store(&r->done, 1);
  r->prev = c->tail;
  if (c->tail != NULL) c->tail->next = r;
  else c->head = r;
  c->tail = r;
  *req = (gbNetReq_t*)r;
  return gbSuccess;
}

gbResult_t gbNetUcxIsend(gbNetConn_t* c, const void* buf, size_t bytes, gbNetReq_t** req) {
  return post((gbNetUcxConn_t*)c, (void*)buf, bytes, 1, req);
}

gbResult_t gbNetUcxIrecv(gbNetConn_t* c, void* buf, size_t bytes, gbNetReq_t** req) {
  return post((gbNetUcxConn_t*)c, buf, bytes, 0, req);
}

/* Why a request that is not done cannot finish, if it cannot: this rank
 * shut the connection down; the peer told why it shut it down (the cause
 * names who failed first); UCX saw the peer fail, or the control socket
 * ended without a cause (each given CAUSE_GRACE_NS for a cause, which
 * comes first but on another socket, and the end CTL_END_GRACE_NS for
 * data UCX still delivers). */
static gbResult_t stalled(gbNetUcxConn_t* c, const gbNetUcxReq_t* r) {
  char w[96];
  what(r, w, sizeof(w));
  if (atomic_load(&c->shut)) return gbNetUcxShutHere(c, w);
  gbNetCause_t k;
  /* One peek a test while the socket is quiet; the cause only once it ended. */
  int ended = gbNetUcxCtlEnded(c);
  if (ended && gbNetUcxTold((gbNetConn_t*)c, &k)) {
    char msg[sizeof(c->errMsg)];
    gbNetCauseText(msg, sizeof(msg), c->group, c->peerRank, &k, "");
    return gbNetUcxConnFail(c, gbRemoteError, msg, &k);
  }
  int64_t now = gbClockNowNs();
  ucs_status_t ep = atomic_load(&c->epStatus);
  if (ep != GB_UCS_OK) {
    if (c->epFailNs == 0) c->epFailNs = now;
    if (now - c->epFailNs > CAUSE_GRACE_NS || (ended && now - c->ctlEndNs > CAUSE_GRACE_NS))
      return gbNetUcxStatusFail(c, ep, w);
  }
  if (ended && now - c->ctlEndNs > CTL_END_GRACE_NS)
    return gbNetUcxStatusFail(c, GB_UCS_ERR_CONNECTION_RESET, w);
  return gbSuccess;
}

/* A request UCX ended with an error: a peer that is gone may have told why
 * first (stalled() reads it, or waits CAUSE_GRACE_NS for it); the rest fail
 * at once. */
static gbResult_t finishedBadly(gbNetUcxConn_t* c, const gbNetUcxReq_t* r) {
  /* UCX also cancels what a failed endpoint held (not this rank's doing). */
  int cancelledByFailure = r->status == GB_UCS_ERR_CANCELED && atomic_load(&c->epStatus) != GB_UCS_OK;
  if ((gbNetUcxPeerGone(r->status) || cancelledByFailure) && !atomic_load(&c->shut)) {
    int ok = GB_UCS_OK;
    atomic_compare_exchange_strong(&c->epStatus, &ok, r->status);
    return stalled(c, r);
  }
  char w[96];
  what(r, w, sizeof(w));
  return gbNetUcxStatusFail(c, r->status, w);
}

static void release(gbNetUcxConn_t* c, gbNetUcxReq_t* r) {
  if (r->ucx) c->lib->api.ucp_request_free(r->ucx);
  r->ucx = NULL;
}

gbResult_t gbNetUcxTest(gbNetReq_t* rp, int* done) {
  gbNetUcxReq_t* r = (gbNetUcxReq_t*)rp;
  *done = 0;
  if (r == NULL) return gbErrorSet(gbInternalError, "net test on a NULL request");
  gbNetUcxConn_t* c = r->conn;
  if (!atomic_load_explicit(&r->done, memory_order_acquire)) {
    if (c->err != gbSuccess) return sticky(c);
    gbNetUcxWorkerProgress(c->w);
    if (!atomic_load_explicit(&r->done, memory_order_acquire)) return stalled(c, r);
  }
  if (r->status != GB_UCS_OK) return finishedBadly(c, r);
  if (!r->isSend && r->info.length != r->bytes) {
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: rank %d sent %zu bytes where this rank expected %zu: the two sides posted "
             "different sizes, a bug in gpubridge", c->group, c->peerRank, r->info.length, r->bytes);
    return gbNetUcxConnFail(c, gbInternalError, msg, NULL);
  }
  release(c, r);
  if (r->prev != NULL) r->prev->next = r->next;
  else c->head = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  else c->tail = r->prev;
  if (c->nfree < FREE_KEEP) {
    r->next = c->freeList;
    c->freeList = r;
    c->nfree++;
  } else {
    free(r);
  }
  *done = 1;
  return gbSuccess;
}

/* Nothing to poll: gbNetWaitAll tests again after a backoff, as for a
 * shared-memory ring. UCX's armed event descriptor is not enough where the
 * worker is shared by threads (ranks that are threads of one process): one
 * thread's progress can take the event another sleeps on, and UCX's own
 * queues need progress calls that no descriptor announces. */
int gbNetUcxPollFds(gbNetReq_t* rp, uint64_t round, struct pollfd* fds, int max) {
  (void)rp;
  (void)round;
  (void)fds;
  (void)max;
  return -1;
}

void gbNetUcxReqInfo(gbNetReq_t* rp, gbNetLabel_t* label, int* isSend, size_t* bytes) {
  gbNetUcxReq_t* r = (gbNetUcxReq_t*)rp;
  label->peerRank = r->conn->peerRank;
  label->group = r->conn->group;
  *isSend = r->isSend;
  *bytes = r->bytes;
}

gbResult_t gbNetUcxWaitOne(gbNetUcxConn_t* c, gbNetUcxReq_t* r, gbDeadline_t deadline, const atomic_int* abortFlag) {
  int64_t t0 = gbClockNowNs();
  for (;;) {
    int done;
    GB_CHECK(gbNetUcxTest((gbNetReq_t*)r, &done));
    if (done) return gbSuccess;
    if (abortFlag && atomic_load_explicit(abortFlag, memory_order_relaxed))
      return gbNetUcxShutHere(c, "setting up UCX");
    if (gbDeadlinePassed(deadline)) {
      char msg[256];
      snprintf(msg, sizeof(msg), "%s: rank %d did not finish setting up UCX within %.3g s (is it stopped or "
               "overloaded? GPUBRIDGE_TIMEOUT sets the limit)", c->group, c->peerRank,
               (double)(gbClockNowNs() - t0) / 1e9);
      gbNetCause_t peer = {.faultRank = c->peerRank, .seenBy = -1, .code = gbTimeout};
      return gbNetUcxConnFail(c, gbTimeout, msg, &peer);
    }
    gbOsBackoff(gbClockNowNs() - t0, GB_OS_YIELD_WOKEN_NS, 0);
  }
}

void gbNetUcxReqsRelease(gbNetUcxConn_t* c) {
  for (gbNetUcxReq_t* r = c->head; r != NULL; r = r->next) release(c, r);
}
