/* Device buffers with guard areas, and the data of a check run.
 *
 * Inputs are small integers, so the exact result does not depend on the order
 * in which the library reduces: element i on rank r is ((7r + 3i) mod 5) + 1
 * for sum, max, min and avg, and 2 where (r + i) mod 3 == 0, else 1, for prod.
 * Both repeat every 15 elements, so one period of inputs and expected results
 * is computed per check, in 64-bit integers or doubles, then encoded in the
 * type. Broadcast: the root holds the sum pattern of its rank; the others hold
 * poison, which no correct result equals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

#define PERIOD 15
#define POISON_BYTE 0xEE

static unsigned char guardPattern[PERF_GUARD_BYTES];
static unsigned char guardRead[PERF_GUARD_BYTES];

static void guardPatternInit(void) {
  for (size_t k = 0; k < PERF_GUARD_BYTES; k++) guardPattern[k] = (unsigned char)(0xA5 ^ (k * 7));
}

void perfBufferAlloc(perfBuffer_t* buf, size_t capacity) {
  void* p = NULL;
  perfCheck(gbMemAlloc(&p, capacity + 2 * PERF_GUARD_BYTES), "gbMemAlloc");
  buf->base = p;
  buf->data = buf->base + PERF_GUARD_BYTES;
  buf->capacity = capacity;
  guardPatternInit();
}

void perfBufferFree(perfBuffer_t* buf) {
  if (buf->base) perfCheck(gbMemFree(buf->base), "gbMemFree");
  buf->base = buf->data = NULL;
}

/* The guarded regions for a size: before the buffer, after it, and the bytes
 * just past the current size. */
static int guardRegions(const perfBuffer_t* buf, size_t bytes, unsigned char* at[3], size_t len[3]) {
  int n = 0;
  at[n] = buf->base;
  len[n++] = PERF_GUARD_BYTES;
  at[n] = buf->data + buf->capacity;
  len[n++] = PERF_GUARD_BYTES;
  size_t tail = buf->capacity - bytes;
  if (tail > PERF_GUARD_BYTES) tail = PERF_GUARD_BYTES;
  if (tail > 0) {
    at[n] = buf->data + bytes;
    len[n++] = tail;
  }
  return n;
}

void perfBufferGuardSet(perfBuffer_t* buf, size_t bytes) {
  unsigned char* at[3];
  size_t len[3];
  int n = guardRegions(buf, bytes, at, len);
  for (int k = 0; k < n; k++)
    perfCheck(gbMemcpyToDevice(at[k], guardPattern, len[k]), "gbMemcpyToDevice");
}

uint64_t perfBufferGuardCheck(const perfBuffer_t* buf, size_t bytes) {
  unsigned char* at[3];
  size_t len[3];
  int n = guardRegions(buf, bytes, at, len);
  uint64_t bad = 0;
  for (int k = 0; k < n; k++) {
    perfCheck(gbMemcpyToHost(guardRead, at[k], len[k]), "gbMemcpyToHost");
    for (size_t j = 0; j < len[k]; j++) bad += guardRead[j] != guardPattern[j];
  }
  return bad;
}

static int64_t sumValue(int r, size_t i) {
  return (int64_t)((((size_t)r % 5) * 7 + (i % 5) * 3) % 5) + 1;
}

static int64_t prodValue(int r, size_t i) {
  return (((size_t)r % 3) + (i % 3)) % 3 == 0 ? 2 : 1;
}

static int64_t inputValue(const perfCheckSpec_t* s, int r, size_t i) {
  return s->coll == PERF_ALL_REDUCE && s->op == gbProd ? prodValue(r, i) : sumValue(r, i);
}

/* One period of this rank's input bits; returns 0 where the rank holds poison. */
static int inputPeriod(const perfCheckSpec_t* s, uint64_t bits[PERIOD]) {
  if (s->coll == PERF_BROADCAST && s->rank != s->root) return 0;
  for (size_t i = 0; i < PERIOD; i++) bits[i] = perfTypeBitsFromInt(s->dt, inputValue(s, s->rank, i));
  return 1;
}

/* One period of the expected result's bits, computed from every rank's input. */
static void expectedPeriod(const perfCheckSpec_t* s, uint64_t bits[PERIOD]) {
  for (size_t i = 0; i < PERIOD; i++) {
    if (s->coll == PERF_BROADCAST) {
      bits[i] = perfTypeBitsFromInt(s->dt, sumValue(s->root, i));
      continue;
    }
    int64_t sum = 0, mx = INT64_MIN, mn = INT64_MAX;
    uint64_t prod = 1; /* wraps like the integer types do */
    double fprod = 1.0;
    for (int r = 0; r < s->nranks; r++) {
      int64_t v = inputValue(s, r, i);
      sum += v;
      prod *= (uint64_t)v;
      fprod *= (double)v;
      if (v > mx) mx = v;
      if (v < mn) mn = v;
    }
    switch (s->op) {
      case gbSum: bits[i] = perfTypeBitsFromInt(s->dt, sum); break;
      case gbProd:
        bits[i] = perfTypeIsFloat(s->dt) ? perfTypeBitsFromDouble(s->dt, fprod)
                                         : perfTypeBitsFromInt(s->dt, (int64_t)prod);
        break;
      case gbMax: bits[i] = perfTypeBitsFromInt(s->dt, mx); break;
      case gbMin: bits[i] = perfTypeBitsFromInt(s->dt, mn); break;
      default: bits[i] = perfTypeBitsFromDouble(s->dt, (double)sum / s->nranks); break;
    }
  }
}

static void hostReserve(perfHost_t* host, size_t bytes) {
  if (host->capacity >= bytes) return;
  free(host->host);
  host->host = malloc(bytes);
  if (!host->host) {
    fprintf(stderr, "gpubridge-perf: out of host memory for %zu bytes\n", bytes);
    exit(1);
  }
  host->capacity = bytes;
}

void perfBufferPoison(perfBuffer_t* buf, size_t bytes, perfHost_t* host) {
  hostReserve(host, bytes);
  memset(host->host, POISON_BYTE, bytes);
  perfCheck(gbMemcpyToDevice(buf->data, host->host, bytes), "gbMemcpyToDevice");
}

void perfBufferFillInput(perfBuffer_t* buf, size_t count, const perfCheckSpec_t* spec, perfHost_t* host) {
  size_t bytes = count * perfTypeSize(spec->dt);
  uint64_t bits[PERIOD];
  if (!inputPeriod(spec, bits)) {
    perfBufferPoison(buf, bytes, host);
    return;
  }
  hostReserve(host, bytes);
  for (size_t i = 0; i < count; i++) perfTypeStore(host->host, i, spec->dt, bits[i % PERIOD]);
  perfCheck(gbMemcpyToDevice(buf->data, host->host, bytes), "gbMemcpyToDevice");
}

uint64_t perfBufferCheck(const perfBuffer_t* buf, size_t count, const perfCheckSpec_t* spec,
                         perfHost_t* host, const char* where) {
  size_t bytes = count * perfTypeSize(spec->dt);
  hostReserve(host, bytes);
  perfCheck(gbMemcpyToHost(host->host, buf->data, bytes), "gbMemcpyToHost");
  uint64_t expect[PERIOD];
  expectedPeriod(spec, expect);
  /* avg on the 16-bit floats divides in float and rounds once more: one ulp. */
  int slack = spec->coll == PERF_ALL_REDUCE && spec->op == gbAvg &&
              (spec->dt == gbFloat16 || spec->dt == gbBfloat16);
  uint64_t wrong = 0;
  size_t first = 0;
  uint64_t firstGot = 0;
  for (size_t i = 0; i < count; i++) {
    uint64_t got = perfTypeLoad(host->host, i, spec->dt);
    uint64_t want = expect[i % PERIOD];
    if (got == want) continue;
    if (slack && (got == want + 1 || got + 1 == want)) continue; /* positive values: bits are monotonic */
    if (wrong++ == 0) {
      first = i;
      firstGot = got;
    }
  }
  if (wrong) {
    char what[32];
    if (spec->coll == PERF_BROADCAST) snprintf(what, sizeof(what), "root %d", spec->root);
    else snprintf(what, sizeof(what), "%s", perfOpName(spec->op));
    fprintf(stderr,
            "gpubridge-perf: rank %d: %s %s %s %zu B %s: %llu of %zu elements wrong; "
            "first at %zu: got %g (0x%llx), expected %g (0x%llx)\n",
            spec->rank, perfCollName(spec->coll), perfTypeName(spec->dt),
            what, bytes, where,
            (unsigned long long)wrong, count, first, perfTypeBitsToDouble(spec->dt, firstGot),
            (unsigned long long)firstGot, perfTypeBitsToDouble(spec->dt, expect[first % PERIOD]),
            (unsigned long long)expect[first % PERIOD]);
  }
  return wrong;
}
