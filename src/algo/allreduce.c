/* gbAlgoAllReduce: picks the exchange or the ring order (algo.h) from facts
 * every member shares, so every member runs the same algorithm.
 * gbAlgoAllReduceChunks: one such all-reduce per chunk, under one deadline. */
#include "algo/internal.h"
#include "base/dtype.h"
#include "base/result.h"

static gbResult_t allReduceBy(gbAlgoGroup_t* g, const void* send, void* recv, size_t count, gbDataType_t dt,
                              gbRedOp_t op, int divisor, gbDeadline_t deadline) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "all-reduce", count, dt, op, -1, &es));
  if (count == 0) return gbSuccess;
  if (send == NULL || recv == NULL) {
    return gbErrorSet(gbInvalidArgument, "algo all-reduce on group %s: %s buffer is NULL for %zu elements",
                      g->name ? g->name : "?", send == NULL ? "send" : "recv", count);
  }
  if (g->n == 1) {
    gbAlgoLocal(send, recv, count, es, dt, divisor);
    return gbSuccess;
  }
  size_t bytes = count * es;
  int exchange = gbAlgoUseExchange(g, bytes);
  GB_TRACE(GB_LOG_COLL, "algo all-reduce on %s: %zu x %s %s, divisor %d, member %d of %d, %s",
           g->name ? g->name : "?", count, gbDtypeName(dt), gbOpName(op), divisor, g->me, g->n,
           exchange ? "exchange" : "ring");
  if (exchange) return gbAlgoExchange(g, send, recv, count, dt, op, divisor, -1, deadline);
  char* out = (char*)recv + gbAlgoSliceBegin(count, g->n, g->me) * es;
  return gbAlgoRing(g, send, recv, out, count, dt, op, divisor, 1, deadline, NULL);
}

gbResult_t gbAlgoAllReduce(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                           gbDataType_t dt, gbRedOp_t op, int divisor) {
  return allReduceBy(g, send, recv, count, dt, op, divisor, gbDeadlineIn(g->timeoutSec));
}

gbResult_t gbAlgoAllReduceChunks(gbAlgoGroup_t* g, const void* send, void* recv, size_t count, size_t chunk,
                                 gbDataType_t dt, gbRedOp_t op, int divisor) {
  size_t es = gbDtypeSize(dt);
  if (chunk == 0) chunk = count;
  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  for (size_t off = 0; off < count; off += chunk) {
    size_t n = count - off < chunk ? count - off : chunk;
    GB_CHECK(allReduceBy(g, (const char*)send + off * es, (char*)recv + off * es, n, dt, op, divisor, deadline));
  }
  return gbSuccess;
}
