/* The exchange order: every member's whole input reaches the folding
 * members (all of them, or the root), which fold x0 op x1 op ... op x(n-1)
 * left to right. Pipelined in pieces: piece k is folded while the pieces
 * after it are on the wire; each piece lands in a ring of window slots. */
#include "algo/internal.h"
#include "base/dtype.h"
#include "base/result.h"

typedef struct {
  gbAlgoGroup_t* g;
  const char* send;
  char* recv;
  size_t count, es, pe;
  int root;      /* < 0: all-reduce */
  int folds;     /* this member receives and folds */
  char* slots;   /* [window][n] pieces received (slot me unused) */
  size_t slotBytes;
  const void** src; /* [n] one piece's contributions, for the fold */
} exch_t;

static char* slotAt(const exch_t* x, size_t piece, int member) {
  return x->slots + ((piece % GB_ALGO_WINDOW) * (size_t)x->g->n + (size_t)member) * x->slotBytes;
}

static gbResult_t postPiece(exch_t* x, size_t k, gbNetReq_t** reqs, int* nreq) {
  gbAlgoGroup_t* g = x->g;
  size_t off = k * x->pe;
  size_t bytes = (x->count - off < x->pe ? x->count - off : x->pe) * x->es;
  *nreq = 0;
  if (x->folds) {
    for (int i = 0; i < g->n; i++) {
      if (i != g->me) GB_CHECK(gbAlgoPostRecv(g, i, slotAt(x, k, i), bytes, reqs, nreq));
    }
  }
  for (int i = 0; i < g->n; i++) {
    if (i == g->me || (x->root >= 0 && i != x->root)) continue;
    GB_CHECK(gbAlgoPostSend(g, i, x->send + off * x->es, bytes, reqs, nreq));
  }
  return gbSuccess;
}

/* Piece k folded into recv in gbReduceOrdered's left-to-right order (it
 * also copes with recv being my own contribution, in place). */
static void foldPiece(const exch_t* x, size_t k, gbDataType_t dt, gbRedOp_t op, int divisor) {
  const gbAlgoGroup_t* g = x->g;
  size_t off = k * x->pe;
  size_t elems = x->count - off < x->pe ? x->count - off : x->pe;
  for (int i = 0; i < g->n; i++) x->src[i] = i == g->me ? x->send + off * x->es : slotAt(x, k, i);
  gbReduceOrdered(x->recv + off * x->es, x->src, g->n, elems, dt, op, divisor, 0);
}

gbResult_t gbAlgoExchange(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                          gbDataType_t dt, gbRedOp_t op, int divisor, int root,
                          gbDeadline_t deadline) {
  exch_t x = {0};
  x.g = g;
  x.send = send;
  x.recv = recv;
  x.count = count;
  x.es = gbDtypeSize(dt);
  x.pe = gbAlgoPieceElems(g, x.es);
  x.root = root;
  x.folds = root < 0 || root == g->me;
  size_t pieces = (count + x.pe - 1) / x.pe;
  size_t window = pieces < GB_ALGO_WINDOW ? pieces : GB_ALGO_WINDOW;
  x.slotBytes = ((count < x.pe ? count : x.pe) * x.es + 63) & ~(size_t)63;

  /* Request lists first, then the slots, all in the group's scratch. */
  size_t perPiece = 2 * (size_t)g->n;
  size_t reqBytes = (GB_ALGO_WINDOW * perPiece * sizeof(gbNetReq_t*) + 63) & ~(size_t)63;
  size_t slotsBytes = x.folds ? window * (size_t)g->n * x.slotBytes : 0;
  size_t srcBytes = x.folds ? (size_t)g->n * sizeof(void*) : 0;
  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, reqBytes + slotsBytes + srcBytes, &scratch));
  gbNetReq_t** reqs = (gbNetReq_t**)scratch;
  x.slots = (char*)scratch + reqBytes;
  x.src = (const void**)(x.slots + slotsBytes);
  int nreq[GB_ALGO_WINDOW];

  size_t posted = 0;
  for (size_t k = 0; k < pieces; k++) {
    /* Keep the next pieces moving while piece k is folded. */
    while (posted < pieces && posted < k + GB_ALGO_WINDOW) {
      size_t w = posted % GB_ALGO_WINDOW;
      GB_CHECK(postPiece(&x, posted, reqs + w * perPiece, &nreq[w]));
      posted++;
    }
    size_t w = k % GB_ALGO_WINDOW;
    if (nreq[w] > 0) GB_CHECK(gbNetWaitAll(reqs + w * perPiece, nreq[w], deadline, g->abortFlag));
    if (x.folds) foldPiece(&x, k, dt, op, divisor);
  }
  return gbSuccess;
}
