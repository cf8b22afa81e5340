/* The data of a check run: each rank's input and the exact expected result,
 * computed here from every rank's input, independently of the library.
 *
 * Reductions (all_reduce, reduce, reduce_scatter): inputs are small integers,
 * so the exact result does not depend on the order in which the library
 * reduces. Element g (the index in the full vector) on rank r is
 * ((7r + 3g) mod 5) + 1 for sum, max, min and avg, and for prod 2 where
 * (r + g) mod 3 == 0, else 1. Both repeat every 15 elements, so one period of
 * results is computed, in 64-bit integers or doubles, then encoded in the type.
 * fp8 holds few integers exactly (float8e5m2: 1..8), so there, for sum, max,
 * min and avg, only rank g mod nranks holds element g's value and the others
 * hold 0: every order of the sum is exact. Products of 1s and 2s are powers
 * of two, exact until they pass the type's largest value, then 448 (e4m3
 * saturates) or inf in every order.
 * Broadcast: the root holds the sum pattern of its rank; the others poison.
 * Data movement (all_gather, alltoall, sendrecv): element i of rank r's send
 * buffer is ((11r + 3i) mod 61) + 1, which differs between any two of up to 61
 * ranks at every index and is exact in every type (fp8: those numbers as the
 * bits, all finite codes), so a block from the wrong rank or at the wrong
 * offset shows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

#define RED_PERIOD 15
#define MOVE_PERIOD 61

struct perfPattern {
  perfCheckSpec_t s;
  int hasInput;
  uint64_t in[MOVE_PERIOD]; /* this rank's input, one period */
  size_t inPeriod;
  uint64_t red[RED_PERIOD]; /* reductions and broadcast: the result */
  uint64_t* move;           /* data movement: [nranks][MOVE_PERIOD] every rank's input */
  uint64_t poison;
};

static int reduces(perfColl_t c) {
  return c == PERF_ALL_REDUCE || c == PERF_REDUCE || c == PERF_REDUCE_SCATTER;
}

static int64_t sumValue(int r, size_t g) {
  return (int64_t)((((size_t)r % 5) * 7 + (g % 5) * 3) % 5) + 1;
}

static int64_t prodValue(int r, size_t g) {
  return (((size_t)r % 3) + (g % 3)) % 3 == 0 ? 2 : 1;
}

static int64_t moveValue(int r, size_t i) {
  return (int64_t)((((size_t)r % MOVE_PERIOD) * 11 + (i % MOVE_PERIOD) * 3) % MOVE_PERIOD) + 1;
}

static int isFp8(gbDataType_t dt) { return dt == gbFloat8e4m3 || dt == gbFloat8e5m2; }

static int64_t redInput(const perfCheckSpec_t* s, int r, size_t g) {
  if (s->op == gbProd) return prodValue(r, g);
  if (isFp8(s->dt) && (size_t)r != g % (size_t)s->nranks) return 0;
  return sumValue(r, g);
}

static uint64_t moveBits(gbDataType_t dt, int r, size_t i) {
  return isFp8(dt) ? (uint64_t)moveValue(r, i) : perfTypeBitsFromInt(dt, moveValue(r, i));
}

/* One period of the reduced result, from every rank's input. */
static void reducedPeriod(const perfCheckSpec_t* s, uint64_t bits[RED_PERIOD]) {
  for (size_t g = 0; g < RED_PERIOD; g++) {
    int64_t sum = 0, mx = INT64_MIN, mn = INT64_MAX;
    uint64_t prod = 1; /* wraps like the integer types do */
    double fprod = 1.0;
    for (int r = 0; r < s->nranks; r++) {
      int64_t v = redInput(s, r, g);
      sum += v;
      prod *= (uint64_t)v;
      fprod *= (double)v;
      if (v > mx) mx = v;
      if (v < mn) mn = v;
    }
    switch (s->op) {
      case gbSum: bits[g] = perfTypeBitsFromInt(s->dt, sum); break;
      case gbProd:
        bits[g] = perfTypeIsFloat(s->dt) ? perfTypeBitsFromDouble(s->dt, fprod)
                                         : perfTypeBitsFromInt(s->dt, (int64_t)prod);
        break;
      case gbMax: bits[g] = perfTypeBitsFromInt(s->dt, mx); break;
      case gbMin: bits[g] = perfTypeBitsFromInt(s->dt, mn); break;
      default: bits[g] = perfTypeBitsFromDouble(s->dt, (double)sum / s->nranks); break;
    }
  }
}

perfPattern_t* perfPatternCreate(const perfCheckSpec_t* spec) {
  perfPattern_t* p = calloc(1, sizeof(*p));
  if (!p) perfFail("out of host memory");
  p->s = *spec;
  const perfCheckSpec_t* s = &p->s;
  size_t size = perfTypeSize(s->dt);
  for (size_t k = 0; k < size; k++) p->poison |= (uint64_t)PERF_POISON_BYTE << (8 * k);
  p->hasInput = 1;
  if (reduces(s->coll)) {
    p->inPeriod = RED_PERIOD;
    for (size_t g = 0; g < RED_PERIOD; g++) p->in[g] = perfTypeBitsFromInt(s->dt, redInput(s, s->rank, g));
    reducedPeriod(s, p->red);
  } else if (s->coll == PERF_BROADCAST) {
    p->inPeriod = RED_PERIOD;
    p->hasInput = s->rank == s->root;
    for (size_t g = 0; g < RED_PERIOD; g++) p->red[g] = perfTypeBitsFromInt(s->dt, sumValue(s->root, g));
    memcpy(p->in, p->red, sizeof(p->red));
  } else {
    p->inPeriod = MOVE_PERIOD;
    p->move = malloc((size_t)s->nranks * MOVE_PERIOD * sizeof(uint64_t));
    if (!p->move) perfFail("out of host memory");
    for (int r = 0; r < s->nranks; r++)
      for (size_t i = 0; i < MOVE_PERIOD; i++)
        p->move[(size_t)r * MOVE_PERIOD + i] = moveBits(s->dt, r, i);
    memcpy(p->in, &p->move[(size_t)s->rank * MOVE_PERIOD], MOVE_PERIOD * sizeof(uint64_t));
  }
  return p;
}

void perfPatternDestroy(perfPattern_t* p) {
  if (!p) return;
  free(p->move);
  free(p);
}

const perfCheckSpec_t* perfPatternSpec(const perfPattern_t* p) { return &p->s; }
int perfPatternHasInput(const perfPattern_t* p) { return p->hasInput; }
uint64_t perfPatternPoison(const perfPattern_t* p) { return p->poison; }

uint64_t perfPatternInput(const perfPattern_t* p, size_t i) {
  return p->in[i % p->inPeriod];
}

static uint64_t moved(const perfPattern_t* p, int from, size_t i) {
  return p->move[(size_t)from * MOVE_PERIOD + i % MOVE_PERIOD];
}

uint64_t perfPatternExpected(const perfPattern_t* p, size_t i, int inPlace) {
  const perfCheckSpec_t* s = &p->s;
  size_t count = s->count ? s->count : 1;
  switch (s->coll) {
    case PERF_ALL_REDUCE:
    case PERF_BROADCAST: return p->red[i % RED_PERIOD];
    case PERF_REDUCE:
      if (s->rank == s->root) return p->red[i % RED_PERIOD];
      return inPlace ? perfPatternInput(p, i) : p->poison; /* not to be touched */
    case PERF_REDUCE_SCATTER: return p->red[((size_t)s->rank * count + i) % RED_PERIOD];
    case PERF_ALL_GATHER: return moved(p, (int)(i / count), i % count);
    case PERF_ALLTOALL: return moved(p, (int)(i / count), (size_t)s->rank * count + i % count);
    case PERF_SENDRECV: return moved(p, (s->rank + s->nranks - 1) % s->nranks, i);
    default: return p->poison;
  }
}

int perfPatternSlack(const perfPattern_t* p) {
  return reduces(p->s.coll) && p->s.op == gbAvg && (p->s.dt == gbFloat16 || p->s.dt == gbBfloat16);
}
