/* Data types and ops as the benchmark sees them. The float16, bfloat16 and
 * fp8 encodings are written here rather than borrowed from the library, so
 * the expected values of a check do not share code with what is checked. */
#include <math.h>
#include <string.h>
#include "perf.h"

static const struct {
  const char* name;
  size_t size;
  int isFloat;
} types[gbNumTypes] = {
    [gbInt8] = {"int8", 1, 0},       [gbUint8] = {"uint8", 1, 0},
    [gbInt32] = {"int32", 4, 0},     [gbUint32] = {"uint32", 4, 0},
    [gbInt64] = {"int64", 8, 0},     [gbUint64] = {"uint64", 8, 0},
    [gbFloat16] = {"half", 2, 1},    [gbFloat32] = {"float", 4, 1},
    [gbFloat64] = {"double", 8, 1},  [gbBfloat16] = {"bfloat16", 2, 1},
    [gbFloat8e4m3] = {"f8e4m3", 1, 1}, [gbFloat8e5m2] = {"f8e5m2", 1, 1},
};

static const char* const opNames[gbNumOps] = {"sum", "prod", "max", "min", "avg"};

size_t perfTypeSize(gbDataType_t dt) {
  return (unsigned)dt < gbNumTypes ? types[dt].size : 0;
}

const char* perfTypeName(gbDataType_t dt) {
  return (unsigned)dt < gbNumTypes ? types[dt].name : "unknown";
}

int perfTypeIsFloat(gbDataType_t dt) {
  return (unsigned)dt < gbNumTypes && types[dt].isFloat;
}

const char* perfOpName(gbRedOp_t op) {
  return (unsigned)op < gbNumOps ? opNames[op] : "unknown";
}

int perfOpValid(gbRedOp_t op, gbDataType_t dt) {
  return op != gbAvg || perfTypeIsFloat(dt);
}

/* IEEE-style binary format with mbits stored mantissa bits and ebits exponent
 * bits, rounded to nearest even; covers float16 (10, 5), bfloat16 (7, 8) and
 * float8e5m2 (2, 5). finite: float8e4m3 (3, 4), which has no infinity: the
 * top exponent holds numbers, all ones there is NaN, and what rounds past
 * the largest (448) saturates to it. */
static uint64_t encodeFormat(double d, int mbits, int ebits, int finite) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;
  const uint64_t sign = signbit(d) ? (uint64_t)1 << (mbits + ebits) : 0;
  const uint64_t inf = (((uint64_t)1 << ebits) - 1) << mbits;
  const uint64_t maxFinite = finite ? inf | (((uint64_t)1 << mbits) - 2) : inf - 1;
  if (isnan(d)) return finite ? inf | (((uint64_t)1 << mbits) - 1) : inf | ((uint64_t)1 << (mbits - 1));
  d = fabs(d);
  if (isinf(d)) return sign | (finite ? maxFinite : inf);
  if (d == 0.0) return sign;
  int e;
  frexp(d, &e); /* d = m * 2^e, m in [0.5, 1): floor(log2 d) = e - 1 */
  int q = (e - 1 < emin ? emin : e - 1) - mbits; /* the weight of the last bit */
  uint64_t m = (uint64_t)nearbyint(ldexp(d, -q)); /* default mode: to nearest even */
  if (m == (uint64_t)2 << mbits) { /* rounded up into the next binade */
    m >>= 1;
    q++;
  }
  if (m < (uint64_t)1 << mbits) return sign | m; /* subnormal */
  int biased = q + mbits + bias;
  uint64_t bits = ((uint64_t)biased << mbits) | (m - ((uint64_t)1 << mbits));
  if (finite) return sign | (biased > (1 << ebits) - 1 || bits > maxFinite ? maxFinite : bits);
  if (biased >= (1 << ebits) - 1) return sign | inf;
  return sign | bits;
}

static uint64_t encodeBinary(double d, int mbits, int ebits) { return encodeFormat(d, mbits, ebits, 0); }

static double decodeBinary(uint64_t bits, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint64_t mmask = ((uint64_t)1 << mbits) - 1;
  int biased = (int)((bits >> mbits) & (((uint64_t)1 << ebits) - 1));
  uint64_t m = bits & mmask;
  double sign = (bits >> (mbits + ebits)) & 1 ? -1.0 : 1.0;
  if (biased == (1 << ebits) - 1) return m ? NAN : sign * INFINITY;
  if (biased == 0) return sign * ldexp((double)m, 1 - bias - mbits);
  return sign * ldexp((double)(m | ((uint64_t)1 << mbits)), biased - bias - mbits);
}

uint64_t perfTypeBitsFromInt(gbDataType_t dt, int64_t v) {
  if (perfTypeIsFloat(dt)) return perfTypeBitsFromDouble(dt, (double)v);
  size_t size = perfTypeSize(dt);
  uint64_t u = (uint64_t)v; /* two's complement: the low bits are the wrapped value */
  return size == 8 ? u : u & (((uint64_t)1 << (8 * size)) - 1);
}

uint64_t perfTypeBitsFromDouble(gbDataType_t dt, double v) {
  switch (dt) {
    case gbFloat16: return encodeBinary(v, 10, 5);
    case gbBfloat16: return encodeBinary(v, 7, 8);
    case gbFloat8e4m3: return encodeFormat(v, 3, 4, 1);
    case gbFloat8e5m2: return encodeBinary(v, 2, 5);
    case gbFloat32: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, sizeof(u));
      return u;
    }
    case gbFloat64: {
      uint64_t u;
      memcpy(&u, &v, sizeof(u));
      return u;
    }
    default: return perfTypeBitsFromInt(dt, (int64_t)v);
  }
}

double perfTypeBitsToDouble(gbDataType_t dt, uint64_t bits) {
  switch (dt) {
    case gbInt8: return (double)(int8_t)(uint8_t)bits;
    case gbUint8: return (double)(uint8_t)bits;
    case gbInt32: return (double)(int32_t)(uint32_t)bits;
    case gbUint32: return (double)(uint32_t)bits;
    case gbInt64: return (double)(int64_t)bits;
    case gbUint64: return (double)bits;
    case gbFloat16: return decodeBinary(bits, 10, 5);
    case gbBfloat16: return decodeBinary(bits, 7, 8);
    case gbFloat8e4m3: { /* no infinity: the top exponent holds numbers up to 448, 0x7f is NaN */
      if ((bits & 0x7f) == 0x7f) return NAN;
      int e = (int)((bits >> 3) & 0xf);
      double m = (double)(bits & 7), v = e ? ldexp(m + 8, e - 10) : ldexp(m, -9);
      return bits & 0x80 ? -v : v;
    }
    case gbFloat8e5m2: return decodeBinary(bits, 2, 5);
    case gbFloat32: {
      uint32_t u = (uint32_t)bits;
      float f;
      memcpy(&f, &u, sizeof(f));
      return f;
    }
    case gbFloat64: {
      double d;
      memcpy(&d, &bits, sizeof(d));
      return d;
    }
    default: return NAN;
  }
}

uint64_t perfTypeLoad(const void* buf, size_t i, gbDataType_t dt) {
  const unsigned char* p = (const unsigned char*)buf + i * perfTypeSize(dt);
  switch (perfTypeSize(dt)) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

void perfTypeStore(void* buf, size_t i, gbDataType_t dt, uint64_t bits) {
  unsigned char* p = (unsigned char*)buf + i * perfTypeSize(dt);
  switch (perfTypeSize(dt)) {
    case 1: p[0] = (unsigned char)bits; break;
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); break; }
    default: memcpy(p, &bits, 8); break;
  }
}
