/* gbAlgoSendRecv: a fused group of sends and receives. Everything is checked
 * first, then copies to myself are done, then every send and receive is
 * posted and all are waited for together: two members sending each other
 * large messages never wait on each other, because both receives are posted
 * before either side waits. Per connection and direction the transport keeps
 * posting order, which is list order, so the k-th send to a peer fills its
 * k-th receive from me. */
#include <string.h>
#include "algo/internal.h"
#include "base/result.h"

/* Index of the next send (isSend 1) or receive (0) with myself at or after
 * i, or nops. Zero-byte entries are skipped, as they are with other peers. */
static int nextSelf(const gbAlgoP2p_t* ops, int nops, int me, int isSend, int i) {
  while (i < nops && !(ops[i].peer == me && (ops[i].isSend != 0) == isSend && ops[i].bytes > 0)) i++;
  return i;
}

static gbResult_t checkOps(const gbAlgoGroup_t* g, const gbAlgoP2p_t* ops, int nops) {
  const char* name = g->name ? g->name : "?";
  if (nops < 0 || (nops > 0 && ops == NULL)) {
    return gbErrorSet(gbInvalidArgument, "algo send/recv on group %s: %d operations at %p",
                      name, nops, (const void*)ops);
  }
  for (int i = 0; i < nops; i++) {
    const gbAlgoP2p_t* o = &ops[i];
    if (o->peer < 0 || o->peer >= g->n) {
      return gbErrorSet(gbInvalidArgument,
                        "algo send/recv on group %s: operation %d (%s of %zu bytes) names peer %d, "
                        "not a member (0..%d)", name, i, o->isSend ? "send" : "receive", o->bytes,
                        o->peer, g->n - 1);
    }
    if (o->bytes > 0 && o->buf == NULL) {
      return gbErrorSet(gbInvalidArgument,
                        "algo send/recv on group %s: operation %d (%s of %zu bytes with peer %d) "
                        "has a NULL buffer", name, i, o->isSend ? "send" : "receive", o->bytes,
                        o->peer);
    }
  }
  /* Sends to myself pair with receives from myself in list order; each pair
   * must agree, since nothing else would ever complete the odd one. */
  int s = nextSelf(ops, nops, g->me, 1, 0), r = nextSelf(ops, nops, g->me, 0, 0);
  for (int k = 0; s < nops || r < nops; k++) {
    if (s >= nops || r >= nops) {
      return gbErrorSet(gbInvalidArgument,
                        "algo send/recv on group %s: member %d's %s to itself number %d "
                        "(operation %d) has no matching %s to itself; pair them in list order",
                        name, g->me, s < nops ? "send" : "receive", k, s < nops ? s : r,
                        s < nops ? "receive" : "send");
    }
    if (ops[s].bytes != ops[r].bytes) {
      return gbErrorSet(gbInvalidArgument,
                        "algo send/recv on group %s: member %d's send to itself number %d "
                        "(operation %d, %zu bytes) and receive number %d (operation %d, %zu bytes) "
                        "differ in size", name, g->me, k, s, ops[s].bytes, k, r, ops[r].bytes);
    }
    s = nextSelf(ops, nops, g->me, 1, s + 1);
    r = nextSelf(ops, nops, g->me, 0, r + 1);
  }
  return gbSuccess;
}

gbResult_t gbAlgoSendRecv(gbAlgoGroup_t* g, const gbAlgoP2p_t* ops, int nops) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "send/recv", 0, gbUint8, gbSum, -1, &es));
  GB_CHECK(checkOps(g, ops, nops));
  int me = g->me;

  int s = nextSelf(ops, nops, me, 1, 0), r = nextSelf(ops, nops, me, 0, 0);
  while (s < nops) {
    /* memmove: a copy onto itself, or between overlapping parts, is allowed. */
    if (ops[s].buf != ops[r].buf) memmove(ops[r].buf, ops[s].buf, ops[s].bytes);
    s = nextSelf(ops, nops, me, 1, s + 1);
    r = nextSelf(ops, nops, me, 0, r + 1);
  }

  int remote = 0;
  for (int i = 0; i < nops; i++) remote += ops[i].peer != me && ops[i].bytes > 0;
  if (remote == 0) return gbSuccess;
  GB_TRACE(GB_LOG_COLL, "algo send/recv on %s: %d operations, %d over the network, member %d of %d",
           g->name ? g->name : "?", nops, remote, me, g->n);

  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, (size_t)remote * sizeof(gbNetReq_t*), &scratch));
  gbNetReq_t** reqs = scratch;
  int nreq = 0;
  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  for (int i = 0; i < nops; i++) {
    const gbAlgoP2p_t* o = &ops[i];
    if (o->peer == me) continue;
    if (o->isSend) GB_CHECK(gbAlgoPostSend(g, o->peer, o->buf, o->bytes, reqs, &nreq));
    else GB_CHECK(gbAlgoPostRecv(g, o->peer, o->buf, o->bytes, reqs, &nreq));
  }
  GB_CHECK(gbNetWaitAll(reqs, nreq, deadline, g->abortFlag));
  return gbSuccess;
}
