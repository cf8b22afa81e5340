/* The fp8 wire's encoder and fold in AVX-512 intrinsics (base/wire_avx512.h).
 * The build targets plain x86-64, so these functions carry their own target
 * and base/wire.c calls them only where the CPU reports AVX-512 F, BW and VL
 * (and not in a sanitizer's build, which does not see into them).
 * Their bits are the portable loops' (base/wire.c, whose comments give the
 * arithmetic); tests/unit/test_base_wire.c runs its checks on both. */
#include "base/wire_avx512.h"

#include "base/wire_format.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

int gbWireAvx512Usable(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

/* ------------------------------------------------------------------ fold */

/* A code's value (sign cleared) as bfloat16 bits, which hold every e4m3
 * value exactly: exponent e >= 1 and mantissa m give (e + 120) << 7 | m << 4,
 * which is code << 4 plus 120 << 7; the subnormals m * 2^-9 are spelt out;
 * 0x7e (infinity on this wire) and 0x7f (NaN) end the table. */
#define ROW(e) \
  ((e) + 120) << 7, (((e) + 120) << 7) | 0x10, (((e) + 120) << 7) | 0x20, (((e) + 120) << 7) | 0x30, \
      (((e) + 120) << 7) | 0x40, (((e) + 120) << 7) | 0x50, (((e) + 120) << 7) | 0x60, (((e) + 120) << 7) | 0x70
static const uint16_t kE4m3Bf16[128] __attribute__((aligned(64))) = {
    0, 0x3b00, 0x3b80, 0x3bc0, 0x3c00, 0x3c20, 0x3c40, 0x3c60, /* 0, 2^-9, 2^-8, 1.5 * 2^-8, 2^-7 .. 1.75 * 2^-7 */
    ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6), ROW(7), ROW(8), ROW(9), ROW(10), ROW(11), ROW(12), ROW(13), ROW(14),
    (15 + 120) << 7, ((15 + 120) << 7) | 0x10, ((15 + 120) << 7) | 0x20, ((15 + 120) << 7) | 0x30,
    ((15 + 120) << 7) | 0x40, ((15 + 120) << 7) | 0x50, 0x7f80, 0x7fc0};
#undef ROW

/* 32 codes of a part from element j (one block: its scale): two word
 * permutes look their values up (the table's 128 words in four registers),
 * the sign goes on, each half widens to float (bfloat16 bits << 16) and
 * takes the block's scale: exact, as the portable decode is; a NaN keeps its
 * bits through the multiply. */
struct table {
  __m512i t0, t1, t2, t3;
};

AVX512 static inline void decode32(const struct table* t, const uint8_t* part, size_t codesAt, size_t j,
                                   __mmask32 m, __m512* v0, __m512* v1) {
  const __m512i signBit = _mm512_set1_epi16((short)0x8000), bit6 = _mm512_set1_epi16(0x40);
  int32_t k;
  memcpy(&k, part + (j / GB_WIRE_FP8_BLOCK) * 4, 4);
  __m512 scale = _mm512_castsi512_ps(_mm512_set1_epi32((k + 127) << 23));
  __m512i c = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, part + codesAt + j));
  __m512i low = _mm512_permutex2var_epi16(t->t0, c, t->t1), high = _mm512_permutex2var_epi16(t->t2, c, t->t3);
  __m512i w = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(c, bit6), low, high);
  w = _mm512_ternarylogic_epi32(w, _mm512_slli_epi16(c, 8), signBit, 0xf8); /* w | (c << 8 & sign) */
  __m512i w0 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(w)), 16);
  __m512i w1 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1)), 16);
  *v0 = _mm512_mul_ps(_mm512_castsi512_ps(w0), scale);
  *v1 = _mm512_mul_ps(_mm512_castsi512_ps(w1), scale);
}

/* 16 floats to d with streaming stores of 16 bytes (d on 16 bytes). */
AVX512 static inline void stream16(float* d, __m512 v) {
  _mm_stream_ps(d, _mm512_castps512_ps128(v));
  _mm_stream_ps(d + 4, _mm512_extractf32x4_ps(v, 1));
  _mm_stream_ps(d + 8, _mm512_extractf32x4_ps(v, 2));
  _mm_stream_ps(d + 12, _mm512_extractf32x4_ps(v, 3));
}

/* 32 elements a step, each summed over the parts in registers from part 0
 * on, divided, and stored: streamed where the step is whole and dst + j on
 * 16 bytes (whole 64-byte stores where on a line). */
AVX512 void gbWireFoldFp8Avx512(float* dst, const void* const* parts, int n, size_t count, size_t codesAt,
                                int divisor, int stream) {
  _Static_assert(GB_WIRE_FP8_BLOCK % 32 == 0, "a step of 32 codes lies in one block");
  const struct table t = {_mm512_load_si512(kE4m3Bf16), _mm512_load_si512(kE4m3Bf16 + 32),
                          _mm512_load_si512(kE4m3Bf16 + 64), _mm512_load_si512(kE4m3Bf16 + 96)};
  const __m512 d = _mm512_set1_ps((float)divisor);
  for (size_t j = 0; j < count; j += 32) {
    size_t left = count - j;
    __mmask32 m = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1);
    __m512 a0, a1;
    decode32(&t, parts[0], codesAt, j, m, &a0, &a1);
    for (int p = 1; p < n; p++) {
      __m512 v0, v1;
      decode32(&t, parts[p], codesAt, j, m, &v0, &v1);
      a0 = _mm512_add_ps(a0, v0), a1 = _mm512_add_ps(a1, v1);
    }
    if (divisor > 0) a0 = _mm512_div_ps(a0, d), a1 = _mm512_div_ps(a1, d);
    uintptr_t line = (uintptr_t)(dst + j) & 63;
    if (stream && left >= 32 && line == 0) {
      _mm512_stream_ps(dst + j, a0);
      _mm512_stream_ps(dst + j + 16, a1);
    } else if (stream && left >= 32 && (line & 15) == 0) {
      stream16(dst + j, a0);
      stream16(dst + j + 16, a1);
    } else {
      _mm512_mask_storeu_ps(dst + j, (__mmask16)m, a0);
      _mm512_mask_storeu_ps(dst + j + 16, (__mmask16)(m >> 16), a1);
    }
  }
  if (stream) _mm_sfence(); /* the streamed stores are seen before whatever the caller does next */
}

/* ---------------------------------------------------------------- encode */

AVX512 static inline __mmask16 leftMask(size_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* The largest finite magnitude's bits of n floats: a max of the magnitudes'
 * bits, again without the infinities and NaN where the first met one
 * (*special). */
AVX512 static inline int blockMax(const float* x, size_t n, int* special) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  __m512i max = _mm512_setzero_si512();
  for (size_t i = 0; i < n; i += 16)
    max = _mm512_max_epi32(max, _mm512_and_si512(_mm512_maskz_loadu_epi32(leftMask(n - i), x + i), magnitude));
  int top = _mm512_reduce_max_epi32(max);
  *special = top >= 0x7f800000;
  if (!*special) return top;
  max = _mm512_setzero_si512();
  for (size_t i = 0; i < n; i += 16) {
    __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(leftMask(n - i), x + i), magnitude);
    max = _mm512_mask_max_epi32(max, _mm512_cmplt_epi32_mask(a, inf), max, a);
  }
  return _mm512_reduce_max_epi32(max);
}

/* Per block: its exponent k, then per element base/wire.c's toFp8: v = |x| /
 * 2^k; from 2^-6 on its top bits rounded to nearest even (the rebias taken
 * off before the shift: no lane that keeps this code goes below zero), below
 * v * 2^9 rounded by adding 2^23; NaN and infinity where the block has one.
 * Only each lane's low byte is stored, so neither the rounding's 2^23 nor
 * bits above the code need taking off. */
AVX512 void gbWireEncodeFp8Avx512(int32_t* ks, uint8_t* codes, const float* src, size_t count) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i halfRebiased = _mm512_set1_epi32((int)(0x7ffffu - (((127u - 7u) << 3) << 20)));
  const __m512i one = _mm512_set1_epi32(1), minNormal = _mm512_set1_epi32(0x3c800000);
  const __m512i signBit = _mm512_set1_epi32(0x80);
  const __m512 subScale = _mm512_set1_ps(512.0f), roundF = _mm512_set1_ps(8388608.0f);
  for (size_t b = 0, at = 0; at < count; b++, at += GB_WIRE_FP8_BLOCK) {
    size_t n = count - at < GB_WIRE_FP8_BLOCK ? count - at : GB_WIRE_FP8_BLOCK;
    const float* x = src + at;
    int special;
    int k = gbWireFp8ExponentOfBits((unsigned)blockMax(x, n, &special));
    ks[b] = k;
    __m512 inv = _mm512_castsi512_ps(_mm512_set1_epi32((127 - k) << 23));
    for (size_t i = 0; i < n; i += 16) {
      __mmask16 m = leftMask(n - i);
      __m512i bits = _mm512_maskz_loadu_epi32(m, x + i);
      __m512i v = _mm512_and_si512(_mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(bits), inv)), magnitude);
      __m512i odd = _mm512_and_si512(_mm512_srli_epi32(v, 20), one);
      __m512i code = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(v, halfRebiased), odd), 20);
      __m512i sub = _mm512_castps_si512(_mm512_fmadd_ps(_mm512_castsi512_ps(v), subScale, roundF));
      code = _mm512_mask_mov_epi32(code, _mm512_cmplt_epu32_mask(v, minNormal), sub);
      if (special) {
        code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(v, inf), _mm512_set1_epi32(0x7f));
        code = _mm512_mask_mov_epi32(code, _mm512_cmpeq_epi32_mask(v, inf), _mm512_set1_epi32(GB_WIRE_FP8_INF));
      }
      code = _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(bits, 24), signBit, 0xf8); /* code | (x >> 24 & 0x80) */
      _mm_mask_storeu_epi8(codes + at + i, m, _mm512_cvtepi32_epi8(code));
    }
  }
}

#else

int gbWireAvx512Usable(void) { return 0; }
void gbWireEncodeFp8Avx512(int32_t* ks, uint8_t* codes, const float* src, size_t count) {
  (void)ks, (void)codes, (void)src, (void)count;
}
void gbWireFoldFp8Avx512(float* dst, const void* const* parts, int n, size_t count, size_t codesAt, int divisor,
                         int stream) {
  (void)dst, (void)parts, (void)n, (void)count, (void)codesAt, (void)divisor, (void)stream;
}

#endif
