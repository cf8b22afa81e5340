/* base/dtype: sizes and names, float16/bfloat16 conversions, every dtype x op
 * of gbReduceInto and gbDivideBy, against references computed here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "unit/check.h"

static uint64_t rngState = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64* */
  rngState ^= rngState >> 12;
  rngState ^= rngState << 25;
  rngState ^= rngState >> 27;
  return rngState * 2685821657736338717ull;
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- float16 reference: the compiler's _Float16 */
static uint16_t refF16FromFloat(float f) { _Float16 h = (_Float16)f; uint16_t u; memcpy(&u, &h, 2); return u; }
static float refF16ToFloat(uint16_t u) { _Float16 h; memcpy(&h, &u, 2); return (float)h; }

/* ---- bfloat16 reference: decode by formula; encode by choosing the nearer of
 * the two neighbours in double arithmetic (ties to the even one). */
static double bf16Value(uint16_t b) {
  int sign = b >> 15, e = (b >> 7) & 0xff, m = b & 0x7f;
  double v = (e == 0) ? ldexp(m, -133) : (e == 0xff) ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
  return sign ? -v : v;
}
static uint16_t refBf16FromFloat(float f) {
  if (isnan(f)) return 0x7fc0;
  double x = fabs((double)f);
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  uint16_t lo = 0;
  /* lo: the largest non-negative finite bf16 magnitude <= x (search on the ordered codes). */
  uint16_t a = 0, b = 0x7f7f;
  if (x >= bf16Value(0x7f7f)) lo = 0x7f7f;
  else {
    while (a < b) { uint16_t mid = (uint16_t)((a + b + 1) / 2); if (bf16Value(mid) <= x) a = mid; else b = (uint16_t)(mid - 1); }
    lo = a;
  }
  if (isinf(x)) return sign | 0x7f80;
  double vlo = bf16Value(lo), vhi = (lo == 0x7f7f) ? ldexp(1.0, 128) : bf16Value((uint16_t)(lo + 1));
  double dlo = x - vlo, dhi = vhi - x;
  uint16_t r = (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) ? lo : (uint16_t)(lo + 1);
  return sign | r;
}

static void testNames(void) {
  static const struct { gbDataType_t dt; size_t size; const char* name; int isFloat; } want[] = {
      {gbInt8, 1, "int8", 0},       {gbUint8, 1, "uint8", 0},     {gbInt32, 4, "int32", 0},
      {gbUint32, 4, "uint32", 0},   {gbInt64, 8, "int64", 0},     {gbUint64, 8, "uint64", 0},
      {gbFloat16, 2, "float16", 1}, {gbFloat32, 4, "float32", 1}, {gbFloat64, 8, "float64", 1},
      {gbBfloat16, 2, "bfloat16", 1}};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    CHECK(gbDtypeSize(want[i].dt) == want[i].size, "size of %s", want[i].name);
    CHECK(strcmp(gbDtypeName(want[i].dt), want[i].name) == 0, "name %s", want[i].name);
    CHECK(gbDtypeIsFloat(want[i].dt) == want[i].isFloat, "isFloat %s", want[i].name);
  }
  CHECK(gbDtypeSize(gbNumTypes) == 0, "unknown size");
  CHECK(strcmp(gbDtypeName((gbDataType_t)42), "unknown") == 0, "unknown name");
  const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  for (int i = 0; i < 5; i++) CHECK(strcmp(gbOpName((gbRedOp_t)i), ops[i]) == 0, "op %d", i);
  CHECK(strcmp(gbOpName((gbRedOp_t)5), "unknown") == 0, "unknown op");
}

static int isQuietF32(float f) { return isnan(f) && (fbits(f) & 0x00400000u); }

static void testHalf(void) {
  for (uint32_t h = 0; h < 65536; h++) {
    float got = gbHalfToFloat((uint16_t)h), want = refF16ToFloat((uint16_t)h);
    if (isnan(want)) CHECK(isQuietF32(got) && (signbit(got) != 0) == (signbit(want) != 0), "half %04x -> NaN", h);
    else CHECK(fbits(got) == fbits(want), "half %04x -> %a, want %a", h, got, want);
    /* Round trip of every non-NaN half. */
    if (!isnan(want)) CHECK(gbFloatToHalf(want) == h, "half %04x round trip", h);
  }
  /* Floats near every half and halfway between neighbours, plus a sweep of all exponents. */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    float v = refF16ToFloat((uint16_t)h), w = refF16ToFloat((uint16_t)(h + 1));
    float mid = (float)(((double)v + (double)w) / 2);
    float probes[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), nextafterf(v, INFINITY)};
    for (int k = 0; k < 4; k++)
      for (int s = 0; s < 2; s++) {
        float f = s ? -probes[k] : probes[k];
        CHECK(gbFloatToHalf(f) == refF16FromFloat(f), "float %a -> half %04x, want %04x", f,
              gbFloatToHalf(f), refF16FromFloat(f));
      }
  }
  for (uint64_t x = 0; x < 0x100000000ull; x += 4099) {
    float f = bitsf((uint32_t)x);
    uint16_t got = gbFloatToHalf(f);
    if (isnan(f)) CHECK((got & 0x7c00) == 0x7c00 && (got & 0x0200) && (got >> 15) == (x >> 31), "NaN %08x -> %04x", (unsigned)x, got);
    else CHECK(got == refF16FromFloat(f), "float %08x -> half %04x, want %04x", (unsigned)x, got, refF16FromFloat(f));
  }
  /* A signalling NaN comes out quiet. */
  CHECK(isQuietF32(gbHalfToFloat(0x7c01)), "half sNaN made quiet");
  CHECK((gbFloatToHalf(bitsf(0x7f800001u)) & 0x7e00) == 0x7e00, "float sNaN -> quiet half");
  CHECK(gbFloatToHalf(65520.0f) == 0x7c00, "65520 rounds to inf");
  CHECK(gbFloatToHalf(65519.0f) == 0x7bff, "65519 rounds to max");
  CHECK(gbFloatToHalf(ldexpf(1, -25)) == 0, "2^-25 ties to zero");
  CHECK(gbFloatToHalf(nextafterf(ldexpf(1, -25), 1)) == 1, "just above 2^-25 -> min subnormal");
}

static void testBf16(void) {
  for (uint32_t b = 0; b < 65536; b++) {
    float got = gbBf16ToFloat((uint16_t)b);
    double want = bf16Value((uint16_t)b);
    if (isnan(want)) CHECK(isQuietF32(got) && (fbits(got) >> 31) == (b >> 15), "bf16 %04x -> NaN", b);
    else CHECK((double)got == want && (signbit(got) != 0) == (int)(b >> 15), "bf16 %04x -> %a, want %a", b, got, want);
  }
  for (uint64_t x = 0; x < 0x100000000ull; x += 65537) {
    uint32_t probes[] = {(uint32_t)x, ((uint32_t)x & 0xffff0000u) | 0x8000u, ((uint32_t)x & 0xffff0000u) | 0x7fffu,
                         ((uint32_t)x & 0xffff0000u) | 0x8001u};
    for (int k = 0; k < 4; k++) {
      float f = bitsf(probes[k]);
      uint16_t got = gbFloatToBf16(f);
      if (isnan(f)) CHECK((got & 0x7fc0) == 0x7fc0 && (got >> 15) == (probes[k] >> 31), "NaN %08x -> %04x", probes[k], got);
      else CHECK(got == refBf16FromFloat(f), "float %08x -> bf16 %04x, want %04x", probes[k], got, refBf16FromFloat(f));
    }
  }
  CHECK(gbFloatToBf16(bitsf(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to inf");
  CHECK(isQuietF32(gbBf16ToFloat(0x7f81)), "bf16 sNaN made quiet");
}

/* ------------------------------------------------------- reductions */

#define N 1037 /* blocks plus an odd tail */

static void fillRandom(void* p, size_t bytes) {
  uint8_t* b = p;
  for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)(rnd() >> 56);
}

/* Integer reference: sum/prod in wide arithmetic, reduced modulo 2^bits. */
static void testInts(void) {
  static const gbDataType_t types[] = {gbInt8, gbUint8, gbInt32, gbUint32, gbInt64, gbUint64};
  for (size_t t = 0; t < 6; t++) {
    gbDataType_t dt = types[t];
    size_t sz = gbDtypeSize(dt);
    int isSigned = (dt == gbInt8 || dt == gbInt32 || dt == gbInt64);
    for (int op = 0; op <= gbAvg; op++) {
      uint8_t a[N * 8], b[N * 8], acc[N * 8];
      fillRandom(a, sizeof(a));
      fillRandom(b, sizeof(b));
      memcpy(acc, a, sizeof(a));
      gbReduceInto(acc, b, N, dt, (gbRedOp_t)op);
      for (size_t i = 0; i < N; i++) {
        unsigned __int128 ua = 0, ub = 0, got = 0, want;
        memcpy(&ua, a + i * sz, sz); /* little-endian: low bytes */
        memcpy(&ub, b + i * sz, sz);
        memcpy(&got, acc + i * sz, sz);
        unsigned __int128 mask = (((unsigned __int128)1) << (8 * sz)) - 1;
        /* Signed values: sign-extend to compare. */
        __int128 sa = (__int128)ua, sb = (__int128)ub;
        if (isSigned && (ua >> (8 * sz - 1))) sa -= ((__int128)1) << (8 * sz);
        if (isSigned && (ub >> (8 * sz - 1))) sb -= ((__int128)1) << (8 * sz);
        switch (op) {
          case gbSum: case gbAvg: want = (ua + ub) & mask; break;
          case gbProd: want = (ua * ub) & mask; break;
          case gbMax: want = (isSigned ? sa > sb : ua > ub) ? ua : ub; break;
          default: want = (isSigned ? sa < sb : ua < ub) ? ua : ub; break;
        }
        CHECK(got == want, "%s %s element %zu", gbDtypeName(dt), gbOpName((gbRedOp_t)op), i);
      }
    }
  }
  /* Wrap-around, spelled out. */
  int8_t i8 = 127, one8 = 1;
  gbReduceInto(&i8, &one8, 1, gbInt8, gbSum);
  CHECK(i8 == -128, "int8 127+1 = %d", i8);
  uint8_t u8 = 255, one = 1;
  gbReduceInto(&u8, &one, 1, gbUint8, gbSum);
  CHECK(u8 == 0, "uint8 255+1 = %d", u8);
  int32_t i32 = 2147483647, i32b = 2;
  gbReduceInto(&i32, &i32b, 1, gbInt32, gbProd);
  CHECK(i32 == -2, "int32 max*2 = %d", i32);
  int64_t i64 = INT64_MIN, m1 = -1;
  gbReduceInto(&i64, &m1, 1, gbInt64, gbProd);
  CHECK(i64 == INT64_MIN, "int64 min*-1 wraps to min");
  uint64_t u64 = 0, m = 1;
  gbReduceInto(&u64, &m, 1, gbUint64, gbMin);
  CHECK(u64 == 0, "uint64 min");
}

/* The rule for max/min: NaN if either side is NaN, else a > b ? a : b (acc as a). */
#define REF_MAX(x, y) (isnan(x) || isnan(y) ? NAN : ((x) > (y) ? (x) : (y)))
#define REF_MIN(x, y) (isnan(x) || isnan(y) ? NAN : ((x) < (y) ? (x) : (y)))

static float randomFloat(void) {
  switch (rnd() % 8) {
    case 0: return bitsf((uint32_t)rnd()); /* any bits: NaN, inf, subnormal */
    case 1: return (float)((int)(rnd() % 7) - 3);
    default: return (float)(((double)(int64_t)rnd()) / 9.2e18 * 1000.0);
  }
}

static void testFloat32And64(void) {
  for (int op = 0; op <= gbAvg; op++) {
    float a[N], b[N], acc[N];
    double da[N], db[N], dacc[N];
    for (int i = 0; i < N; i++) {
      a[i] = randomFloat(); b[i] = randomFloat();
      da[i] = (double)randomFloat() * 1.000000001; db[i] = (double)randomFloat() * 0.999999999;
    }
    if (op == gbMax || op == gbMin) { a[3] = NAN; b[5] = NAN; da[3] = NAN; db[5] = NAN; }
    memcpy(acc, a, sizeof(a));
    memcpy(dacc, da, sizeof(da));
    gbReduceInto(acc, b, N, gbFloat32, (gbRedOp_t)op);
    gbReduceInto(dacc, db, N, gbFloat64, (gbRedOp_t)op);
    for (int i = 0; i < N; i++) {
      /* float: exact in double, then rounded once. */
      float want;
      double dwant;
      switch (op) {
        case gbSum: case gbAvg: want = (float)((double)a[i] + (double)b[i]); dwant = da[i] + db[i]; break;
        case gbProd: want = (float)((double)a[i] * (double)b[i]); dwant = da[i] * db[i]; break;
        case gbMax: want = REF_MAX(a[i], b[i]); dwant = REF_MAX(da[i], db[i]); break;
        default: want = REF_MIN(a[i], b[i]); dwant = REF_MIN(da[i], db[i]); break;
      }
      if (isnan(want)) CHECK(isnan(acc[i]), "float32 %s %d: want NaN", gbOpName((gbRedOp_t)op), i);
      else CHECK(fbits(acc[i]) == fbits(want), "float32 %s %d: %a op %a = %a, want %a", gbOpName((gbRedOp_t)op), i, a[i], b[i], acc[i], want);
      if (isnan(dwant)) CHECK(isnan(dacc[i]), "float64 %s %d: want NaN", gbOpName((gbRedOp_t)op), i);
      else CHECK(memcmp(&dacc[i], &dwant, 8) == 0, "float64 %s %d", gbOpName((gbRedOp_t)op), i);
    }
  }
}

static void testHalfTypes(void) {
  for (int bf = 0; bf < 2; bf++) {
    gbDataType_t dt = bf ? gbBfloat16 : gbFloat16;
    for (int op = 0; op <= gbAvg; op++) {
      uint16_t a[N], b[N], acc[N];
      for (int i = 0; i < N; i++) {
        /* Mostly finite values of a modest range, some any bits. */
        if (rnd() % 5 == 0) { a[i] = (uint16_t)rnd(); b[i] = (uint16_t)rnd(); }
        else if (bf) { a[i] = refBf16FromFloat(randomFloat()); b[i] = refBf16FromFloat(randomFloat()); }
        else { a[i] = refF16FromFloat(randomFloat() / 16); b[i] = refF16FromFloat(randomFloat() / 16); }
      }
      if (op == gbMax || op == gbMin) { a[7] = bf ? 0x7fc0 : 0x7e00; b[9] = bf ? 0xffc0 : 0xfe00; }
      memcpy(acc, a, sizeof(a));
      gbReduceInto(acc, b, N, dt, (gbRedOp_t)op);
      for (int i = 0; i < N; i++) {
        float x = bf ? (float)bf16Value(a[i]) : refF16ToFloat(a[i]);
        float y = bf ? (float)bf16Value(b[i]) : refF16ToFloat(b[i]);
        float r;
        switch (op) {
          case gbSum: case gbAvg: r = (float)((double)x + (double)y); break;
          case gbProd: r = (float)((double)x * (double)y); break;
          case gbMax: r = REF_MAX(x, y); break;
          default: r = REF_MIN(x, y); break;
        }
        if (isnan(r)) {
          uint16_t g = acc[i];
          CHECK(bf ? ((g & 0x7f80) == 0x7f80 && (g & 0x7f)) : ((g & 0x7c00) == 0x7c00 && (g & 0x3ff)),
                "%s %s %d: want NaN, got %04x", gbDtypeName(dt), gbOpName((gbRedOp_t)op), i, g);
        } else {
          uint16_t want = bf ? refBf16FromFloat(r) : refF16FromFloat(r);
          CHECK(acc[i] == want, "%s %s %d: %04x op %04x = %04x, want %04x", gbDtypeName(dt),
                gbOpName((gbRedOp_t)op), i, a[i], b[i], acc[i], want);
        }
      }
    }
  }
  /* Rounding at every application: 2048 + 1 in float16 stays 2048 (ties to even). */
  uint16_t h = refF16FromFloat(2048), hone = refF16FromFloat(1);
  gbReduceInto(&h, &hone, 1, gbFloat16, gbSum);
  CHECK(h == refF16FromFloat(2048), "float16 2048+1 rounds to 2048");
  uint16_t bb = 0x4380 /* 256 */, bone = 0x3f80 /* 1 */;
  gbReduceInto(&bb, &bone, 1, gbBfloat16, gbSum);
  CHECK(bb == 0x4380, "bfloat16 256+1 rounds to 256, got %04x", bb);
}

static void testDivide(void) {
  float f[N];
  double d[N];
  uint16_t h[N], b[N];
  int32_t ints[4] = {10, 20, 30, 40};
  for (int i = 0; i < N; i++) {
    f[i] = randomFloat(); d[i] = (double)(i * 3); h[i] = refF16FromFloat(randomFloat() / 16);
    b[i] = refBf16FromFloat(randomFloat());
  }
  float f0[N]; uint16_t h0[N], b0[N];
  memcpy(f0, f, sizeof(f)); memcpy(h0, h, sizeof(h)); memcpy(b0, b, sizeof(b));
  gbDivideBy(f, N, gbFloat32, 3);
  gbDivideBy(d, N, gbFloat64, 3);
  gbDivideBy(h, N, gbFloat16, 3);
  gbDivideBy(b, N, gbBfloat16, 3);
  gbDivideBy(ints, 4, gbInt32, 10);
  for (int i = 0; i < N; i++) {
    float want = (float)((double)f0[i] / 3.0);
    if (isnan(want)) CHECK(isnan(f[i]), "float32 divide NaN");
    else CHECK(fbits(f[i]) == fbits(want), "float32 divide %d: %a", i, f0[i]);
    CHECK(d[i] == (double)i, "float64 divide %d: %g", i, d[i]);
    float hw = refF16ToFloat(h0[i]) / 3.0f;
    CHECK(isnan(hw) ? (h[i] & 0x7c00) == 0x7c00 : h[i] == refF16FromFloat(hw), "float16 divide %d", i);
    float bw = (float)(bf16Value(b0[i]) / 3.0);
    CHECK(isnan(bw) ? (b[i] & 0x7f80) == 0x7f80 : b[i] == refBf16FromFloat(bw), "bfloat16 divide %d", i);
  }
  CHECK(ints[0] == 10 && ints[3] == 40, "integers are left alone by gbDivideBy");
}

/* gbReduceTo(dst, left, right) gives gbReduceInto's bits (checked above
 * against references) with dst apart, dst == left and dst == right; and
 * left is the left operand: on a tie of +0 and -0, max and min return the
 * right one (a > b ? a : b, docs/REDUCTION_ORDER.md). */
static void testReduceTo(void) {
  for (int dt = 0; dt < gbNumTypes; dt++) {
    size_t sz = gbDtypeSize((gbDataType_t)dt);
    for (int op = 0; op <= gbMin; op++) {
      uint8_t a[N * 8], b[N * 8], want[N * 8], got[N * 8], alias[N * 8];
      fillRandom(a, sizeof(a));
      fillRandom(b, sizeof(b));
      memcpy(want, a, sizeof(a));
      gbReduceInto(want, b, N, (gbDataType_t)dt, (gbRedOp_t)op);
      const char* name = gbDtypeName((gbDataType_t)dt);
      gbReduceTo(got, a, b, N, (gbDataType_t)dt, (gbRedOp_t)op);
      CHECK(memcmp(got, want, N * sz) == 0, "gbReduceTo %s %s into a third buffer", name, gbOpName((gbRedOp_t)op));
      memcpy(alias, a, sizeof(a));
      gbReduceTo(alias, alias, b, N, (gbDataType_t)dt, (gbRedOp_t)op);
      CHECK(memcmp(alias, want, N * sz) == 0, "gbReduceTo %s %s into left", name, gbOpName((gbRedOp_t)op));
      memcpy(alias, b, sizeof(b));
      gbReduceTo(alias, a, alias, N, (gbDataType_t)dt, (gbRedOp_t)op);
      CHECK(memcmp(alias, want, N * sz) == 0, "gbReduceTo %s %s into right", name, gbOpName((gbRedOp_t)op));
    }
  }
  float pz[N], nz[N], out[N];
  for (int i = 0; i < N; i++) { pz[i] = 0.0f; nz[i] = -0.0f; }
  gbReduceTo(out, pz, nz, N, gbFloat32, gbMax);
  CHECK(signbit(out[0]) && signbit(out[N - 1]), "max(+0, -0) is the right operand, -0");
  gbReduceTo(out, nz, pz, N, gbFloat32, gbMax);
  CHECK(!signbit(out[0]) && !signbit(out[N - 1]), "max(-0, +0) is the right operand, +0");
  gbReduceTo(out, nz, pz, N, gbFloat32, gbMin);
  CHECK(!signbit(out[0]) && !signbit(out[N - 1]), "min(-0, +0) is the right operand, +0");
}

/* gbReduceOrdered: the fold order of docs/REDUCTION_ORDER.md (left to right,
 * or the ring's slices, each from member j+1), avg's division, and every
 * aliasing of dst with a source, against float folds written out here. */
static void testReduceOrdered(void) {
  enum { MAXN = 5, MAXC = 4099 };
  static float x[MAXN][MAXC], dst[MAXC], copy[MAXN][MAXC];
  const size_t counts[] = {1, 7, 1000, MAXC};
  for (int n = 1; n <= MAXN; n++)
    for (int ring = 0; ring < 2; ring++)
      for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (int alias = -1; alias < n; alias++) {
          size_t count = counts[ci];
          int divisor = (int)(count % 3); /* 0: none */
          for (int k = 0; k < n; k++)
            for (size_t i = 0; i < count; i++) {
              /* Magnitudes far apart, so another order gives other bits. */
              x[k][i] = bitsf((uint32_t)(rnd() & 0x807fffffu) | (uint32_t)(100 + (int)(rnd() % 60)) << 23);
              copy[k][i] = x[k][i];
            }
          const void* src[MAXN];
          for (int k = 0; k < n; k++) src[k] = x[k];
          float* out = alias < 0 ? dst : x[alias];
          gbReduceOrdered(out, src, n, count, gbFloat32, gbSum, divisor, ring);
          int bad = 0;
          for (size_t i = 0; i < count && !bad; i++) {
            int first = 0;
            if (ring && n >= 3)
              for (int j = 0; j < n; j++)
                if (count * (size_t)j / (size_t)n <= i && i < count * (size_t)(j + 1) / (size_t)n) first = (j + 1) % n;
            float acc = copy[first][i];
            for (int s = 1; s < n; s++) acc = acc + copy[(first + s) % n][i];
            if (divisor) acc = acc / (float)divisor;
            if (fbits(out[i]) != fbits(acc)) {
              CHECK(0, "reduce ordered: n %d ring %d count %zu alias %d: element %zu is %a, not %a", n, ring, count,
                    alias, i, out[i], acc);
              bad = 1;
            }
          }
        }
}

int main(void) {
  testNames();
  testHalf();
  testBf16();
  testInts();
  testFloat32And64();
  testHalfTypes();
  testDivide();
  testReduceTo();
  testReduceOrdered();
  if (failures) {
    fprintf(stderr, "test_base_dtype: %d failures\n", failures);
    return 1;
  }
  printf("test_base_dtype: ok\n");
  return 0;
}
