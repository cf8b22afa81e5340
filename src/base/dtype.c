/* Data types, float16/bfloat16 conversions (fp8's are base/fp8.h) and the
 * host reduction kernels.
 * Each kernel is a plain loop over one type and one op (the switch is outside
 * the loop) so the compiler can vectorize it. */
#include "base/dtype.h"

#include <string.h>

#include "base/bf16.h"
#include "base/fp8.h"

size_t gbDtypeSize(gbDataType_t dt) {
  switch (dt) {
    case gbInt8: case gbUint8: case gbFloat8e4m3: case gbFloat8e5m2: return 1;
    case gbFloat16: case gbBfloat16: return 2;
    case gbInt32: case gbUint32: case gbFloat32: return 4;
    case gbInt64: case gbUint64: case gbFloat64: return 8;
    default: return 0;
  }
}

const char* gbDtypeName(gbDataType_t dt) {
  static const char* const names[gbNumTypes] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                                "uint64",  "float16", "float32", "float64", "bfloat16",
                                                "float8e4m3", "float8e5m2"};
  return ((int)dt >= 0 && dt < gbNumTypes) ? names[dt] : "unknown";
}

int gbDtypeIsFloat(gbDataType_t dt) {
  return dt == gbFloat16 || dt == gbFloat32 || dt == gbFloat64 || dt == gbBfloat16 || gbDtypeIsFp8(dt);
}

int gbDtypeIsFp8(gbDataType_t dt) { return dt == gbFloat8e4m3 || dt == gbFloat8e5m2; }

const char* gbOpName(gbRedOp_t op) {
  static const char* const names[gbNumOps] = {"sum", "prod", "max", "min", "avg"};
  return ((int)op >= 0 && op < gbNumOps) ? names[op] : "unknown";
}

/* ------------------------------------------------------------ conversions */

static inline uint32_t floatBits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bitsFloat(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) /* inf, or NaN made quiet */
    return bitsFloat(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0));
  if (exp == 0) {
    if (mant == 0) return bitsFloat(sign);
    /* Subnormal: normalise; the value is mant * 2^-24. */
    int e = -14;
    while (!(mant & 0x400)) { mant <<= 1; e--; }
    return bitsFloat(sign | (uint32_t)(e + 127) << 23 | (mant & 0x3ff) << 13);
  }
  return bitsFloat(sign | (exp - 15 + 127) << 23 | mant << 13);
}

static inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* quiet NaN */
  if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00);                      /* >= 2^16: inf */
  if (a >= 0x38800000u) { /* normal half: rebias, round to nearest even (a carry may reach inf) */
    uint32_t h = (a >> 13) - ((127 - 15) << 10), rest = a & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  /* Subnormal half (or zero): the result counts units of 2^-24. */
  uint32_t shift = 126 - (a >> 23);
  if (shift > 24) return sign;
  uint32_t mant = (a & 0x7fffff) | 0x800000;
  uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1))) h++;
  return (uint16_t)(sign | h);
}


float gbHalfToFloat(uint16_t h) { return halfToFloat(h); }
uint16_t gbFloatToHalf(float f) { return floatToHalf(f); }
float gbBf16ToFloat(uint16_t b) { return gbBf16Widen(b); }
uint16_t gbFloatToBf16(float f) { return gbBf16Round(f); }

/* ---------------------------------------------------------------- kernels */

/* max/min: NaN wins (the left operand's first), else a > b ? a : b with the
 * left operand as a. */
#define FMAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define FMIN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define IMIN(a, b) ((a) < (b) ? (a) : (b))

/* The loop over blocks of 64 bytes reads a block of both operands before
 * writing it: the compiler then vectorizes it at -O2 without alias checks or
 * a cost model, and dst may be either operand. The tail runs element by
 * element. */
#define BLOCK_LOOP(T, UT_A, UT_B, EXPR)                                          \
  do {                                                                           \
    enum { B = 64 / sizeof(T) };                                                 \
    UT_A* d = dst; const UT_A* a = left; const UT_B* b = right;                  \
    size_t i = 0;                                                                \
    for (; i + B <= n; i += B) {                                                 \
      UT_A t[B];                                                                 \
      for (size_t j = 0; j < B; j++) { UT_A x = a[i + j]; UT_B y = b[i + j]; t[j] = (UT_A)(EXPR); } \
      for (size_t j = 0; j < B; j++) d[i + j] = t[j];                            \
    }                                                                            \
    for (; i < n; i++) { UT_A x = a[i]; UT_B y = b[i]; d[i] = (UT_A)(EXPR); }    \
  } while (0)

#define KERNEL_ARGS void* dst, const void* left, const void* right, size_t n

/* Integer sum and prod run in the unsigned type: they wrap modulo 2^bits
 * without undefined behaviour. max and min compare in the signed type. */
#define INT_KERNELS(NAME, T, UT)                                                          \
  static void NAME##Sum(KERNEL_ARGS) { BLOCK_LOOP(T, UT, UT, x + y); }                    \
  static void NAME##Prod(KERNEL_ARGS) { BLOCK_LOOP(T, UT, UT, x * y); }                   \
  static void NAME##Max(KERNEL_ARGS) { BLOCK_LOOP(T, T, T, IMAX(x, y)); }                 \
  static void NAME##Min(KERNEL_ARGS) { BLOCK_LOOP(T, T, T, IMIN(x, y)); }

INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)

#define FLOAT_KERNELS(NAME, T)                                                            \
  static void NAME##Sum(KERNEL_ARGS) { BLOCK_LOOP(T, T, T, x + y); }                      \
  static void NAME##Prod(KERNEL_ARGS) { BLOCK_LOOP(T, T, T, x * y); }                     \
  static void NAME##Max(KERNEL_ARGS) { BLOCK_LOOP(T, T, T, FMAX(x, y)); }                 \
  static void NAME##Min(KERNEL_ARGS) { BLOCK_LOOP(T, T, T, FMIN(x, y)); }

FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f64, double)

/* 16- and 8-bit floats: widen, combine in float, round back at every
 * application. */
#define NARROW_KERNEL(NAME, T, TOF, FROMF, EXPR)                                 \
  static void NAME(KERNEL_ARGS) {                                                \
    T* d = dst; const T* a = left; const T* b = right;                           \
    for (size_t i = 0; i < n; i++) {                                             \
      float x = TOF(a[i]), y = TOF(b[i]);                                        \
      d[i] = FROMF(EXPR);                                                        \
    }                                                                            \
  }

#define HALF_KERNEL(NAME, TOF, FROMF, EXPR) NARROW_KERNEL(NAME, uint16_t, TOF, FROMF, EXPR)
#define FP8_KERNEL(NAME, TOF, FROMF, EXPR) NARROW_KERNEL(NAME, uint8_t, TOF, FROMF, EXPR)

HALF_KERNEL(f16Sum, halfToFloat, floatToHalf, x + y)
HALF_KERNEL(f16Prod, halfToFloat, floatToHalf, x * y)
HALF_KERNEL(f16Max, halfToFloat, floatToHalf, FMAX(x, y))
HALF_KERNEL(f16Min, halfToFloat, floatToHalf, FMIN(x, y))
HALF_KERNEL(bf16Sum, gbBf16Widen, gbBf16Round, x + y)
HALF_KERNEL(bf16Prod, gbBf16Widen, gbBf16Round, x * y)
HALF_KERNEL(bf16Max, gbBf16Widen, gbBf16Round, FMAX(x, y))
HALF_KERNEL(bf16Min, gbBf16Widen, gbBf16Round, FMIN(x, y))
FP8_KERNEL(e4m3Sum, gbE4m3ToFloat, gbFloatToE4m3, x + y)
FP8_KERNEL(e4m3Prod, gbE4m3ToFloat, gbFloatToE4m3, x * y)
FP8_KERNEL(e4m3Max, gbE4m3ToFloat, gbFloatToE4m3, FMAX(x, y))
FP8_KERNEL(e4m3Min, gbE4m3ToFloat, gbFloatToE4m3, FMIN(x, y))
FP8_KERNEL(e5m2Sum, gbE5m2ToFloat, gbFloatToE5m2, x + y)
FP8_KERNEL(e5m2Prod, gbE5m2ToFloat, gbFloatToE5m2, x * y)
FP8_KERNEL(e5m2Max, gbE5m2ToFloat, gbFloatToE5m2, FMAX(x, y))
FP8_KERNEL(e5m2Min, gbE5m2ToFloat, gbFloatToE5m2, FMIN(x, y))

typedef void (*kernel_t)(KERNEL_ARGS);

/* [dtype][op] with op sum, prod, max, min. */
static const kernel_t kernels[gbNumTypes][4] = {
    [gbInt8] = {i8Sum, i8Prod, i8Max, i8Min},
    [gbUint8] = {u8Sum, u8Prod, u8Max, u8Min},
    [gbInt32] = {i32Sum, i32Prod, i32Max, i32Min},
    [gbUint32] = {u32Sum, u32Prod, u32Max, u32Min},
    [gbInt64] = {i64Sum, i64Prod, i64Max, i64Min},
    [gbUint64] = {u64Sum, u64Prod, u64Max, u64Min},
    [gbFloat16] = {f16Sum, f16Prod, f16Max, f16Min},
    [gbFloat32] = {f32Sum, f32Prod, f32Max, f32Min},
    [gbFloat64] = {f64Sum, f64Prod, f64Max, f64Min},
    [gbBfloat16] = {bf16Sum, bf16Prod, bf16Max, bf16Min},
    [gbFloat8e4m3] = {e4m3Sum, e4m3Prod, e4m3Max, e4m3Min},
    [gbFloat8e5m2] = {e5m2Sum, e5m2Prod, e5m2Max, e5m2Min},
};

void gbReduceTo(void* dst, const void* left, const void* right, size_t count, gbDataType_t dt, gbRedOp_t op) {
  if (op == gbAvg) op = gbSum;
  if ((int)dt < 0 || dt >= gbNumTypes || (int)op < 0 || op > gbMin || count == 0) return;
  kernels[dt][op](dst, left, right, count);
}

void gbReduceInto(void* acc, const void* in, size_t count, gbDataType_t dt, gbRedOp_t op) {
  gbReduceTo(acc, acc, in, count, dt, op);
}

/* Elements [begin, begin + len) of the fold, starting at member first.
 * Straight into dst unless dst is a source folded third or later (it would
 * be overwritten before it is read); then in blocks that fit on the stack,
 * every source of a block read before the block is written. */
#define ORDERED_BLOCK 2048
static void foldInto(char* acc, const void* const* src, int n, int first, size_t off, size_t m, gbDataType_t dt,
                     gbRedOp_t op, int divisor) {
  const char* x0 = (const char*)src[first] + off;
  if (n == 1) memmove(acc, x0, m * gbDtypeSize(dt));
  else gbReduceTo(acc, x0, (const char*)src[(first + 1) % n] + off, m, dt, op);
  for (int s = 2; s < n; s++) gbReduceInto(acc, (const char*)src[(first + s) % n] + off, m, dt, op);
  if (divisor > 0) gbDivideBy(acc, m, dt, divisor);
}

static void foldRange(char* dst, const void* const* src, int n, int first, size_t begin, size_t len, size_t es,
                      gbDataType_t dt, gbRedOp_t op, int divisor) {
  int direct = 1;
  for (int s = 2; s < n; s++) direct &= src[(first + s) % n] != dst;
  if (direct) {
    foldInto(dst + begin * es, src, n, first, begin * es, len, dt, op, divisor);
    return;
  }
  _Alignas(16) char acc[ORDERED_BLOCK * 8];
  for (size_t b = 0; b < len; b += ORDERED_BLOCK) {
    size_t m = len - b < ORDERED_BLOCK ? len - b : ORDERED_BLOCK;
    foldInto(acc, src, n, first, (begin + b) * es, m, dt, op, divisor);
    memcpy(dst + (begin + b) * es, acc, m * es);
  }
}

void gbReduceOrdered(void* dst, const void* const* src, int n, size_t count, gbDataType_t dt, gbRedOp_t op,
                     int divisor, int ring) {
  size_t es = gbDtypeSize(dt);
  if (n < 1 || es == 0 || count == 0) return;
  if (!ring || n < 3) {
    foldRange(dst, src, n, 0, 0, count, es, dt, op, divisor);
    return;
  }
  for (int j = 0; j < n; j++) {
    size_t b = count * (size_t)j / (size_t)n, e = count * (size_t)(j + 1) / (size_t)n;
    foldRange(dst, src, n, (j + 1) % n, b, e - b, es, dt, op, divisor);
  }
}

void gbDivideBy(void* buf, size_t count, gbDataType_t dt, int divisor) {
  size_t i;
  switch (dt) {
    case gbFloat32: {
      float* p = buf;
      float d = (float)divisor;
      for (i = 0; i < count; i++) p[i] = p[i] / d;
      break;
    }
    case gbFloat64: {
      double* p = buf;
      double d = (double)divisor;
      for (i = 0; i < count; i++) p[i] = p[i] / d;
      break;
    }
    case gbFloat16: {
      uint16_t* p = buf;
      float d = (float)divisor;
      for (i = 0; i < count; i++) p[i] = floatToHalf(halfToFloat(p[i]) / d);
      break;
    }
    case gbBfloat16: {
      uint16_t* p = buf;
      float d = (float)divisor;
      for (i = 0; i < count; i++) p[i] = gbBf16Round(gbBf16Widen(p[i]) / d);
      break;
    }
    case gbFloat8e4m3: case gbFloat8e5m2: {
      uint8_t* p = buf;
      float d = (float)divisor;
      if (dt == gbFloat8e4m3)
        for (i = 0; i < count; i++) p[i] = gbFloatToE4m3(gbE4m3ToFloat(p[i]) / d);
      else
        for (i = 0; i < count; i++) p[i] = gbFloatToE5m2(gbE5m2ToFloat(p[i]) / d);
      break;
    }
    default: break; /* integer types: the caller rejects avg before this */
  }
}

/* Integers multiply in the unsigned type (wraps without undefined
 * behaviour); floats multiply in their own type, 16- and 8-bit ones in float
 * with one rounding back. */
#define SCALE_LOOP(T, S)                                       \
  do {                                                         \
    T* p = buf;                                                \
    T s;                                                       \
    memcpy(&s, scalar, sizeof s);                              \
    for (size_t i = 0; i < count; i++) p[i] = (T)(S * p[i]);   \
  } while (0)

#define SCALE_NARROW(T, TOF, FROMF)                             \
  do {                                                         \
    T* p = buf;                                                \
    T raw;                                                     \
    memcpy(&raw, scalar, sizeof raw);                          \
    float s = TOF(raw);                                        \
    for (size_t i = 0; i < count; i++) p[i] = FROMF(s * TOF(p[i])); \
  } while (0)

void gbScaleBy(void* buf, size_t count, gbDataType_t dt, const void* scalar) {
  if (count == 0) return;
  switch (dt) {
    /* uint8 promotes to int before the multiply: widen to unsigned first. */
    case gbInt8: case gbUint8: SCALE_LOOP(uint8_t, (unsigned)s); break;
    case gbInt32: case gbUint32: SCALE_LOOP(uint32_t, s); break;
    case gbInt64: case gbUint64: SCALE_LOOP(uint64_t, s); break;
    case gbFloat32: SCALE_LOOP(float, s); break;
    case gbFloat64: SCALE_LOOP(double, s); break;
    case gbFloat16: SCALE_NARROW(uint16_t, halfToFloat, floatToHalf); break;
    case gbBfloat16: SCALE_NARROW(uint16_t, gbBf16Widen, gbBf16Round); break;
    case gbFloat8e4m3: SCALE_NARROW(uint8_t, gbE4m3ToFloat, gbFloatToE4m3); break;
    case gbFloat8e5m2: SCALE_NARROW(uint8_t, gbE5m2ToFloat, gbFloatToE5m2); break;
    default: break;
  }
}
