/* gbAlgoReduceScatter: every member sends block j of its input to member j,
 * which folds x0 op x1 op ... op x(n-1) left to right (algo.h), never the
 * ring. Pipelined in pieces: piece k of my block is folded while the pieces
 * after it are on the wire; received pieces land in a ring of window slots,
 * so the scratch is bounded by the window, not by count. */
#include <stdint.h>
#include <string.h>
#include "algo/internal.h"
#include "base/dtype.h"
#include "base/result.h"

typedef struct {
  gbAlgoGroup_t* g;
  const char* send; /* n blocks of count elements */
  char* recv;       /* count elements */
  size_t count, es, pe;
  gbDataType_t dt;
  gbRedOp_t op;
  int divisor;
  char* slots;      /* [window][n] pieces received (slot me unused) */
  size_t slotBytes;
} rs_t;

static char* slotAt(const rs_t* x, size_t piece, int member) {
  return x->slots + ((piece % GB_ALGO_WINDOW) * (size_t)x->g->n + (size_t)member) * x->slotBytes;
}

static size_t pieceElems(const rs_t* x, size_t k) {
  size_t off = k * x->pe;
  return x->count - off < x->pe ? x->count - off : x->pe;
}

/* Piece k of block i goes to member i; piece k of every member's block me
 * comes here. */
static gbResult_t postPiece(rs_t* x, size_t k, gbNetReq_t** reqs, int* nreq) {
  gbAlgoGroup_t* g = x->g;
  size_t off = k * x->pe;
  size_t bytes = pieceElems(x, k) * x->es;
  *nreq = 0;
  for (int i = 0; i < g->n; i++) {
    if (i != g->me) GB_CHECK(gbAlgoPostRecv(g, i, slotAt(x, k, i), bytes, reqs, nreq));
  }
  for (int i = 0; i < g->n; i++) {
    if (i == g->me) continue;
    const char* src = x->send + ((size_t)i * x->count + off) * x->es;
    GB_CHECK(gbAlgoPostSend(g, i, src, bytes, reqs, nreq));
  }
  return gbSuccess;
}

static void foldPiece(const rs_t* x, size_t k) {
  const gbAlgoGroup_t* g = x->g;
  size_t off = k * x->pe;
  size_t elems = pieceElems(x, k);
  size_t bytes = elems * x->es;
  char* out = x->recv + off * x->es;
  const char* mine = x->send + ((size_t)g->me * x->count + off) * x->es;
  /* Member 0 folds in its output. The others fold in x0's slot and copy
   * once: in place, my own block is recv, and it is an operand until the
   * fold reaches it. */
  char* acc = g->me == 0 ? out : slotAt(x, k, 0);
  if (g->me == 0 && mine != out) memcpy(out, mine, bytes);
  for (int i = 1; i < g->n; i++) {
    gbReduceInto(acc, i == g->me ? mine : slotAt(x, k, i), elems, x->dt, x->op);
  }
  if (x->divisor > 0) gbDivideBy(acc, elems, x->dt, x->divisor);
  if (acc != out) memcpy(out, acc, bytes);
}

gbResult_t gbAlgoReduceScatter(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                               gbDataType_t dt, gbRedOp_t op, int divisor) {
  size_t es;
  GB_CHECK(gbAlgoCheckArgs(g, "reduce-scatter", count, dt, op, -1, &es));
  const char* name = g->name ? g->name : "?";
  int n = g->n;
  if (count == 0) return gbSuccess;
  if (send == NULL || recv == NULL) {
    return gbErrorSet(gbInvalidArgument,
                      "algo reduce-scatter on group %s: %s buffer is NULL for %zu elements per member",
                      name, send == NULL ? "send" : "recv", count);
  }
  if (count * es > SIZE_MAX / (size_t)n) {
    return gbErrorSet(gbInvalidArgument,
                      "algo reduce-scatter on group %s: %d blocks of %zu x %s overflow size_t", name,
                      n, count, gbDtypeName(dt));
  }
  if (n == 1) {
    gbAlgoLocal(send, recv, count, es, dt, divisor);
    return gbSuccess;
  }
  rs_t x = {0};
  x.g = g;
  x.send = send;
  x.recv = recv;
  x.count = count;
  x.es = es;
  x.pe = gbAlgoPieceElems(g, es);
  x.dt = dt;
  x.op = op;
  x.divisor = divisor;
  size_t pieces = (count + x.pe - 1) / x.pe;
  size_t window = pieces < GB_ALGO_WINDOW ? pieces : GB_ALGO_WINDOW;
  x.slotBytes = ((count < x.pe ? count : x.pe) * es + 63) & ~(size_t)63;
  GB_TRACE(GB_LOG_COLL, "algo reduce-scatter on %s: %zu x %s %s per member, divisor %d, member %d of %d, "
           "%zu pieces", name, count, gbDtypeName(dt), gbOpName(op), divisor, g->me, n, pieces);

  /* Request lists first, then the slots, all in the group's scratch. */
  size_t perPiece = 2 * (size_t)n;
  size_t reqBytes = (GB_ALGO_WINDOW * perPiece * sizeof(gbNetReq_t*) + 63) & ~(size_t)63;
  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, reqBytes + window * (size_t)n * x.slotBytes, &scratch));
  gbNetReq_t** reqs = (gbNetReq_t**)scratch;
  x.slots = (char*)scratch + reqBytes;
  int nreq[GB_ALGO_WINDOW];

  gbDeadline_t deadline = gbDeadlineIn(g->timeoutSec);
  size_t posted = 0;
  for (size_t k = 0; k < pieces; k++) {
    /* Piece k+window reuses piece k's slots, so it waits for k's fold. */
    while (posted < pieces && posted < k + GB_ALGO_WINDOW) {
      size_t w = posted % GB_ALGO_WINDOW;
      GB_CHECK(postPiece(&x, posted, reqs + w * perPiece, &nreq[w]));
      posted++;
    }
    size_t w = k % GB_ALGO_WINDOW;
    if (nreq[w] > 0) GB_CHECK(gbNetWaitAll(reqs + w * perPiece, nreq[w], deadline, g->abortFlag));
    foldPiece(&x, k);
  }
  return gbSuccess;
}
