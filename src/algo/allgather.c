/* gbAlgoAllGather: a direct exchange. Every member posts its block to every
 * other member and a receive for every other block straight into recv, then
 * waits for all of them: one hop, no scratch for data, and the transport
 * moves the n-1 streams in parallel. */
#include <stdint.h>
#include <string.h>
#include "algo/internal.h"
#include "base/result.h"

gbResult_t gbAlgoAllGather(gbAlgoGroup_t* g, const void* send, void* recv, size_t bytes) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "all-gather", bytes, gbUint8, gbSum, -1, &es));
  const char* name = g->name ? g->name : "?";
  int n = g->n, me = g->me;
  if (bytes == 0) return gbSuccess;
  GB_CHECK(gbAlgoCheckBlocks(g, "all-gather", send, recv, bytes));
  char* out = recv;
  char* mine = out + (size_t)me * bytes;
  /* In place (send == mine) the block is already where it belongs. */
  if ((const char*)send != mine) memcpy(mine, send, bytes);
  if (n == 1) return gbSuccess;
  GB_TRACE(GB_LOG_COLL, "algo all-gather on %s: %zu bytes per member, member %d of %d", name, bytes,
           me, n);

  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, 2 * (size_t)n * sizeof(gbNetReq_t*), &scratch));
  gbNetReq_t** reqs = scratch;
  int nreq = 0;
  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  for (int i = 0; i < n; i++) {
    if (i == me) continue;
    GB_CHECK(gbAlgoPostRecv(g, i, out + (size_t)i * bytes, bytes, reqs, &nreq));
    GB_CHECK(gbAlgoPostSend(g, i, mine, bytes, reqs, &nreq));
  }
  GB_CHECK(gbNetWaitAll(reqs, nreq, deadline, g->abortFlag));
  return gbSuccess;
}
