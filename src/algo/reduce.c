/* gbAlgoReduce: the all-reduce's order, with the result gathered on root
 * only. Exchange: everyone sends to root, which folds. Ring: the ring
 * reduce-scatter, then every member sends its finished slice to root. */
#include "algo/internal.h"
#include "base/dtype.h"
#include "base/result.h"

/* Root receives slice j from member j into recv; the others send theirs. */
static gbResult_t gatherSlices(gbAlgoGroup_t* g, const void* mine, void* recv, size_t count,
                               size_t es, int root, gbDeadline_t deadline) {
  int n = g->n, nreq = 0;
  if (g->me != root) {
    gbNetReq_t* req[1];
    size_t len = gbAlgoSliceBegin(count, n, g->me + 1) - gbAlgoSliceBegin(count, n, g->me);
    GB_CHECK(gbAlgoPostSend(g, root, mine, len * es, req, &nreq));
    if (nreq > 0) GB_CHECK(gbNetWaitAll(req, nreq, deadline, g->abortFlag));
    return gbSuccess;
  }
  /* My own slice is already in recv, so the scratch is free for the requests. */
  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, (size_t)n * sizeof(gbNetReq_t*), &scratch));
  gbNetReq_t** reqs = scratch;
  for (int j = 0; j < n; j++) {
    if (j == root) continue;
    size_t b = gbAlgoSliceBegin(count, n, j), e = gbAlgoSliceBegin(count, n, j + 1);
    GB_CHECK(gbAlgoPostRecv(g, j, (char*)recv + b * es, (e - b) * es, reqs, &nreq));
  }
  if (nreq > 0) GB_CHECK(gbNetWaitAll(reqs, nreq, deadline, g->abortFlag));
  return gbSuccess;
}

gbResult_t gbAlgoReduce(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                        gbDataType_t dt, gbRedOp_t op, int divisor, int root) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "reduce", count, dt, op, root, &es));
  if (root < 0) {
    return gbErrorSet(gbInvalidArgument, "algo reduce on group %s: root %d is not a member (0..%d)",
                      g->name ? g->name : "?", root, g->n - 1);
  }
  if (count == 0) return gbSuccess;
  if (send == NULL || (g->me == root && recv == NULL)) {
    return gbErrorSet(gbInvalidArgument, "algo reduce on group %s: %s buffer is NULL for %zu elements",
                      g->name ? g->name : "?", send == NULL ? "send" : "recv", count);
  }
  if (g->n == 1) {
    gbAlgoLocal(send, recv, count, es, dt, divisor);
    return gbSuccess;
  }
  size_t bytes = count * es;
  int exchange = gbAlgoUseExchange(g, bytes);
  GB_TRACE(GB_LOG_COLL, "algo reduce on %s: %zu x %s %s to %d, divisor %d, member %d of %d, %s",
           g->name ? g->name : "?", count, gbDtypeName(dt), gbOpName(op), root, divisor, g->me,
           g->n, exchange ? "exchange" : "ring");
  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  if (exchange) return gbAlgoExchange(g, send, recv, count, dt, op, divisor, root, deadline);
  char* out = g->me == root ? (char*)recv + gbAlgoSliceBegin(count, g->n, g->me) * es : NULL;
  const void* mine;
  GB_CHECK(gbAlgoRing(g, send, NULL, out, count, dt, op, divisor, 0, deadline, &mine));
  return gatherSlices(g, mine, recv, count, es, root, deadline);
}
