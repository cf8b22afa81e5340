/* base/dtype's fp8 types, bit for bit against references written here:
 * values decoded by formula, floats encoded by choosing the nearer of the two
 * neighbouring codes in double arithmetic (ties to the even code), with the
 * overflow rules of docs/REDUCTION_ORDER.md (float8e4m3 saturates to 448,
 * float8e5m2 overflows to infinity). Every pair of codes for sum, prod, max
 * and min; every code for avg's division and every scalar for PreMulSum's
 * scaling; gbReduceOrdered's fold; and the edge values spelled out. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/dtype.h"
#include "unit/check.h"
#include "unit/fp8_ref.h"

static uint64_t rngState = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) { /* xorshift64* */
  rngState ^= rngState >> 12;
  rngState ^= rngState << 25;
  rngState ^= rngState >> 27;
  return rngState * 2685821657736338717ull;
}

static void testNames(void) {
  CHECK(gbFloat8e4m3 == 10 && gbFloat8e5m2 == 11 && gbNumTypes == 12, "NCCL's values");
  CHECK(gbDtypeSize(gbFloat8e4m3) == 1 && gbDtypeSize(gbFloat8e5m2) == 1, "one byte each");
  CHECK(strcmp(gbDtypeName(gbFloat8e4m3), "float8e4m3") == 0, "name e4m3: %s", gbDtypeName(gbFloat8e4m3));
  CHECK(strcmp(gbDtypeName(gbFloat8e5m2), "float8e5m2") == 0, "name e5m2: %s", gbDtypeName(gbFloat8e5m2));
  CHECK(gbDtypeIsFloat(gbFloat8e4m3) && gbDtypeIsFloat(gbFloat8e5m2), "fp8 is floating (avg allowed)");
  CHECK(gbDtypeIsFp8(gbFloat8e4m3) && gbDtypeIsFp8(gbFloat8e5m2) && !gbDtypeIsFp8(gbBfloat16) &&
            !gbDtypeIsFp8(gbUint8), "gbDtypeIsFp8");
}

/* The kernels' conversions seen through the reductions: x max x is x
 * decoded and encoded again (NaN made sign | 0x7f); x * 1 likewise. */
static void testRoundTrip(const fmt_t* f) {
  uint8_t one = encode(f, 1.0);
  for (int c = 0; c < 256; c++) {
    uint8_t x = (uint8_t)c, y = (uint8_t)c, got;
    gbReduceInto(&x, &y, 1, f->dt, gbMax);
    uint8_t want = isNaNCode(f, (uint8_t)c) ? (uint8_t)((c & 0x80) | 0x7f) : (uint8_t)c;
    CHECK(x == want, "%s %02x max itself = %02x, want %02x", f->name, c, x, want);
    got = (uint8_t)c;
    gbScaleBy(&got, 1, f->dt, &one);
    if (isNaNCode(f, (uint8_t)c)) CHECK(isNaNCode(f, got), "%s %02x * 1 = %02x, want NaN", f->name, c, got);
    else CHECK(got == c, "%s %02x * 1 = %02x", f->name, c, got);
  }
}

/* Every pair of codes, each op: the reference in double (the exact sum or
 * product of two fp8 values), encoded once. */
static void testPairs(const fmt_t* f) {
  static uint8_t a[65536], b[65536], acc[65536];
  for (int i = 0; i < 65536; i++) { a[i] = (uint8_t)(i >> 8); b[i] = (uint8_t)i; }
  for (int op = 0; op <= gbAvg; op++) {
    memcpy(acc, a, sizeof(a));
    gbReduceInto(acc, b, 65536, f->dt, (gbRedOp_t)op);
    for (int i = 0; i < 65536; i++) {
      double x = value(f, a[i]), y = value(f, b[i]);
      const char* on = gbOpName((gbRedOp_t)op);
      if (op == gbMax || op == gbMin) {
        /* NaN wins, the left one first; else a > b ? a : b (a < b for min). */
        uint8_t want = isnan(x) ? (uint8_t)((a[i] & 0x80) | 0x7f)
                       : isnan(y) ? (uint8_t)((b[i] & 0x80) | 0x7f)
                       : (op == gbMax ? x > y : x < y) ? a[i] : b[i];
        CHECK(acc[i] == want, "%s %02x %s %02x = %02x, want %02x", f->name, a[i], on, b[i], acc[i], want);
        continue;
      }
      double r = op == gbProd ? x * y : x + y;
      if (isnan(r)) CHECK(isNaNCode(f, acc[i]), "%s %02x %s %02x = %02x, want NaN", f->name, a[i], on, b[i], acc[i]);
      else CHECK(acc[i] == encode(f, r), "%s %02x %s %02x = %02x, want %02x", f->name, a[i], on, b[i], acc[i],
                 encode(f, r));
    }
  }
}

/* avg's division of every code, and PreMulSum's scaling by every scalar. */
static void testDivideAndScale(const fmt_t* f) {
  static const int divisors[] = {1, 2, 3, 7, 12};
  for (size_t k = 0; k < sizeof(divisors) / sizeof(divisors[0]); k++) {
    uint8_t buf[256];
    for (int c = 0; c < 256; c++) buf[c] = (uint8_t)c;
    gbDivideBy(buf, 256, f->dt, divisors[k]);
    for (int c = 0; c < 256; c++) {
      double r = value(f, (uint8_t)c) / divisors[k];
      if (isnan(r)) CHECK(buf[c] == ((c & 0x80) | 0x7f), "%s %02x / %d = %02x, want NaN", f->name, c, divisors[k], buf[c]);
      else CHECK(buf[c] == encode(f, r), "%s %02x / %d = %02x, want %02x", f->name, c, divisors[k], buf[c],
                 encode(f, r));
    }
  }
  for (int s = 0; s < 256; s++) {
    uint8_t buf[256], scalar = (uint8_t)s;
    for (int c = 0; c < 256; c++) buf[c] = (uint8_t)c;
    gbScaleBy(buf, 256, f->dt, &scalar);
    for (int c = 0; c < 256; c++) {
      double r = value(f, scalar) * value(f, (uint8_t)c);
      if (isnan(r)) CHECK(isNaNCode(f, buf[c]), "%s %02x * %02x = %02x, want NaN", f->name, s, c, buf[c]);
      else CHECK(buf[c] == encode(f, r), "%s %02x * %02x = %02x, want %02x", f->name, s, c, buf[c], encode(f, r));
    }
  }
}

/* The fold of n members in gbReduceOrdered's order, rounded at every step,
 * then avg's one division, against the same fold written out here. */
static void testOrdered(const fmt_t* f) {
  enum { MAXN = 5, COUNT = 1001 };
  static uint8_t x[MAXN][COUNT], out[COUNT];
  for (int n = 1; n <= MAXN; n++)
    for (int ring = 0; ring < 2; ring++)
      for (int divisor = 0; divisor <= n; divisor += n) {
        for (int k = 0; k < n; k++)
          for (int i = 0; i < COUNT; i++) {
            uint8_t c = (uint8_t)rnd();
            x[k][i] = isNaNCode(f, c) ? (uint8_t)(c & 0xf0) : c; /* NaN aside: its sign is the FPU's */
          }
        const void* src[MAXN];
        for (int k = 0; k < n; k++) src[k] = x[k];
        gbReduceOrdered(out, src, n, COUNT, f->dt, gbSum, divisor, ring);
        for (int i = 0; i < COUNT; i++) {
          int first = 0;
          if (ring && n >= 3)
            for (int j = 0; j < n; j++)
              if (COUNT * j / n <= i && i < COUNT * (j + 1) / n) first = (j + 1) % n;
          uint8_t acc = x[first][i];
          for (int s = 1; s < n; s++) acc = encode(f, value(f, acc) + value(f, x[(first + s) % n][i]));
          if (divisor) acc = encode(f, value(f, acc) / divisor);
          if (isNaNCode(f, acc)) CHECK(isNaNCode(f, out[i]), "%s fold n %d ring %d element %d: want NaN", f->name, n,
                                       ring, i);
          else CHECK(out[i] == acc, "%s fold n %d ring %d avg %d element %d: %02x, want %02x", f->name, n, ring,
                     divisor, i, out[i], acc);
        }
      }
}

/* The edge values spelled out: saturation, overflow, NaN, subnormals,
 * ties. */
static uint8_t sum2(gbDataType_t dt, uint8_t a, uint8_t b) {
  gbReduceInto(&a, &b, 1, dt, gbSum);
  return a;
}
static uint8_t prod2(gbDataType_t dt, uint8_t a, uint8_t b) {
  gbReduceInto(&a, &b, 1, dt, gbProd);
  return a;
}

static void testEdges(void) {
  /* float8e4m3: 448 = 0x7e; 0x7f NaN; 2^-9 = 0x01; 2^-6 = 0x08. */
  CHECK(sum2(gbFloat8e4m3, 0x7e, 0x7e) == 0x7e, "e4m3 448 + 448 saturates to 448");
  CHECK(sum2(gbFloat8e4m3, 0xfe, 0xfe) == 0xfe, "e4m3 -448 - 448 saturates to -448");
  CHECK(prod2(gbFloat8e4m3, 0x7e, 0x7e) == 0x7e, "e4m3 448 * 448 saturates");
  CHECK(sum2(gbFloat8e4m3, 0x7e, 0x40 /* 2 */) == 0x7e, "e4m3 448 + 2 rounds to 448");
  CHECK(sum2(gbFloat8e4m3, 0x7e, 0x58 /* 16 */) == 0x7e, "e4m3 448 + 16 = 464 ties to 448 (even)");
  CHECK(sum2(gbFloat8e4m3, 0x7e, 0x59 /* 18 */) == 0x7e, "e4m3 448 + 18 = 466 saturates to 448");
  CHECK((sum2(gbFloat8e4m3, 0x7f, 0x38) & 0x7f) == 0x7f, "e4m3 NaN + 1 is NaN");
  CHECK(sum2(gbFloat8e4m3, 0x01, 0x01) == 0x02, "e4m3 subnormals add exactly: 2^-9 + 2^-9");
  CHECK(sum2(gbFloat8e4m3, 0x07, 0x01) == 0x08, "e4m3 largest subnormal + smallest = smallest normal");
  CHECK(prod2(gbFloat8e4m3, 0x01, 0x30 /* 0.5 */) == 0x00, "e4m3 2^-10 ties to zero");
  CHECK(prod2(gbFloat8e4m3, 0x81, 0x30) == 0x80, "e4m3 -2^-10 ties to -0");
  CHECK(prod2(gbFloat8e4m3, 0x03, 0x30) == 0x02, "e4m3 1.5 * 2^-9 ties to even 2 * 2^-9");
  CHECK(sum2(gbFloat8e4m3, 0x38, 0x28 /* 1 + 0.25 */) == 0x3a, "e4m3 1 + 0.25 = 1.25");
  CHECK(sum2(gbFloat8e4m3, 0x38, 0x18 /* 1 + 0.0625 */) == 0x38, "e4m3 1 + 1/16 ties to 1");
  /* float8e5m2: 57344 = 0x7b; inf 0x7c; NaN 0x7d..0x7f; 2^-16 = 0x01. */
  CHECK(sum2(gbFloat8e5m2, 0x7b, 0x7b) == 0x7c, "e5m2 57344 + 57344 overflows to inf");
  CHECK(sum2(gbFloat8e5m2, 0xfb, 0xfb) == 0xfc, "e5m2 to -inf");
  CHECK(sum2(gbFloat8e5m2, 0x7b, 0x6c /* 4096 */) == 0x7c, "e5m2 57344 + 4096 = 61440 ties up to inf");
  CHECK(sum2(gbFloat8e5m2, 0x7b, 0x68 /* 2048 */) == 0x7b, "e5m2 57344 + 2048 rounds to 57344");
  CHECK(sum2(gbFloat8e5m2, 0x7c, 0x7c) == 0x7c, "e5m2 inf + inf = inf");
  CHECK((sum2(gbFloat8e5m2, 0x7c, 0xfc) & 0x7f) == 0x7f, "e5m2 inf - inf is NaN (sign | 0x7f)");
  CHECK((prod2(gbFloat8e5m2, 0x7c, 0x00) & 0x7f) == 0x7f, "e5m2 inf * 0 is NaN");
  CHECK((sum2(gbFloat8e5m2, 0x7d, 0x3c) & 0x7f) == 0x7f, "e5m2 NaN payload becomes 0x7f");
  CHECK(sum2(gbFloat8e5m2, 0x01, 0x01) == 0x02, "e5m2 subnormals add exactly");
  CHECK(prod2(gbFloat8e5m2, 0x01, 0x38 /* 0.5 */) == 0x00, "e5m2 2^-17 ties to zero");
  CHECK(sum2(gbFloat8e5m2, 0x80, 0x80) == 0x80, "e5m2 -0 + -0 = -0");
  uint8_t m = 0x80, p = 0x00;
  gbReduceInto(&m, &p, 1, gbFloat8e4m3, gbMax);
  CHECK(m == 0x00, "e4m3 max(-0, +0) is the right operand");
  uint8_t n = 0x7f, one = 0x38;
  gbReduceInto(&n, &one, 1, gbFloat8e4m3, gbMin);
  CHECK(n == 0x7f, "e4m3 min(NaN, 1) is NaN");
  uint8_t d = 0x01;
  gbDivideBy(&d, 1, gbFloat8e4m3, 2);
  CHECK(d == 0x00, "e4m3 2^-9 / 2 ties to 0");
  uint8_t big = 0x7b;
  gbDivideBy(&big, 1, gbFloat8e5m2, 1);
  CHECK(big == 0x7b, "e5m2 / 1 leaves the value");
}

int main(void) {
  testNames();
  const fmt_t* fmts[] = {&E4M3, &E5M2};
  for (int k = 0; k < 2; k++) {
    testRoundTrip(fmts[k]);
    testPairs(fmts[k]);
    testDivideAndScale(fmts[k]);
    testOrdered(fmts[k]);
  }
  testEdges();
  if (failures) {
    fprintf(stderr, "test_base_fp8: %d failures\n", failures);
    return 1;
  }
  printf("test_base_fp8: ok (every pair of codes, every op, both types)\n");
  return 0;
}
