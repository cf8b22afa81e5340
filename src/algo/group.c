/* Helpers every algorithm uses: argument checks, pieces, posting, the local
 * case, and freeing a group's scratch. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "algo/internal.h"
#include "base/dtype.h"
#include "base/result.h"

void gbAlgoGroupFree(gbAlgoGroup_t* g) {
  if (g == NULL) return;
  free(g->scratch);
  g->scratch = NULL;
  g->scratchBytes = 0;
}

gbResult_t gbAlgoCheckArgs(const gbAlgoGroup_t* g, const char* what, size_t count,
                           gbDataType_t dt, gbRedOp_t op, int root, size_t* esize) {
  const char* name = (g != NULL && g->name != NULL) ? g->name : "?";
  if (g == NULL || g->n < 1 || g->me < 0 || g->me >= g->n || (g->n > 1 && g->conns == NULL)) {
    return gbErrorSet(gbInternalError, "algo %s on group %s: the group is not set up (n %d, me %d)",
                      what, name, g ? g->n : -1, g ? g->me : -1);
  }
  size_t es = (size_t)dt < (size_t)gbNumTypes ? gbDtypeSize(dt) : 0;
  if (es == 0) {
    return gbErrorSet(gbInvalidArgument, "algo %s on group %s: unknown data type %d; use a gbDataType_t",
                      what, name, (int)dt);
  }
  if (op != gbSum && op != gbProd && op != gbMax && op != gbMin) {
    return gbErrorSet(gbInvalidArgument,
                      "algo %s on group %s: reduction op %d is not sum, prod, max or min "
                      "(pass avg as sum with a divisor)", what, name, (int)op);
  }
  if (root >= g->n) {
    return gbErrorSet(gbInvalidArgument, "algo %s on group %s: root %d is not a member (0..%d)",
                      what, name, root, g->n - 1);
  }
  if (count > SIZE_MAX / es) {
    return gbErrorSet(gbInvalidArgument, "algo %s on group %s: %zu elements of %s overflow size_t",
                      what, name, count, gbDtypeName(dt));
  }
  *esize = es;
  return gbSuccess;
}

gbResult_t gbAlgoCheckBlocks(const gbAlgoGroup_t* g, const char* what, const void* send, const void* recv,
                             size_t bytes) {
  const char* name = g->name ? g->name : "?";
  if (send == NULL || recv == NULL) {
    return gbErrorSet(gbInvalidArgument, "algo %s on group %s: %s buffer is NULL for %zu bytes", what, name,
                      send == NULL ? "send" : "recv", bytes);
  }
  if (bytes > SIZE_MAX / (size_t)g->n) {
    return gbErrorSet(gbInvalidArgument, "algo %s on group %s: %d blocks of %zu bytes overflow size_t", what,
                      name, g->n, bytes);
  }
  return gbSuccess;
}

size_t gbAlgoPieceElems(const gbAlgoGroup_t* g, size_t esize) {
  size_t pb = g->pieceBytes ? g->pieceBytes : GB_ALGO_DEFAULT_PIECE_BYTES;
  size_t pe = pb / esize;
  return pe ? pe : 1;
}

gbResult_t gbAlgoPostSend(gbAlgoGroup_t* g, int peer, const void* buf, size_t bytes,
                          gbNetReq_t** reqs, int* nreq) {
  if (bytes == 0) return gbSuccess;
  GB_CHECK(g->net->isend(g->conns[peer], buf, bytes, &reqs[*nreq]));
  (*nreq)++;
  g->bytesSent += bytes; /* posted payload: a failed call fails whole anyway */
  return gbSuccess;
}

gbResult_t gbAlgoPostRecv(gbAlgoGroup_t* g, int peer, void* buf, size_t bytes,
                          gbNetReq_t** reqs, int* nreq) {
  if (bytes == 0) return gbSuccess;
  GB_CHECK(g->net->irecv(g->conns[peer], buf, bytes, &reqs[*nreq]));
  (*nreq)++;
  return gbSuccess;
}

void gbAlgoLocal(const void* send, void* recv, size_t count, size_t esize, gbDataType_t dt,
                 int divisor) {
  if (count == 0 || recv == NULL) return;
  if (send != recv) memcpy(recv, send, count * esize);
  if (divisor > 0) gbDivideBy(recv, count, dt, divisor);
}
