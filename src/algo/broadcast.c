/* gbAlgoBroadcast: a chain root -> root+1 -> ... -> root-1, in pieces: each
 * member forwards piece k while it receives the pieces after it. */
#include "algo/internal.h"
#include "base/result.h"

gbResult_t gbAlgoBroadcast(gbAlgoGroup_t* g, void* buf, size_t bytes, int root) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "broadcast", 0, gbUint8, gbSum, root, &es));
  const char* name = g->name ? g->name : "?";
  if (root < 0) {
    return gbErrorSet(gbInvalidArgument, "algo broadcast on group %s: root %d is not a member (0..%d)",
                      name, root, g->n - 1);
  }
  if (bytes == 0 || g->n == 1) return gbSuccess;
  if (buf == NULL) {
    return gbErrorSet(gbInvalidArgument, "algo broadcast on group %s: buffer is NULL for %zu bytes",
                      name, bytes);
  }
  int n = g->n;
  int pos = gbAlgoMod(g->me - root, n);
  int prev = gbAlgoMod(g->me - 1, n), next = gbAlgoMod(g->me + 1, n);
  int hasPrev = pos > 0, hasNext = pos < n - 1;
  size_t pb = gbAlgoPieceElems(g, 1);
  size_t pieces = (bytes + pb - 1) / pb;
  GB_TRACE(GB_LOG_COLL, "algo broadcast on %s: %zu bytes from %d, member %d of %d, %zu pieces",
           name, bytes, root, g->me, n, pieces);
  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  char* p = buf;
#define PIECE_LEN(k) ((k) + 1 < pieces ? pb : bytes - (k) * pb)

  gbNetReq_t* recvReq[GB_ALGO_WINDOW];
  gbNetReq_t* sendReq[2];
  size_t nextRecv = 0;
  for (size_t k = 0; k < pieces; k++) {
    while (hasPrev && nextRecv < pieces && nextRecv < k + GB_ALGO_WINDOW) {
      int one = 0;
      GB_CHECK(gbAlgoPostRecv(g, prev, p + nextRecv * pb, PIECE_LEN(nextRecv),
                              &recvReq[nextRecv % GB_ALGO_WINDOW], &one));
      nextRecv++;
    }
    if (hasPrev) {
      /* Piece k arrives while piece k-1 goes on to the next member. */
      gbNetReq_t* ws[2] = {recvReq[k % GB_ALGO_WINDOW], NULL};
      int nw = 1;
      if (hasNext && k > 0) ws[nw++] = sendReq[(k - 1) & 1];
      GB_CHECK(gbNetWaitAll(ws, nw, deadline, g->abortFlag));
    }
    if (hasNext) {
      int one = 0;
      GB_CHECK(gbAlgoPostSend(g, next, p + k * pb, PIECE_LEN(k), &sendReq[k & 1], &one));
    }
    if (!hasPrev && k > 0) {
      /* The root keeps two pieces in flight. */
      GB_CHECK(gbNetWaitAll(&sendReq[(k - 1) & 1], 1, deadline, g->abortFlag));
    }
  }
  if (hasNext) GB_CHECK(gbNetWaitAll(&sendReq[(pieces - 1) & 1], 1, deadline, g->abortFlag));
#undef PIECE_LEN
  return gbSuccess;
}
