/* The bridge's compressed wire formats on the host (base/wire.h) against
 * references written from the format's definition (tests/unit/fp8_ref.h for
 * e4m3, double arithmetic for the scales, base/dtype.c's own bfloat16
 * conversion): every element's round trip, the error bounds the docs state
 * (docs/REDUCTION_ORDER.md), NaN, infinities, subnormals and the ends of
 * float's range, and the fold's bits. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/wire.h"
#include "base/wire_avx512.h"
#include "check.h"
#include "fp8_ref.h"

static uint32_t bitsOf(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float floatOf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

/* A value of a kind: spread magnitudes, specials, subnormals, range ends. */
static float sample(int kind) {
  switch (kind % 10) {
    case 0: return floatOf(next32());                                   /* any bits: NaN, inf, subnormal too */
    case 1: return NAN;
    case 2: return (next32() & 1) ? INFINITY : -INFINITY;
    case 3: return floatOf(next32() & 0x807fffffu);                     /* subnormal */
    case 4: return (next32() & 1 ? 1 : -1) * FLT_MAX * (float)(0.5 + (next32() % 1000) / 2000.0);
    default: return ((float)(next32() % 2000001) - 1e6f) / 1000.0f;     /* -1000..1000 */
  }
}

/* The reference scale exponent: the block's largest finite magnitude m is
 * f * 2^E with f in [0.5, 1); k = E - 8, at least -126. */
static int refExponent(const float* x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(x[i]) && fabs(x[i]) > m) m = fabs(x[i]);
  int e = 0;
  (void)frexp(m, &e);
  int k = m == 0 ? -126 : e - 8;
  return k < -126 ? -126 : k;
}

/* The reference fp8 round trip of x in a block of exponent k. */
static float refFp8(float x, int k) {
  if (isnan(x)) return x;
  if (isinf(x)) return x;
  uint8_t c = encode(&E4M3, ldexp((double)x, -k));
  return (float)(value(&E4M3, c) * ldexp(1.0, k));
}

static int sameFloat(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) && signbit(a) == signbit(b);
  return bitsOf(a) == bitsOf(b);
}

static void testSizes(void) {
  CHECK(gbWireBytes(GB_WIRE_BF16, gbFloat32, 1000) == 2000, "bf16 of 1000 floats: %zu", gbWireBytes(GB_WIRE_BF16, gbFloat32, 1000));
  CHECK(gbWireBytes(GB_WIRE_FP8, gbFloat32, 1000) == 16 + 1008, "fp8 of 1000 floats: %zu", gbWireBytes(GB_WIRE_FP8, gbFloat32, 1000));
  CHECK(gbWireBytes(GB_WIRE_FP8, gbFloat16, 256) == 16 + 256, "fp8 of 256 halves");
  CHECK(gbWireBytes(GB_WIRE_BF16, gbFloat16, 10) == 20, "bf16 leaves float16 as it is");
  CHECK(gbWireBytes(GB_WIRE_PLAIN, gbFloat32, 10) == 40, "plain");
  CHECK(gbWireBytes(GB_WIRE_FP8, gbFloat64, 10) == 80, "fp8 leaves float64 as it is");
  CHECK(gbWireNarrows(GB_WIRE_FP8, gbBfloat16) && !gbWireNarrows(GB_WIRE_BF16, gbBfloat16) &&
            !gbWireNarrows(GB_WIRE_FP8, gbInt32) && !gbWireNarrows(GB_WIRE_PLAIN, gbFloat32),
        "which types each wire narrows");
}

/* Encodes x (count floats) and folds it alone: the round trip. */
static void roundTrip(const float* x, size_t count, int wire, float* out) {
  void* w = malloc(gbWireBytes(wire, gbFloat32, count));
  gbWireEncode(w, x, count, gbFloat32, wire);
  const void* parts[1] = {w};
  gbWireFold(out, parts, 1, count, gbFloat32, wire, 0);
  free(w);
}

static void testBf16(void) {
  enum { N = 20000 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = sample(i);
  roundTrip(x, N, GB_WIRE_BF16, y);
  for (int i = 0; i < N; i++) {
    float ref = gbBf16ToFloat(gbFloatToBf16(x[i]));
    CHECK(sameFloat(y[i], ref), "bf16 of %a: %a, expected %a", x[i], y[i], ref);
    CHECK(sameFloat(gbWireBf16(x[i]), ref), "gbWireBf16(%a)", x[i]);
    if (isfinite(x[i]) && isfinite(y[i]))
      CHECK(fabs((double)y[i] - x[i]) <= fmax(ldexp(fabs(x[i]), -8), 0x1p-134), "bf16 bound: %a -> %a", x[i], y[i]);
    if (isinf(x[i])) CHECK(y[i] == x[i], "bf16 keeps %a", x[i]);
  }
  /* What rounds beyond bfloat16's largest value becomes infinity. */
  CHECK(isinf(gbWireBf16(FLT_MAX)) && gbWireBf16(-FLT_MAX) < 0, "bf16 of FLT_MAX overflows to infinity");
}

static void testFp8(void) {
  enum { N = 256 * 80 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) {
    int block = i / 256;
    /* Blocks of one kind, and blocks that mix kinds. */
    x[i] = block % 3 == 0 ? sample(block) : sample(i);
    if (block % 7 == 5) x[i] = floatOf(next32() & 0x007fffffu);         /* a block of subnormals only */
    if (block % 7 == 6) x[i] = (float)ldexp((next32() % 1000) / 1000.0, -120); /* tiny normals: k clamped */
  }
  x[256 * 10] = 448.0f, x[256 * 10 + 1] = 449.0f, x[256 * 10 + 2] = -464.0f; /* e4m3's own limits, scaled away */
  roundTrip(x, N, GB_WIRE_FP8, y);
  for (size_t b = 0; b < N / 256; b++) {
    int k = refExponent(x + b * 256, 256);
    for (size_t i = b * 256; i < (b + 1) * 256; i++) {
      float ref = refFp8(x[i], k);
      CHECK(sameFloat(y[i], ref), "fp8 of %a (block %zu, k %d): %a, expected %a", x[i], b, k, y[i], ref);
      CHECK(sameFloat(gbWireFp8(x[i], k), ref), "gbWireFp8(%a, %d)", x[i], k);
      if (isfinite(x[i]) && isinf(y[i])) /* rounds to 2^128: beyond float, as bf16's overflow */
        CHECK(fabs(x[i]) >= 0x1.fp127 && signbit(y[i]) == signbit(x[i]), "fp8 of %a overflows", x[i]);
      else if (isfinite(x[i]))
        CHECK(fabs((double)y[i] - x[i]) <= fmax(ldexp(fabs(x[i]), -4), ldexp(1.0, k - 10)),
              "fp8 bound: %a -> %a (k %d)", x[i], y[i], k);
      else
        CHECK(sameFloat(y[i], x[i]), "fp8 keeps %a as %a", x[i], y[i]);
    }
  }
  CHECK(gbWireFp8Exponent(256.0f) == 1 && gbWireFp8Exponent(255.0f) == 0 && gbWireFp8Exponent(0.0f) == -126,
        "exponents: 256 -> %d, 255 -> %d, 0 -> %d", gbWireFp8Exponent(256.0f), gbWireFp8Exponent(255.0f),
        gbWireFp8Exponent(0.0f));
}

/* Every code in a block of every scale exponent, folded alone: the code's
 * value by formula (fp8_ref.h) times 2^k, rounded once to float; the wire's
 * 0x7e is infinity and 0x7f NaN, with their signs. Laid out by hand as
 * base/wire.h describes it: the block's k as int32 (16 bytes), the codes. */
static void testEveryCode(void) {
  static unsigned char part[16 + 256];
  float got[256];
  for (int k = -126; k <= 127; k++) {
    int32_t k32 = k;
    memset(part, 0, 16);
    memcpy(part, &k32, 4);
    for (int c = 0; c < 256; c++) part[16 + c] = (unsigned char)c;
    const void* parts[1] = {part};
    gbWireFold(got, parts, 1, 256, gbFloat32, GB_WIRE_FP8, 0);
    for (int c = 0; c < 256; c++) {
      int low = c & 0x7f;
      float want = low == 0x7f ? (c & 0x80 ? -NAN : NAN)
                   : low == GB_WIRE_FP8_INF ? (c & 0x80 ? -INFINITY : INFINITY)
                                            : (float)ldexp(value(&E4M3, (uint8_t)c), k);
      CHECK(sameFloat(got[c], want), "code 0x%02x at k %d: %a, expected %a", c, k, got[c], want);
    }
  }
}

/* The fold: decode every part, add in float from part 0, divide, round once.
 * n elements into out + skew, out on a 64-byte line (a result of 1 MiB or
 * more is written with streaming stores where aligned; skew moves it off). */
static void testFold(int wire, gbDataType_t dt, int divisor, int n, int skew) {
  enum { PARTS = 3 };
  float* x[PARTS];
  float* dec[PARTS];
  uint16_t* narrow[PARTS];
  void* wires[PARTS];
  for (int p = 0; p < PARTS; p++) {
    x[p] = malloc(n * sizeof(float)), dec[p] = malloc(n * sizeof(float)), narrow[p] = malloc(n * 2);
    for (int i = 0; i < n; i++) {
      x[p][i] = i % 97 == 5 ? sample(i) : sample(5);
      if (dt == gbFloat16) narrow[p][i] = gbFloatToHalf(x[p][i]), x[p][i] = gbHalfToFloat(narrow[p][i]);
      if (dt == gbBfloat16) narrow[p][i] = gbFloatToBf16(x[p][i]), x[p][i] = gbBf16ToFloat(narrow[p][i]);
    }
    wires[p] = malloc(gbWireBytes(wire, dt, n));
    gbWireEncode(wires[p], dt == gbFloat32 ? (const void*)x[p] : (const void*)narrow[p], n, dt, wire);
    for (int i = 0; i < n; i++) {
      int start = i / 256 * 256, len = n - start < 256 ? n - start : 256;
      dec[p][i] = wire == GB_WIRE_BF16 ? gbBf16ToFloat(gbFloatToBf16(x[p][i])) : refFp8(x[p][i], refExponent(x[p] + start, len));
    }
  }
  size_t bytes = (size_t)n * gbDtypeSize(dt), room = (bytes + 64 + 63) / 64 * 64;
  unsigned char* out = aligned_alloc(64, room);
  memset(out, 0xa5, room);
  gbWireFold(out + skew, (const void* const*)wires, PARTS, n, dt, wire, divisor);
  for (size_t b = 0; b < room; b++)
    if (b < (size_t)skew || b >= skew + bytes) {
      CHECK(out[b] == 0xa5, "%s fold of %s, %d elements: byte %zu outside the result written", gbWireName(wire),
            gbDtypeName(dt), n, b);
      break;
    }
  int wrong = 0;
  for (int i = 0; i < n && wrong < 5; i++) {
    float acc = dec[0][i];
    for (int p = 1; p < PARTS; p++) acc = acc + dec[p][i];
    if (divisor > 0) acc = acc / (float)divisor;
    float got32;
    uint16_t got16;
    memcpy(dt == gbFloat32 ? (void*)&got32 : (void*)&got16, out + skew + (size_t)i * gbDtypeSize(dt), gbDtypeSize(dt));
    float got = dt == gbFloat32 ? got32 : dt == gbFloat16 ? gbHalfToFloat(got16) : gbBf16ToFloat(got16);
    float ref = dt == gbFloat32 ? acc : dt == gbFloat16 ? gbHalfToFloat(gbFloatToHalf(acc)) : gbBf16ToFloat(gbFloatToBf16(acc));
    wrong += !sameFloat(got, ref);
    CHECK(sameFloat(got, ref), "%s fold of %s, divisor %d, %d elements, element %d: %a, expected %a", gbWireName(wire),
          gbDtypeName(dt), divisor, n, i, got, ref);
  }
  free(out);
  for (int p = 0; p < PARTS; p++) free(wires[p]), free(x[p]), free(dec[p]), free(narrow[p]);
}

/* Both loops give the same bytes: encoded (a block's k too, which a round
 * trip cannot see where the block holds no finite nonzero value) and
 * folded, for short counts and blocks of every kind. */
static void testLoopsAgree(void) {
  enum { N = 4096 };
  static float x[N];
  for (int i = 0; i < N; i++) {
    int block = i / 256;
    x[i] = block == 0 ? 0.0f : block == 1 ? NAN : block == 2 ? (i & 1 ? INFINITY : -0.0f) : block == 3 ? sample(3)
                                                                                               : sample(i);
  }
  size_t counts[] = {0, 1, 15, 16, 17, 31, 33, 255, 257, 1000, N};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    size_t n = counts[c], bytes = gbWireBytes(GB_WIRE_FP8, gbFloat32, n);
    unsigned char* w[2];
    float* out[2];
    for (int portable = 0; portable < 2; portable++) {
      gbWirePortableOnly(portable);
      w[portable] = calloc(1, bytes + 1);
      out[portable] = calloc(n + 1, sizeof(float));
      gbWireEncode(w[portable], x, n, gbFloat32, GB_WIRE_FP8);
      const void* parts[2] = {w[portable], w[portable]};
      gbWireFold(out[portable], parts, 2, n, gbFloat32, GB_WIRE_FP8, 0);
    }
    CHECK(memcmp(w[0], w[1], bytes) == 0, "fp8 encode of %zu floats: the two loops differ", n);
    CHECK(memcmp(out[0], out[1], n * sizeof(float)) == 0, "fp8 fold of %zu floats: the two loops differ", n);
    for (int portable = 0; portable < 2; portable++) free(w[portable]), free(out[portable]);
  }
  gbWirePortableOnly(0);
}

/* Every check, on the loops base/wire.c runs (portable 0: AVX-512 where the
 * CPU has it) or on its portable ones. */
static void testAll(int portable) {
  gbWirePortableOnly(portable);
  testSizes();
  testBf16();
  testFp8();
  testEveryCode();
  testFold(GB_WIRE_BF16, gbFloat32, 0, 3000, 0);
  testFold(GB_WIRE_BF16, gbFloat32, 3, 3000, 0);
  testFold(GB_WIRE_FP8, gbFloat32, 0, 3000, 0);
  testFold(GB_WIRE_FP8, gbFloat16, 2, 3000, 0);
  testFold(GB_WIRE_FP8, gbBfloat16, 0, 3000, 0);
  testFold(GB_WIRE_FP8, gbFloat32, 0, 300001, 4);
  testFold(GB_WIRE_FP8, gbFloat32, 3, 300001, 0);
  testFold(GB_WIRE_FP8, gbFloat32, 0, 300001, 16);
  for (int n = 1; n <= 65; n += 4) testFold(GB_WIRE_FP8, gbFloat32, 0, n, 0);
  testFold(GB_WIRE_BF16, gbFloat32, 2, 300001, 8);
}

int main(void) {
  testAll(0);
  testAll(1);
  testLoopsAgree();
  if (failures) fprintf(stderr, "%d failures\n", failures);
  else printf("PASS: bf16 and fp8 wire formats, bounds and folds (%s loops and portable)\n",
                gbWireAvx512Usable() ? "AVX-512" : "portable");
  return failures != 0;
}
