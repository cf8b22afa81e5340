/* fp8 references for the unit tests, written from the formats' definitions
 * (never from base/dtype): a code's value by formula, and a double's code as
 * the nearer of the two neighbouring codes in double arithmetic (ties to the
 * even code), with the overflow rules of docs/REDUCTION_ORDER.md
 * (float8e4m3 saturates to 448, float8e5m2 overflows to infinity), NaN as
 * sign | 0x7f. */
#ifndef GB_TESTS_UNIT_FP8_REF_H
#define GB_TESTS_UNIT_FP8_REF_H

#include <math.h>
#include <stdint.h>

#include "gpubridge/gpubridge.h"

/* One type's shape: exponent and mantissa bits, bias, the largest finite
 * code, what an overflow gives and the code just past the largest finite
 * value (its value, for rounding: 480 and 65536). */
typedef struct {
  gbDataType_t dt;
  const char* name;
  int mbits, bias;
  uint8_t maxCode, overflow;
  double past;
} fmt_t;

static const fmt_t E4M3 __attribute__((unused)) = {gbFloat8e4m3, "float8e4m3", 3, 7, 0x7e, 0x7e, 480.0};
static const fmt_t E5M2 __attribute__((unused)) = {gbFloat8e5m2, "float8e5m2", 2, 15, 0x7b, 0x7c, 65536.0};

static inline int isNaNCode(const fmt_t* f, uint8_t c) {
  return f->dt == gbFloat8e4m3 ? (c & 0x7f) == 0x7f : (c & 0x7f) > 0x7c;
}

/* The value of a code, by formula. */
static inline double value(const fmt_t* f, uint8_t c) {
  int sign = c >> 7, e = (c >> f->mbits) & ((0x7f >> f->mbits)), m = c & ((1 << f->mbits) - 1);
  double v;
  if (isNaNCode(f, c)) return NAN;
  if (f->dt == gbFloat8e5m2 && (c & 0x7f) == 0x7c) v = INFINITY;
  else if (e == 0) v = ldexp(m, 1 - f->bias - f->mbits);
  else v = ldexp((1 << f->mbits) + m, e - f->bias - f->mbits);
  return sign ? -v : v;
}

/* The code of x: the nearer of the finite codes around |x| (ties to the
 * even one), the overflow code past the largest, NaN as sign | 0x7f. */
static inline uint8_t encode(const fmt_t* f, double x) {
  uint8_t sign = signbit(x) ? 0x80 : 0;
  if (isnan(x)) return sign | 0x7f;
  double a = fabs(x);
  if (isinf(a)) return sign | f->overflow;
  uint8_t lo = 0;
  while (lo < f->maxCode && value(f, (uint8_t)(lo + 1)) <= a) lo++;
  double vlo = value(f, lo), vhi = lo == f->maxCode ? f->past : value(f, (uint8_t)(lo + 1));
  if (a >= vhi) return sign | f->overflow; /* beyond the value past the largest */
  double dlo = a - vlo, dhi = vhi - a;
  if (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) return sign | lo;
  return sign | (lo == f->maxCode ? f->overflow : (uint8_t)(lo + 1));
}

/* The shape of an fp8 type. */
static inline const fmt_t* fp8Fmt(gbDataType_t dt) { return dt == gbFloat8e4m3 ? &E4M3 : &E5M2; }

#endif
