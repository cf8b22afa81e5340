/* The bridge's compressed wire formats on the host (base/wire.h): the
 * encoder and the fold, written as loops over tiles that the compiler
 * vectorises (no branch per element but selects). */
#include "base/wire.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/bf16.h"
#include "base/dtype.h"
#include "base/fp8.h"
#include "base/wire_avx512.h"

#define ROUND16(b) (((b) + 15) / 16 * 16)
/* The hot loops, built for AVX2 and AVX-512 (x86-64-v4, GCC 11 on) too and
 * chosen at load time (the build targets plain x86-64; CMakeLists.txt
 * builds this file with -O3, which vectorises them). AVX-512 took the fp8
 * encoder from 42 to 28 ms per 64 M floats on an AMD EPYC; where the CPU has
 * AVX-512 F, BW and VL the fp8 loops are base/wire_avx512.c's by hand (19 ms;
 * docs/PERFORMANCE.md). Neither under the sanitizers: an instrumented
 * load-time resolver runs before their run-time is up (TSan crashes there),
 * and they do not see into the intrinsics' masked and streamed accesses
 * (the portable loops' plain ones are checked instead). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !SANITIZED
#if __GNUC__ >= 11
#define HOT __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define HOT __attribute__((target_clones("avx2", "default")))
#endif
#else
#define HOT
#endif
#define TILE 1024 /* elements a fold accumulates at a time (in float, on the stack) */
/* A float fold whose result is at least this large writes it with streaming
 * stores: it leaves the cache anyway, and a plain store first reads every line
 * it writes (the bf16 fold of 64 M floats: 32 against 25 ms). */
#define STREAM_BYTES (1u << 20)

/* The fp8 loops by hand (base/wire_avx512.c) where the CPU runs them, unless
 * a test asked for the portable ones. Relaxed atomics: every thread that
 * asks computes the same answer. */
static int gPortableOnly;
void gbWirePortableOnly(int on) { __atomic_store_n(&gPortableOnly, on, __ATOMIC_RELAXED); }

static int byHand(void) {
  if (SANITIZED) return 0;
  static int usable = -1;
  int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);
  if (u < 0) __atomic_store_n(&usable, u = gbWireAvx512Usable(), __ATOMIC_RELAXED);
  return u && !__atomic_load_n(&gPortableOnly, __ATOMIC_RELAXED);
}

const char* gbWireName(int wire) { return wire == GB_WIRE_BF16 ? "bf16" : wire == GB_WIRE_FP8 ? "fp8" : "off"; }

int gbWireNarrows(int wire, gbDataType_t dt) {
  if (wire == GB_WIRE_BF16) return dt == gbFloat32;
  if (wire == GB_WIRE_FP8) return dt == gbFloat32 || dt == gbFloat16 || dt == gbBfloat16;
  return 0;
}

static size_t fp8Blocks(size_t count) { return (count + GB_WIRE_FP8_BLOCK - 1) / GB_WIRE_FP8_BLOCK; }

size_t gbWireBytes(int wire, gbDataType_t dt, size_t count) {
  if (!gbWireNarrows(wire, dt)) return count * gbDtypeSize(dt);
  if (wire == GB_WIRE_BF16) return ROUND16(count * 2);
  return ROUND16(fp8Blocks(count) * 4) + ROUND16(count);
}

/* ------------------------------------------------------------- elements */

static inline uint32_t bitsOf(float f) { return gbFp8FloatBits(f); }
static inline float floatOf(uint32_t u) { return gbFp8BitsFloat(u); }

int gbWireFp8Exponent(float m) { return gbWireFp8ExponentOfBits(bitsOf(m) & 0x7fffffffu); }

/* x / 2^k (inv = 2^-k) as a code: NaN and infinity keep their sign. The
 * magnitude v = |x| / 2^k is at most 256 (finite x), so base/fp8.h's
 * gbFloatToE4m3 reduces to: from 2^-6 on, the float's top bits rounded to
 * nearest even; below, v * 2^9 rounded to an integer (adding 2^23 rounds
 * it, to nearest even). No branch: the compiler vectorises it. */
static inline uint8_t toFp8(float x, float inv) {
  uint32_t u = bitsOf(x), a = u & 0x7fffffffu;
  uint32_t sign = (u >> 24) & 0x80;
  uint32_t v = bitsOf(x * inv) & 0x7fffffffu;
  uint32_t normal = ((v + 0x7ffffu + ((v >> 20) & 1)) >> 20) - ((127 - 7) << 3);
  uint32_t sub = bitsOf(floatOf(v) * 512.0f + 8388608.0f) - 0x4b000000u;
  uint32_t isNormal = 0u - (uint32_t)(v >= 0x3c800000u);
  uint32_t isNaN = 0u - (uint32_t)(a > 0x7f800000u), isInf = 0u - (uint32_t)(a == 0x7f800000u);
  uint32_t code = (normal & isNormal) | (sub & ~isNormal);
  code = (code & ~(isNaN | isInf)) | (0x7fu & isNaN) | (GB_WIRE_FP8_INF & isInf);
  return (uint8_t)(sign | code);
}

/* A code times 2^k (scale): exact. base/fp8.h's gbE4m3ToFloat without a
 * branch, infinity at 0x7e: a normal code's exponent and mantissa bits are
 * float's shifted, rebiased by 120; a subnormal code (exponent 0, value
 * m * 2^-9) is read as the normal 2^-6 + m * 2^-9 and 2^-6 taken off, which
 * is exact. Fewer steps than converting m, which the fold feels (57 against
 * 67 ms for 64 M elements of two parts). */
static inline float fromFp8(uint8_t c, float scale) {
  uint32_t sign = (uint32_t)(c & 0x80) << 24, low = c & 0x7fu;
  uint32_t isSub = 0u - (uint32_t)(low < 8);
  float f = floatOf((low << 20) + (120u << 23) + (isSub & (1u << 23))) - floatOf(isSub & (121u << 23));
  uint32_t v = bitsOf(f * scale);
  uint32_t isNaN = 0u - (uint32_t)(low == 0x7f), isInf = 0u - (uint32_t)(low == GB_WIRE_FP8_INF);
  v = (v & ~(isNaN | isInf)) | (0x7fc00000u & isNaN) | (0x7f800000u & isInf);
  return floatOf(sign | v);
}

float gbWireBf16(float x) { return gbBf16Widen(gbBf16Round(x)); }

float gbWireFp8(float x, int k) {
  float scale = floatOf((uint32_t)(k + 127) << 23), inv = floatOf((uint32_t)(127 - k) << 23);
  return fromFp8(toFp8(x, inv), scale);
}

/* Element i of src (dt: float32, float16 or bfloat16) as float, and back. */
static inline float loadF(const void* src, size_t i, gbDataType_t dt) {
  if (dt == gbFloat32) return ((const float*)src)[i];
  uint16_t h = ((const uint16_t*)src)[i];
  return dt == gbFloat16 ? gbHalfToFloat(h) : gbBf16Widen(h);
}

HOT static void storeTile(void* dst, size_t at, const float* acc, size_t n, gbDataType_t dt, int stream) {
  if (dt == gbFloat32) {
    float* d = (float*)dst + at;
    size_t i = 0;
#if defined(__SSE2__)
    if (stream) {
      for (; i < n && ((uintptr_t)(d + i) & 15); i++) d[i] = acc[i];
      for (; i + 4 <= n; i += 4) _mm_stream_ps(d + i, _mm_loadu_ps(acc + i));
    }
#else
    (void)stream;
#endif
    memcpy(d + i, acc + i, (n - i) * sizeof(float));
    return;
  }
  uint16_t* d = (uint16_t*)dst + at;
  for (size_t i = 0; i < n; i++) d[i] = dt == gbFloat16 ? gbFloatToHalf(acc[i]) : gbBf16Round(acc[i]);
}

/* ---------------------------------------------------------------- encode */

HOT static void encodeBf16(uint16_t* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; i++) dst[i] = gbBf16Round(src[i]);
}

/* The largest finite magnitude's bits (0: none). */
static inline uint32_t blockMax(const void* src, size_t at, size_t n, gbDataType_t dt) {
  uint32_t m = 0;
  if (dt == gbFloat32) { /* magnitudes' bits fit int32: a signed max reduction, which vectorises */
    const int32_t* u = (const int32_t*)src + at;
    int32_t sm = 0;
    for (size_t i = 0; i < n; i++) {
      int32_t a = u[i] & 0x7fffffff;
      a = a < 0x7f800000 ? a : 0;
      sm = a > sm ? a : sm;
    }
    return (uint32_t)sm;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t a = bitsOf(loadF(src, at + i, dt)) & 0x7fffffffu;
    a = a < 0x7f800000u ? a : 0;
    m = a > m ? a : m;
  }
  return m;
}

HOT static void encodeFp8(void* dst, const void* src, size_t count, gbDataType_t dt) {
  int32_t* ks = dst;
  uint8_t* codes = (uint8_t*)dst + ROUND16(fp8Blocks(count) * 4);
  if (dt == gbFloat32 && byHand()) {
    gbWireEncodeFp8Avx512(ks, codes, src, count);
    return;
  }
  for (size_t b = 0, at = 0; at < count; b++, at += GB_WIRE_FP8_BLOCK) {
    size_t n = count - at < GB_WIRE_FP8_BLOCK ? count - at : GB_WIRE_FP8_BLOCK;
    int k = gbWireFp8Exponent(floatOf(blockMax(src, at, n, dt)));
    ks[b] = k;
    float inv = floatOf((uint32_t)(127 - k) << 23);
    if (dt == gbFloat32)
      for (size_t i = 0; i < n; i++) codes[at + i] = toFp8(((const float*)src)[at + i], inv);
    else
      for (size_t i = 0; i < n; i++) codes[at + i] = toFp8(loadF(src, at + i, dt), inv);
  }
}

void gbWireEncode(void* dst, const void* src, size_t count, gbDataType_t dt, int wire) {
  if (!gbWireNarrows(wire, dt)) {
    memmove(dst, src, count * gbDtypeSize(dt));
    return;
  }
  if (wire == GB_WIRE_BF16) {
    encodeBf16(dst, src, count);
    return;
  }
  encodeFp8(dst, src, count, dt);
}

/* ------------------------------------------------------------------ fold */

/* acc[0..n) (+)= part's elements [at, at + n) decoded (first: =). */
HOT static void foldPart(float* acc, const void* part, size_t count, size_t at, size_t n, int wire, int first) {
  if (wire == GB_WIRE_BF16) {
    const uint16_t* p = (const uint16_t*)part + at;
    if (first)
      for (size_t i = 0; i < n; i++) acc[i] = gbBf16Widen(p[i]);
    else
      for (size_t i = 0; i < n; i++) acc[i] = acc[i] + gbBf16Widen(p[i]);
    return;
  }
  const int32_t* ks = part;
  const uint8_t* codes = (const uint8_t*)part + ROUND16(fp8Blocks(count) * 4);
  /* A tile starts on a block's boundary (TILE is a multiple of the block). */
  for (size_t j = 0; j < n; j += GB_WIRE_FP8_BLOCK) {
    size_t m = n - j < GB_WIRE_FP8_BLOCK ? n - j : GB_WIRE_FP8_BLOCK;
    float scale = floatOf((uint32_t)(ks[(at + j) / GB_WIRE_FP8_BLOCK] + 127) << 23);
    const uint8_t* c = codes + at + j;
    if (first)
      for (size_t i = 0; i < m; i++) acc[j + i] = fromFp8(c[i], scale);
    else
      for (size_t i = 0; i < m; i++) acc[j + i] = acc[j + i] + fromFp8(c[i], scale);
  }
}

_Static_assert(TILE % GB_WIRE_FP8_BLOCK == 0, "a fold's tile holds whole fp8 blocks");

/* Dispatched by the clones, so static: a clone set of an external function
 * would be exported whatever the build's visibility. */
HOT static void foldTiles(void* dst, const void* const* src, int n, size_t count, gbDataType_t dt, int wire,
                          int divisor) {
  float acc[TILE];
  float d = (float)divisor;
  int stream = !SANITIZED && count * gbDtypeSize(dt) >= STREAM_BYTES;
  if (wire == GB_WIRE_FP8 && dt == gbFloat32 && byHand()) {
    gbWireFoldFp8Avx512(dst, src, n, count, ROUND16(fp8Blocks(count) * 4), divisor, stream);
    return;
  }
  for (size_t at = 0; at < count; at += TILE) {
    size_t m = count - at < TILE ? count - at : TILE;
    for (int s = 0; s < n; s++) foldPart(acc, src[s], count, at, m, wire, s == 0);
    if (divisor > 0)
      for (size_t i = 0; i < m; i++) acc[i] = acc[i] / d;
    storeTile(dst, at, acc, m, dt, stream);
  }
#if defined(__SSE2__)
  if (stream) _mm_sfence(); /* the streamed stores are seen before whatever the caller does next */
#endif
}

void gbWireFold(void* dst, const void* const* src, int n, size_t count, gbDataType_t dt, int wire, int divisor) {
  if (!gbWireNarrows(wire, dt)) {
    gbReduceOrdered(dst, src, n, count, dt, gbSum, divisor, 0);
    return;
  }
  foldTiles(dst, src, n, count, dt, wire, divisor);
}
