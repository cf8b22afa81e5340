/* One rank of tests/mp/test_compression.py: bridge compression
 * (GPUBRIDGE_BRIDGE_COMPRESSION, docs/REDUCTION_ORDER.md "Bridge
 * compression") as a program sees it. Per case (all-reduce and
 * reduce-scatter; sum and avg; float32, and float16 and bfloat16 under fp8)
 * every rank's input is random (+-[0.5, 2)); all-reduce inputs also hold
 * specials: +inf, NaN, float's largest and smallest magnitudes, a run of
 * subnormals. Checks, against the exact sum of every rank's input (long
 * double):
 *  - each finite element is within the documented bound: sum over ranks of
 *    (r |x_k| + a M) + (n + 2) u sum |x_k|, then the type's rounding, with
 *    r, a = 2^-8, 2^-134 (bf16) or 2^-4, 2^-17 (fp8), M the largest
 *    magnitude of the rank's input;
 *  - +inf stays +inf, NaN stays NaN;
 *  - the wire narrowed something: at least a quarter of the random elements
 *    differ from the exact sum rounded to the type;
 * and it prints a hash of each result, which the driver compares across the
 * ranks that hold the same result (every rank ends with the same bits).
 *
 * Usage: rank_compression --layout V0,V1,... --wire bf16|fp8 */
#include <math.h>

#include "rank_common.h"

#define COUNT 150000 /* elements: several chunks, beyond the exchange */

typedef struct {
  int coll; /* 0 all-reduce, 1 reduce-scatter */
  int dt, op;
} case_t;

/* Rank k's input: random, with specials at fixed places (all-reduce). */
static void input(int k, int caseIdx, const case_t* c, size_t count, float* out) {
  void* raw = malloc(count * 4);
  if (!raw) DIE("out of memory");
  genInput(inputKey(k, caseIdx), 0, count, c->dt, raw);
  for (size_t i = 0; i < count; i++)
    out[i] = c->dt == gbFloat32 ? ((float*)raw)[i] : c->dt == gbFloat16 ? h2f(((uint16_t*)raw)[i]) : b2f(((uint16_t*)raw)[i]);
  free(raw);
  if (c->coll != 0 || c->dt != gbFloat32) return;
  if (k == 0) out[7] = INFINITY;
  if (k == 1) out[11] = NAN;
  out[1000 + k] = k % 2 ? 3e38f : -3e38f / 2;   /* float's range ends, each alone at its place */
  out[2000] = 1e-44f * (float)(k + 1);           /* subnormals */
  for (int i = 3000; i < 3256; i++) out[i] = (float)ldexp(1.0 + (i % 7) / 8.0, -130 - k); /* a block of them */
}

static float stored(const void* buf, size_t i, int dt) {
  if (dt == gbFloat32) return ((const float*)buf)[i];
  uint16_t h = ((const uint16_t*)buf)[i];
  return dt == gbFloat16 ? h2f(h) : b2f(h);
}

static float roundTo(long double x, int dt) {
  float f = (float)x;
  return dt == gbFloat32 ? f : dt == gbFloat16 ? h2f(f2h(f)) : b2f(f2b(f));
}

static uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char*)p)[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  const char* layout = NULL;
  int fp8 = -1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) layout = argv[++i];
    else if (strcmp(argv[i], "--wire") == 0 && i + 1 < argc) fp8 = strcmp(argv[++i], "fp8") == 0;
    else DIE("bad argument '%s'", argv[i]);
  }
  if (!layout || fp8 < 0) DIE("--layout V0,V1,... and --wire bf16|fp8 are required");
  parseLayout(layout);
  gbComm_t comm;
  CHECK_GB(gbCommInitFromEnv(&comm, NULL));
  CHECK_GB(gbCommUserRank(comm, &gRank));
  void* stream;
  CHECK_GB(gbStreamCreate(&stream));
  const long double rel = fp8 ? ldexpl(1, -4) : ldexpl(1, -8), abs = fp8 ? ldexpl(1, -17) : ldexpl(1, -134);
  case_t cases[12];
  int ncases = 0;
  int types[3] = {gbFloat32, gbFloat16, gbBfloat16};
  for (int coll = 0; coll < 2; coll++)
    for (int t = 0; t < (fp8 ? 3 : 1); t++)
      for (int op = 0; op < 2; op++) cases[ncases++] = (case_t){coll, types[t], op ? gbAvg : gbSum};
  float* in = malloc((size_t)COUNT * 4);
  float* x = malloc((size_t)COUNT * 4);
  long double *exact = malloc((size_t)COUNT * sizeof(long double)), *mag = malloc((size_t)COUNT * sizeof(long double));
  void* host = malloc((size_t)COUNT * 4);
  void *dsend, *drecv;
  if (!in || !x || !exact || !mag || !host) DIE("out of memory");
  CHECK_GB(gbMemAlloc(&dsend, (size_t)COUNT * 4));
  CHECK_GB(gbMemAlloc(&drecv, (size_t)COUNT * 4));
  for (int ci = 0; ci < ncases; ci++) {
    const case_t* c = &cases[ci];
    size_t es = c->dt == gbFloat32 ? 4 : 2, count = COUNT - COUNT % (size_t)gN, block = count / (size_t)gN;
    size_t outCount = c->coll ? block : count, outAt = c->coll ? (size_t)gRank * block : 0;
    char what[160];
    snprintf(what, sizeof(what), "case %d: %s %s %s of %zu, wire %s", ci, c->coll ? "reduce-scatter" : "all-reduce",
             dtNames[c->dt], c->op == gbAvg ? "avg" : "sum", count, fp8 ? "fp8" : "bf16");
    /* Every rank's input into the exact sum and the magnitudes. */
    long double M = 0;
    for (size_t i = 0; i < count; i++) exact[i] = mag[i] = 0;
    for (int k = 0; k < gN; k++) {
      input(k, ci, c, count, x);
      long double mk = 0;
      for (size_t i = 0; i < count; i++)
        if (isfinite(x[i]) && fabsl(x[i]) > mk) mk = fabsl(x[i]);
      M += mk;
      for (size_t i = 0; i < count; i++) exact[i] += x[i], mag[i] += fabsl(x[i]);
      if (k == gRank) memcpy(in, x, count * 4);
    }
    for (size_t i = 0; i < count; i++)
      if (es == 2) ((uint16_t*)host)[i] = c->dt == gbFloat16 ? f2h(in[i]) : f2b(in[i]);
      else ((float*)host)[i] = in[i];
    CHECK_GB(gbMemcpyToDevice(dsend, host, count * es));
    if (c->coll) CHECK_GB(gbReduceScatter(dsend, drecv, block, c->dt, c->op, comm, stream));
    else CHECK_GB(gbAllReduce(dsend, drecv, count, c->dt, c->op, comm, stream));
    CHECK_GB(gbStreamSynchronize(stream));
    CHECK_GB(gbMemcpyToHost(host, drecv, outCount * es));
    long double div = c->op == gbAvg ? gN : 1, u = ldexpl(1, -24);
    long double uType = c->dt == gbFloat32 ? u : c->dt == gbFloat16 ? ldexpl(1, -11) : ldexpl(1, -8);
    size_t narrowed = 0, randoms = 0;
    for (size_t j = 0; j < outCount; j++) {
      size_t i = outAt + j;
      float got = stored(host, j, c->dt);
      long double e = exact[i] / div;
      if (isnan(exact[i])) {
        if (!isnan(got)) DIE("%s: element %zu is %g, expected NaN", what, i, got);
        continue;
      }
      if (isinf(exact[i])) {
        if (got != (float)exact[i]) DIE("%s: element %zu is %g, expected %Lg", what, i, got, exact[i]);
        continue;
      }
      long double bound = ((rel + (gN + 2) * u) * mag[i] + abs * M) / div;
      bound = bound * (1 + uType) + uType * fabsl(e);
      if (!isfinite(got) || fabsl(got - e) > bound)
        DIE("%s: element %zu is %.9g, the exact result %.9Lg: off by %.3Lg, beyond the bound %.3Lg", what, i, got,
            e, fabsl(got - e), bound);
      if (mag[i] < 1e3L && mag[i] > 1e-3L) randoms++, narrowed += got != roundTo(e, c->dt);
    }
    if (narrowed * 4 < randoms)
      DIE("%s: only %zu of %zu elements differ from the exact result rounded to the type: was the wire narrowed?",
          what, narrowed, randoms);
    printf("hash %d %s %016llx\n", ci, c->coll ? "block" : "all", (unsigned long long)fnv(host, outCount * es));
  }
  CHECK_GB(gbMemFree(dsend));
  CHECK_GB(gbMemFree(drecv));
  CHECK_GB(gbStreamDestroy(stream));
  CHECK_GB(gbCommDestroy(comm));
  free(in), free(x), free(exact), free(mag), free(host);
  printf("ok: rank %d of %d, %d compressed cases within the bounds\n", gRank, gN, ncases);
  return 0;
}
