/* gbAlgoAllToAll: a direct exchange. Block i of my send goes to member i and
 * member i's block me lands in recv block i; every send and receive is posted
 * at once and waited for together, so no pair waits on another. send and
 * recv never overlap here: the API's in-place all-to-all reaches algo only
 * through separate staging slots (flat) or as a send/recv group that the
 * island sends from a copy (native). */
#include <stdint.h>
#include <string.h>
#include "algo/internal.h"
#include "base/result.h"

gbResult_t gbAlgoAllToAll(gbAlgoGroup_t* g, const void* send, void* recv, size_t bytes) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "all-to-all", bytes, gbUint8, gbSum, -1, &es));
  const char* name = g->name ? g->name : "?";
  int n = g->n, me = g->me;
  if (bytes == 0) return gbSuccess;
  GB_CHECK(gbAlgoCheckBlocks(g, "all-to-all", send, recv, bytes));
  size_t total = (size_t)n * bytes;
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if (s < r + total && r < s + total) {
    return gbErrorSet(gbInvalidArgument,
                      "algo all-to-all on group %s: send and recv overlap (%zu bytes each); "
                      "pass separate buffers (an in-place all-to-all is staged by the caller)", name, total);
  }
  const char* in = send;
  char* out = recv;
  memcpy(out + (size_t)me * bytes, in + (size_t)me * bytes, bytes);
  if (n == 1) return gbSuccess;
  GB_TRACE(GB_LOG_COLL, "algo all-to-all on %s: %zu bytes per pair, member %d of %d", name, bytes,
           me, n);

  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, 2 * (size_t)n * sizeof(gbNetReq_t*), &scratch));
  gbNetReq_t** reqs = scratch;
  int nreq = 0;
  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  for (int i = 0; i < n; i++) {
    if (i == me) continue;
    GB_CHECK(gbAlgoPostRecv(g, i, out + (size_t)i * bytes, bytes, reqs, &nreq));
    GB_CHECK(gbAlgoPostSend(g, i, in + (size_t)i * bytes, bytes, reqs, &nreq));
  }
  GB_CHECK(gbNetWaitAll(reqs, nreq, deadline, g->abortFlag));
  return gbSuccess;
}
