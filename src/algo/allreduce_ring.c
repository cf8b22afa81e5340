/* The ring order: slice j is folded x(j+1) op x(j+2) op ... op x(j) as it
 * travels from member j+1 to member j (reduce-scatter, n-1 steps), then the
 * finished slices travel once more around the ring (all-gather, n-1 steps).
 *
 * Step s (over both phases) sends slice me-1-s to the next member and
 * receives slice me-2-s from the previous one. Each step moves in pieces;
 * unit (s, k) is piece k of step s. Units run in (s, k) order on every
 * member, up to GB_ALGO_WINDOW in flight; unit (s, k) is posted only once
 * unit (s-1, k) is done, because it sends what that unit produced and
 * receives into the buffer that unit sent from.
 *
 * With two members the ring keeps the exchange's order, x0 op x1, on both
 * slices (algo.h): member 0 puts its own contribution on the left. */
#include <string.h>
#include "algo/internal.h"
#include "base/dtype.h"
#include "base/result.h"

typedef struct {
  gbAlgoGroup_t* g;
  const char* send;
  char* recv;          /* all-reduce output (NULL for reduce-scatter only) */
  char* out;           /* where my finished slice goes, or NULL */
  char* buf[2];        /* partial sums of the slice in transit, alternating */
  size_t count, es, pe;
  gbDataType_t dt;
  gbRedOp_t op;
  int divisor;
  int steps;           /* n-1 or 2(n-1) */
} ring_t;

typedef struct {
  int s;
  size_t k;
} unit_t;

static int sliceOf(const ring_t* r, int j) { return gbAlgoMod(j, r->g->n); }
static size_t sliceBegin(const ring_t* r, int j) { return gbAlgoSliceBegin(r->count, r->g->n, j); }
static size_t sliceLen(const ring_t* r, int j) { return sliceBegin(r, j + 1) - sliceBegin(r, j); }
static size_t slicePieces(const ring_t* r, int j) { return (sliceLen(r, j) + r->pe - 1) / r->pe; }
static int sendSlice(const ring_t* r, int s) { return sliceOf(r, r->g->me - 1 - s); }
static int recvSlice(const ring_t* r, int s) { return sliceOf(r, r->g->me - 2 - s); }

static size_t stepUnits(const ring_t* r, int s) {
  size_t a = slicePieces(r, sendSlice(r, s)), b = slicePieces(r, recvSlice(r, s));
  return a > b ? a : b;
}

/* Moves u to the next unit, skipping empty steps; u->s == steps at the end. */
static void advance(const ring_t* r, unit_t* u) {
  u->k++;
  while (u->s < r->steps && u->k >= stepUnits(r, u->s)) {
    u->s++;
    u->k = 0;
  }
}

static int before(unit_t a, unit_t b) { return a.s < b.s || (a.s == b.s && a.k < b.k); }

/* Where my finished slice is after the reduce-scatter. */
static char* finished(const ring_t* r) {
  return r->out ? r->out : r->buf[(r->g->n - 2) & 1];
}

static const char* source(const ring_t* r, int s) {
  int n = r->g->n;
  if (s == 0) return r->send + sliceBegin(r, sendSlice(r, 0)) * r->es;
  if (s <= n - 2) return r->buf[(s - 1) & 1];
  if (s == n - 1) return finished(r);
  return r->recv + sliceBegin(r, sendSlice(r, s)) * r->es;
}

static char* target(const ring_t* r, int s) {
  if (s <= r->g->n - 2) return r->buf[s & 1];
  return r->recv + sliceBegin(r, recvSlice(r, s)) * r->es;
}

static size_t pieceElems(const ring_t* r, int slice, size_t k) {
  size_t len = sliceLen(r, slice), off = k * r->pe;
  if (off >= len) return 0;
  return len - off < r->pe ? len - off : r->pe;
}

static gbResult_t post(ring_t* r, unit_t u, gbNetReq_t** reqs, int* nreq) {
  gbAlgoGroup_t* g = r->g;
  int prev = gbAlgoMod(g->me - 1, g->n), next = gbAlgoMod(g->me + 1, g->n);
  size_t off = u.k * r->pe * r->es;
  *nreq = 0;
  size_t rb = pieceElems(r, recvSlice(r, u.s), u.k) * r->es;
  GB_CHECK(gbAlgoPostRecv(g, prev, target(r, u.s) + off, rb, reqs, nreq));
  size_t sb = pieceElems(r, sendSlice(r, u.s), u.k) * r->es;
  GB_CHECK(gbAlgoPostSend(g, next, source(r, u.s) + off, sb, reqs, nreq));
  return gbSuccess;
}

/* Reduce-scatter units fold my contribution into the received partial (the
 * partial is the left operand, but for member 0 of two); the last one
 * writes the finished piece to out (when given) and divides it there. */
static void finish(const ring_t* r, unit_t u) {
  int n = r->g->n;
  if (u.s > n - 2) return;
  int j = recvSlice(r, u.s);
  size_t elems = pieceElems(r, j, u.k);
  if (elems == 0) return;
  size_t off = u.k * r->pe;
  char* partial = target(r, u.s) + off * r->es;
  const char* mine = r->send + (sliceBegin(r, j) + off) * r->es;
  char* dst = u.s == n - 2 && r->out != NULL ? r->out + off * r->es : partial;
  if (n == 2 && j == 0) gbReduceTo(dst, mine, partial, elems, r->dt, r->op);
  else gbReduceTo(dst, partial, mine, elems, r->dt, r->op);
  if (u.s == n - 2 && r->divisor > 0) gbDivideBy(dst, elems, r->dt, r->divisor);
}

gbResult_t gbAlgoRing(gbAlgoGroup_t* g, const void* send, void* recv, void* out, size_t count,
                      gbDataType_t dt, gbRedOp_t op, int divisor, int withGather,
                      gbDeadline_t deadline, const void** mine) {
  ring_t r = {0};
  int n = g->n;
  r.g = g;
  r.send = send;
  r.recv = recv;
  r.out = out;
  r.count = count;
  r.es = gbDtypeSize(dt);
  r.pe = gbAlgoPieceElems(g, r.es);
  r.dt = dt;
  r.op = op;
  r.divisor = divisor;
  r.steps = withGather ? 2 * (n - 1) : n - 1;

  size_t maxSlice = ((count + (size_t)n - 1) / (size_t)n * r.es + 63) & ~(size_t)63;
  void* scratch;
  GB_CHECK(gbAlgoScratchGet(g, 2 * maxSlice, &scratch));
  r.buf[0] = scratch;
  r.buf[1] = (char*)scratch + maxSlice;

  gbNetReq_t* reqs[GB_ALGO_WINDOW][2];
  int nreq[GB_ALGO_WINDOW];
  unit_t posted = {0, (size_t)-1}, done;
  advance(&r, &posted);
  done = posted;
  unit_t end = {r.steps, 0};
  size_t nPosted = 0, nDone = 0;
  while (before(done, end)) {
    while (before(posted, end) && nPosted - nDone < GB_ALGO_WINDOW) {
      /* Unit (s, k) needs unit (s-1, k) done. */
      unit_t dep = {posted.s - 1, posted.k};
      if (posted.s > 0 && posted.k < stepUnits(&r, posted.s - 1) && !before(dep, done)) break;
      size_t w = nPosted % GB_ALGO_WINDOW;
      GB_CHECK(post(&r, posted, reqs[w], &nreq[w]));
      advance(&r, &posted);
      nPosted++;
    }
    size_t w = nDone % GB_ALGO_WINDOW;
    if (nreq[w] > 0) GB_CHECK(gbNetWaitAll(reqs[w], nreq[w], deadline, g->abortFlag));
    finish(&r, done);
    advance(&r, &done);
    nDone++;
  }
  if (mine != NULL) *mine = finished(&r);
  return gbSuccess;
}
