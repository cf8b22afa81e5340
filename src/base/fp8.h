/* The two fp8 types and float, both ways (docs/REDUCTION_ORDER.md):
 * - float8e4m3 is OCP FP8 E4M3 "fn" (torch.float8_e4m3fn, CUDA's
 *   __nv_fp8_e4m3): bias 7, 3 mantissa bits, no infinities, 0x7f and 0xff
 *   NaN, largest finite 448, smallest subnormal 2^-9;
 * - float8e5m2 is OCP FP8 E5M2 (torch.float8_e5m2): bias 15, 2 mantissa
 *   bits, infinities 0x7c/0xfc, NaN above them, largest finite 57344,
 *   smallest subnormal 2^-16.
 * To float: exact; a NaN comes out quiet with its sign. From float: round to
 * nearest even, bit for bit torch's conversion (2.13; torch 2.8 gives NaN
 * where 2.13 saturates): float8e4m3, which has no infinity, saturates: what
 * rounds beyond 448 (magnitudes above 464) and infinities give +-448 (CUDA's
 * __NV_SATFINITE);
 * float8e5m2 gives infinity for what rounds beyond 57344 (from 61440 up),
 * as IEEE does. A NaN becomes sign | 0x7f in both types. Header-only so the
 * host kernels inline them; the GPU kernels (device/gpu/kernels/reduce.cu)
 * carry the same code. */
#ifndef GB_BASE_FP8_H
#define GB_BASE_FP8_H

#include <stdint.h>
#include <string.h>

static inline uint32_t gbFp8FloatBits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float gbFp8BitsFloat(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float gbE4m3ToFloat(uint8_t b) {
  uint32_t sign = (uint32_t)(b & 0x80) << 24;
  uint32_t exp = (b >> 3) & 0xf, mant = b & 0x7;
  if ((b & 0x7f) == 0x7f) return gbFp8BitsFloat(sign | 0x7fc00000u);
  if (exp == 0) return gbFp8BitsFloat(sign | gbFp8FloatBits((float)mant * 0x1p-9f)); /* mant units of 2^-9 */
  return gbFp8BitsFloat(sign | (exp - 7 + 127) << 23 | mant << 20);
}

static inline float gbE5m2ToFloat(uint8_t b) {
  uint32_t sign = (uint32_t)(b & 0x80) << 24;
  uint32_t exp = (b >> 2) & 0x1f, mant = b & 0x3;
  if (exp == 0x1f) return gbFp8BitsFloat(sign | 0x7f800000u | mant << 21 | (mant ? 0x00400000u : 0));
  if (exp == 0) return gbFp8BitsFloat(sign | gbFp8FloatBits((float)mant * 0x1p-16f)); /* units of 2^-16 */
  return gbFp8BitsFloat(sign | (exp - 15 + 127) << 23 | mant << 21);
}

/* A magnitude below the type's smallest normal (a: float bits, sign
 * cleared), in units of the smallest subnormal, rounded to nearest even:
 * shift = 151 - bias - mantissa bits - a's float exponent (at least 21 here). */
static inline uint8_t gbFp8Subnormal(uint32_t a, uint32_t shift) {
  if (shift > 24) return 0; /* below half the smallest subnormal */
  uint32_t mant = (a & 0x7fffff) | 0x800000;
  uint32_t r = mant >> shift, rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (r & 1))) r++;
  return (uint8_t)r; /* a carry gives the smallest normal */
}

static inline uint8_t gbFloatToE4m3(float f) {
  uint32_t x = gbFp8FloatBits(f);
  uint8_t sign = (uint8_t)((x >> 24) & 0x80);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f);  /* NaN */
  if (a > 0x43e80000u) return (uint8_t)(sign | 0x7e);  /* above 464 (inf too): saturate to 448 */
  if (a >= 0x3c800000u) {                              /* >= 2^-6: normal */
    uint32_t r = (a >> 20) - ((127 - 7) << 3), rest = a & 0xfffff;
    if (rest > 0x80000 || (rest == 0x80000 && (r & 1))) r++;
    return (uint8_t)(sign | r);
  }
  return (uint8_t)(sign | gbFp8Subnormal(a, 141 - (a >> 23)));
}

static inline uint8_t gbFloatToE5m2(float f) {
  uint32_t x = gbFp8FloatBits(f);
  uint8_t sign = (uint8_t)((x >> 24) & 0x80);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f);   /* NaN */
  if (a >= 0x47800000u) return (uint8_t)(sign | 0x7c);  /* >= 2^16, inf: inf */
  if (a >= 0x38800000u) {                               /* >= 2^-14: normal; a carry may reach inf */
    uint32_t r = (a >> 21) - ((127 - 15) << 2), rest = a & 0x1fffff;
    if (rest > 0x100000 || (rest == 0x100000 && (r & 1))) r++;
    return (uint8_t)(sign | r);
  }
  return (uint8_t)(sign | gbFp8Subnormal(a, 134 - (a >> 23)));
}

#endif
