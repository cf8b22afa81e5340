/* algo/: all-gather, reduce-scatter, all-to-all and send/recv groups over real
 * TCP loopback connections, n = 1, 2, 3, 5 members as threads of this
 * process; and gbScaleBy (PreMulSum's scaling) for every data type. Expected
 * bits come from arithmetic written here: reduce-scatter folds x0 op x1 op
 * ... op x(n-1) left to right (algo.h), float16 through _Float16, bfloat16
 * through a rounding written here, wide products through _Float128 and
 * __int128. Each call's bytesSent is checked against the payload it must
 * send to the other members. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algo/algo.h"
#include "base/clock.h"
#include "base/dtype.h"
#include "base/result.h"
#include "net/net.h"
#include "os/socket.h"
#include "unit/fp8_ref.h"
#include "unit/loopback_group.h"

#define MAX_N 5
#define TIMEOUT_SEC 60.0
#define PIECE 4096 /* the group's pieceBytes, so a few KiB already pipeline */

#include "unit/member_threads.h"
#include "unit/ref_values.h"

/* ------------------------------------------------------------------ values */

static uint64_t h3(uint64_t a, uint64_t b, uint64_t c) {
  return mix(mix(mix(a + 0x9e3779b97f4a7c15ull) + b) + c);
}

/* Bytes of a message: 8 at a time from a hash of (key, word). */
static void fillPattern(unsigned char* p, size_t bytes, uint64_t key) {
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t w = h3(key, i / 8, 77);
    size_t k = bytes - i < 8 ? bytes - i : 8;
    memcpy(p + i, &w, k);
  }
}

/* Index of the first byte that differs from the pattern, or bytes. */
static size_t checkPattern(const unsigned char* p, size_t bytes, uint64_t key) {
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t w = h3(key, i / 8, 77);
    size_t k = bytes - i < 8 ? bytes - i : 8;
    for (size_t j = 0; j < k; j++) {
      if (p[i + j] != (unsigned char)(w >> (8 * j))) return i + j;
    }
  }
  return bytes;
}

static size_t esizeOf(gbDataType_t dt) {
  static const size_t sizes[gbNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[dt];
}

static const char* dtName(gbDataType_t dt) {
  static const char* names[gbNumTypes] = {"int8",    "uint8",   "int32",    "uint32",     "int64",     "uint64",
                                          "float16", "float32", "float64",  "bfloat16",   "float8e4m3", "float8e5m2"};
  return names[dt];
}

/* A real in [-2, 2] with a full mantissa, never near zero (so max and min
 * never meet signed zeros and products stay finite). */
static double realOf(uint64_t h) {
  double v = (double)(h >> 11) / 9007199254740992.0 * 4.0 - 2.0;
  if (v > -0.01 && v < 0.01) v += v < 0 ? -0.5 : 0.5;
  return v;
}

/* Element e of member m's input for seed, written to p. */
static void valueAt(void* p, gbDataType_t dt, uint64_t seed, int m, size_t e) {
  uint64_t h = h3(seed, (uint64_t)m, e);
  switch (dt) {
    case gbFloat16: { _Float16 v = (_Float16)(float)realOf(h); memcpy(p, &v, 2); break; }
    case gbFloat32: { float v = (float)realOf(h); memcpy(p, &v, 4); break; }
    case gbFloat64: { double v = realOf(h); memcpy(p, &v, 8); break; }
    case gbBfloat16: { uint16_t v = toBf16((float)realOf(h)); memcpy(p, &v, 2); break; }
    case gbFloat8e4m3:
    case gbFloat8e5m2: { uint8_t v = encode(fp8Fmt(dt), realOf(h)); memcpy(p, &v, 1); break; }
    default: memcpy(p, &h, esizeOf(dt)); break; /* integers: any bits (little endian) */
  }
}

/* ------------------------------------------------- reference arithmetic */

static float opF(float a, float b, gbRedOp_t op) {
  switch (op) {
    case gbSum: return a + b;
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

static double opD(double a, double b, gbRedOp_t op) {
  switch (op) {
    case gbSum: return a + b;
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

/* Integers: sum and prod modulo 2^bits through uint64_t, max and min in T. */
#define REF_INT(T, UT)                                                     \
  do {                                                                     \
    T a, b;                                                                \
    memcpy(&a, acc, sizeof a);                                             \
    memcpy(&b, x, sizeof b);                                               \
    UT r;                                                                  \
    if (op == gbSum) r = (UT)((uint64_t)(UT)a + (uint64_t)(UT)b);          \
    else if (op == gbProd) r = (UT)((uint64_t)(UT)a * (uint64_t)(UT)b);    \
    else { T t = op == gbMax ? (a > b ? a : b) : (a < b ? a : b); memcpy(&r, &t, sizeof r); } \
    memcpy(acc, &r, sizeof r);                                             \
  } while (0)

/* *acc = *acc op *x for one element. */
static void refOp(void* acc, const void* x, gbDataType_t dt, gbRedOp_t op) {
  switch (dt) {
    case gbInt8: REF_INT(int8_t, uint8_t); break;
    case gbUint8: REF_INT(uint8_t, uint8_t); break;
    case gbInt32: REF_INT(int32_t, uint32_t); break;
    case gbUint32: REF_INT(uint32_t, uint32_t); break;
    case gbInt64: REF_INT(int64_t, uint64_t); break;
    case gbUint64: REF_INT(uint64_t, uint64_t); break;
    case gbFloat32: { float a, b; memcpy(&a, acc, 4); memcpy(&b, x, 4); a = opF(a, b, op); memcpy(acc, &a, 4); break; }
    case gbFloat64: { double a, b; memcpy(&a, acc, 8); memcpy(&b, x, 8); a = opD(a, b, op); memcpy(acc, &a, 8); break; }
    case gbFloat16: {
      _Float16 a, b;
      memcpy(&a, acc, 2);
      memcpy(&b, x, 2);
      a = (_Float16)opF((float)a, (float)b, op);
      memcpy(acc, &a, 2);
      break;
    }
    case gbBfloat16: {
      uint16_t a, b;
      memcpy(&a, acc, 2);
      memcpy(&b, x, 2);
      a = toBf16(opF(fromBf16(a), fromBf16(b), op));
      memcpy(acc, &a, 2);
      break;
    }
    case gbFloat8e4m3:
    case gbFloat8e5m2: { /* the exact result in double, rounded once */
      const fmt_t* f = fp8Fmt(dt);
      uint8_t a, b;
      memcpy(&a, acc, 1);
      memcpy(&b, x, 1);
      a = encode(f, opD(value(f, a), value(f, b), op));
      memcpy(acc, &a, 1);
      break;
    }
    default: break;
  }
}

static void refDivide(void* acc, gbDataType_t dt, int d) {
  switch (dt) {
    case gbFloat32: { float a; memcpy(&a, acc, 4); a = a / (float)d; memcpy(acc, &a, 4); break; }
    case gbFloat64: { double a; memcpy(&a, acc, 8); a = a / (double)d; memcpy(acc, &a, 8); break; }
    case gbFloat16: { _Float16 a; memcpy(&a, acc, 2); a = (_Float16)((float)a / (float)d); memcpy(acc, &a, 2); break; }
    case gbBfloat16: { uint16_t a; memcpy(&a, acc, 2); a = toBf16(fromBf16(a) / (float)d); memcpy(acc, &a, 2); break; }
    case gbFloat8e4m3:
    case gbFloat8e5m2: { uint8_t a; memcpy(&a, acc, 1); a = encode(fp8Fmt(dt), value(fp8Fmt(dt), a) / d); memcpy(acc, &a, 1); break; }
    default: break;
  }
}

/* ---------------------------------------------------------------- gbScaleBy */

static int isNanBits(const void* p, gbDataType_t dt) {
  switch (dt) {
    case gbFloat16: { uint16_t u; memcpy(&u, p, 2); return (u & 0x7c00) == 0x7c00 && (u & 0x3ff); }
    case gbBfloat16: { uint16_t u; memcpy(&u, p, 2); return (u & 0x7f80) == 0x7f80 && (u & 0x7f); }
    case gbFloat32: { float f; memcpy(&f, p, 4); return f != f; }
    case gbFloat64: { double f; memcpy(&f, p, 8); return f != f; }
    case gbFloat8e4m3:
    case gbFloat8e5m2: return isNaNCode(fp8Fmt(dt), *(const uint8_t*)p);
    default: return 0;
  }
}

/* s * x for one element: integers from the exact product in __int128 reduced
 * modulo 2^bits; float32 and float64 from the exact product (in double and
 * _Float128) rounded once; float16 and bfloat16 multiplied in float and
 * rounded once (the products of two 11- or 8-bit significands are exact in
 * float). */
static void refScale(void* out, const void* x, const void* s, gbDataType_t dt) {
#define REF_SCALE_INT(T)                                                    \
  do {                                                                      \
    T a, b;                                                                 \
    memcpy(&a, x, sizeof a);                                                \
    memcpy(&b, s, sizeof b);                                                \
    unsigned __int128 p = (unsigned __int128)((__int128)a * (__int128)b);   \
    memcpy(out, &p, sizeof(T)); /* the low bytes (little endian) */         \
  } while (0)
  switch (dt) {
    case gbInt8: REF_SCALE_INT(int8_t); break;
    case gbUint8: REF_SCALE_INT(uint8_t); break;
    case gbInt32: REF_SCALE_INT(int32_t); break;
    case gbUint32: REF_SCALE_INT(uint32_t); break;
    case gbInt64: REF_SCALE_INT(int64_t); break;
    case gbUint64: {
      uint64_t a, b;
      memcpy(&a, x, 8);
      memcpy(&b, s, 8);
      unsigned __int128 p = (unsigned __int128)a * b;
      memcpy(out, &p, 8);
      break;
    }
    case gbFloat32: { float a, b; memcpy(&a, x, 4); memcpy(&b, s, 4); float r = (float)((double)a * (double)b); memcpy(out, &r, 4); break; }
    case gbFloat64: {
      double a, b;
      memcpy(&a, x, 8);
      memcpy(&b, s, 8);
      double r = (double)((_Float128)a * (_Float128)b);
      memcpy(out, &r, 8);
      break;
    }
    case gbFloat16: {
      _Float16 a, b;
      memcpy(&a, x, 2);
      memcpy(&b, s, 2);
      _Float16 r = (_Float16)((float)a * (float)b);
      memcpy(out, &r, 2);
      break;
    }
    case gbBfloat16: {
      uint16_t a, b;
      memcpy(&a, x, 2);
      memcpy(&b, s, 2);
      uint16_t r = toBf16(fromBf16(a) * fromBf16(b));
      memcpy(out, &r, 2);
      break;
    }
    case gbFloat8e4m3:
    case gbFloat8e5m2: { /* the product of two 4-bit significands is exact in double: rounded once */
      const fmt_t* f = fp8Fmt(dt);
      uint8_t r = encode(f, value(f, *(const uint8_t*)x) * value(f, *(const uint8_t*)s));
      memcpy(out, &r, 1);
      break;
    }
    default: break;
  }
#undef REF_SCALE_INT
}

/* Random bit patterns (so NaN, infinities, subnormals and overflow occur),
 * with chosen scalars 0, 1, -1 and 0.5 (3 for integers) and random ones. */
static int testScaleBy(void) {
  enum { C = 4099, NS = 6 };
  unsigned char buf[C * 8], in[C * 8], want[8];
  long checks = 0;
  for (int d = 0; d < gbNumTypes; d++) {
    gbDataType_t dt = (gbDataType_t)d;
    size_t es = esizeOf(dt);
    for (int si = 0; si < NS; si++) {
      unsigned char s[8] = {0};
      static const double chosen[] = {0.0, 1.0, -1.0, 0.5};
      static const int64_t chosenI[] = {0, 1, -1, 3};
      if (si >= 4) {
        uint64_t hs = h3(0x5ca1e, (uint64_t)d, (uint64_t)si);
        memcpy(s, &hs, es);
      } else if (!gbDtypeIsFloat(dt)) {
        memcpy(s, &chosenI[si], es);
      } else {
        float f = (float)chosen[si];
        _Float16 h = (_Float16)f;
        uint16_t b = toBf16(f);
        if (dt == gbFloat16) memcpy(s, &h, 2);
        if (dt == gbBfloat16) memcpy(s, &b, 2);
        if (dt == gbFloat32) memcpy(s, &f, 4);
        if (dt == gbFloat64) memcpy(s, &chosen[si], 8);
        if (dt == gbFloat8e4m3 || dt == gbFloat8e5m2) s[0] = encode(fp8Fmt(dt), chosen[si]);
      }
      for (size_t i = 0; i < C; i++) {
        uint64_t h = h3(0xb175, (uint64_t)d * 16 + (uint64_t)si, i);
        memcpy(in + i * es, &h, es);
      }
      memcpy(buf, in, C * es);
      gbScaleBy(buf, C, dt, s);
      for (size_t i = 0; i < C; i++) {
        refScale(want, in + i * es, s, dt);
        int ok = isNanBits(want, dt) ? isNanBits(buf + i * es, dt)
                                     : memcmp(want, buf + i * es, es) == 0;
        if (!ok) {
          uint64_t g = 0, w = 0, x = 0, sv = 0;
          memcpy(&g, buf + i * es, es);
          memcpy(&w, want, es);
          memcpy(&x, in + i * es, es);
          memcpy(&sv, s, es);
          fprintf(stderr, "test_algo_coll: FAIL gbScaleBy %s: 0x%llx * 0x%llx gave 0x%llx, want 0x%llx\n",
                  dtName(dt), (unsigned long long)sv, (unsigned long long)x, (unsigned long long)g,
                  (unsigned long long)w);
          return 0;
        }
        checks++;
      }
    }
  }
  /* count 0 touches nothing. */
  gbScaleBy(NULL, 0, gbFloat32, &(float){2.0f});
  printf("test_algo_coll: gbScaleBy ok, %ld checks\n", checks);
  return 1;
}

/* -------------------------------------------------------- collective checks */

static int callOk(member_t* m, gbResult_t r, const char* what) {
  if (r == gbSuccess) return 1;
  fail(m->sh, "%s: member %d got result %d (%s)", what, m->me, r, gbErrorLast());
  return 0;
}

/* bytesSent grew by exactly want during the call. */
static int sentOk(member_t* m, const gbAlgoGroup_t* g, uint64_t before, uint64_t want, const char* what) {
  m->checks++;
  if (g->bytesSent - before == want) return 1;
  fail(m->sh, "%s: member %d's bytesSent grew by %llu, the call's payload to others is %llu", what,
       m->me, (unsigned long long)(g->bytesSent - before), (unsigned long long)want);
  return 0;
}

static int bytesOk(member_t* m, const unsigned char* got, size_t bytes, uint64_t key, const char* what,
                   const char* part) {
  size_t at = checkPattern(got, bytes, key);
  m->checks++;
  if (at == bytes) return 1;
  fail(m->sh, "%s: member %d: %s differs at byte %zu of %zu", what, m->me, part, at, bytes);
  return 0;
}

static uint64_t blockKey(uint64_t seed, int from, int to) { return h3(seed, (uint64_t)from, (uint64_t)to); }

static const size_t kBytes[] = {0, 1, 7, 3 * PIECE + 5};

static int runAllGather(member_t* m, gbAlgoGroup_t* g, unsigned char* a, unsigned char* b) {
  int n = g->n, me = g->me;
  char what[128];
  for (size_t si = 0; si < sizeof kBytes / sizeof kBytes[0]; si++) {
    for (int inPlace = 0; inPlace <= 1; inPlace++) {
      size_t bytes = kBytes[si];
      uint64_t seed = 100 + si * 2 + (uint64_t)inPlace;
      snprintf(what, sizeof what, "all-gather n=%d %zu bytes%s", n, bytes, inPlace ? " in place" : "");
      memset(b, 0xee, (size_t)n * bytes);
      unsigned char* send = inPlace ? b + (size_t)me * bytes : a;
      fillPattern(send, bytes, blockKey(seed, me, 0));
      uint64_t before = g->bytesSent;
      if (!callOk(m, gbAlgoAllGather(g, send, b, bytes), what)) return 0;
      for (int i = 0; i < n; i++) {
        if (!bytesOk(m, b + (size_t)i * bytes, bytes, blockKey(seed, i, 0), what, "a block")) return 0;
      }
      if (!inPlace && !bytesOk(m, a, bytes, blockKey(seed, me, 0), what, "the send buffer")) return 0;
      if (!sentOk(m, g, before, (uint64_t)(n - 1) * bytes, what) || !barrier(m->sh)) return 0;
    }
  }
  return 1;
}

static int runAllToAll(member_t* m, gbAlgoGroup_t* g, unsigned char* a, unsigned char* b) {
  int n = g->n, me = g->me;
  char what[128];
  for (size_t si = 0; si < sizeof kBytes / sizeof kBytes[0]; si++) {
    size_t bytes = kBytes[si];
    uint64_t seed = 200 + si;
    snprintf(what, sizeof what, "all-to-all n=%d %zu bytes per pair", n, bytes);
    for (int j = 0; j < n; j++) fillPattern(a + (size_t)j * bytes, bytes, blockKey(seed, me, j));
    memset(b, 0xee, (size_t)n * bytes);
    uint64_t before = g->bytesSent;
    if (!callOk(m, gbAlgoAllToAll(g, a, b, bytes), what)) return 0;
    for (int i = 0; i < n; i++) {
      if (!bytesOk(m, b + (size_t)i * bytes, bytes, blockKey(seed, i, me), what, "a block")) return 0;
      if (!bytesOk(m, a + (size_t)i * bytes, bytes, blockKey(seed, me, i), what, "the send buffer")) return 0;
    }
    if (!sentOk(m, g, before, (uint64_t)(n - 1) * bytes, what) || !barrier(m->sh)) return 0;
  }
  return 1;
}

/* One reduce-scatter of count elements per member, checked against the
 * left-to-right fold of block me. a, b and want hold n * count elements. */
static int oneReduceScatter(member_t* m, gbAlgoGroup_t* g, gbDataType_t dt, gbRedOp_t op, int divisor,
                            size_t count, int inPlace, uint64_t seed, unsigned char* a,
                            unsigned char* b, unsigned char* want) {
  int n = g->n, me = g->me;
  size_t es = esizeOf(dt), bytes = count * es;
  static const char* ops[] = {"sum", "prod", "max", "min"};
  char what[160];
  snprintf(what, sizeof what, "reduce-scatter n=%d %s %s%s count=%zu pieces of %zu B%s", n, dtName(dt),
           ops[op], divisor ? " with divisor" : "", count, g->pieceBytes, inPlace ? " in place" : "");
  for (size_t e = 0; e < (size_t)n * count; e++) valueAt(a + e * es, dt, seed, me, e);
  for (size_t e = 0; e < count; e++) {
    size_t at = (size_t)me * count + e;
    unsigned char x[8];
    valueAt(want + e * es, dt, seed, 0, at);
    for (int i = 1; i < n; i++) {
      valueAt(x, dt, seed, i, at);
      refOp(want + e * es, x, dt, op);
    }
    if (divisor) refDivide(want + e * es, dt, divisor);
  }
  unsigned char* recv = inPlace ? a + (size_t)me * bytes : b;
  if (!inPlace) memset(b, 0xa5, bytes);
  uint64_t before = g->bytesSent;
  if (!callOk(m, gbAlgoReduceScatter(g, a, recv, count, dt, op, divisor), what)) return 0;
  m->checks++;
  for (size_t e = 0; e < count; e++) {
    if (memcmp(recv + e * es, want + e * es, es) != 0) {
      uint64_t gv = 0, wv = 0;
      memcpy(&gv, recv + e * es, es);
      memcpy(&wv, want + e * es, es);
      fail(m->sh, "%s: member %d element %zu is 0x%llx, x0 op ... op x%d gives 0x%llx", what, me, e,
           (unsigned long long)gv, n - 1, (unsigned long long)wv);
      return 0;
    }
  }
  if (!inPlace) { /* the input is left alone */
    unsigned char x[8];
    for (size_t e = 0; e < (size_t)n * count; e++) {
      valueAt(x, dt, seed, me, e);
      if (memcmp(x, a + e * es, es) != 0) {
        fail(m->sh, "%s: member %d's send element %zu changed", what, me, e);
        return 0;
      }
    }
  }
  return sentOk(m, g, before, (uint64_t)(n - 1) * bytes, what) && barrier(m->sh);
}

static int runReduceScatter(member_t* m, gbAlgoGroup_t* g, unsigned char* a, unsigned char* b,
                            unsigned char* want) {
  uint64_t seed = 300;
  for (int d = 0; d < gbNumTypes; d++) {
    gbDataType_t dt = (gbDataType_t)d;
    size_t counts[] = {0, 1, 7, 2 * (PIECE / esizeOf(dt)) + 3};
    for (size_t ci = 0; ci < 4; ci++) {
      /* sum, prod, max, min, and sum with a divisor (floats: avg) */
      for (int oc = 0; oc < 5; oc++) {
        if (oc == 4 && !gbDtypeIsFloat(dt)) continue;
        for (int inPlace = 0; inPlace <= 1; inPlace++) {
          gbRedOp_t op = oc == 4 ? gbSum : (gbRedOp_t)oc;
          int divisor = oc == 4 ? g->n : 0;
          if (!oneReduceScatter(m, g, dt, op, divisor, counts[ci], inPlace, seed++, a, b, want)) return 0;
        }
      }
    }
  }
  /* The default piece size, with more than one piece per block. */
  size_t saved = g->pieceBytes;
  g->pieceBytes = 0;
  int ok = oneReduceScatter(m, g, gbFloat32, gbSum, 0, (2u << 20) / 4 + 3, 0, seed++, a, b, want) &&
           oneReduceScatter(m, g, gbBfloat16, gbSum, g->n, (2u << 20) / 2 + 1, 1, seed++, a, b, want);
  g->pieceBytes = saved;
  return ok;
}

/* ----------------------------------------------------------- send/recv */

typedef struct {
  int peer, isSend;
  size_t bytes;
} opspec_t;

#define MAX_OPS 24

/* Runs one send/recv list. The k-th send from member i to member j carries
 * pattern (seed, i, j, k); my k-th receive from j must hold (seed, j, me, k).
 * Zero-byte entries pass a NULL buffer and are not counted: they match
 * nothing. */
static int runP2p(member_t* m, gbAlgoGroup_t* g, const opspec_t* spec, int nops, uint64_t seed,
                  const char* what) {
  int me = g->me;
  gbAlgoP2p_t ops[MAX_OPS] = {{0}};
  uint64_t keys[MAX_OPS] = {0}, payload = 0;
  int ok = 1;
  for (int i = 0; i < nops; i++) {
    int k = 0;
    for (int j = 0; j < i; j++)
      k += spec[j].peer == spec[i].peer && spec[j].isSend == spec[i].isSend && spec[j].bytes > 0;
    int from = spec[i].isSend ? me : spec[i].peer, to = spec[i].isSend ? spec[i].peer : me;
    keys[i] = h3(seed, (uint64_t)from * 64 + (uint64_t)to, (uint64_t)k);
    ops[i] = (gbAlgoP2p_t){spec[i].peer, spec[i].isSend, NULL, spec[i].bytes};
    if (spec[i].bytes == 0) continue;
    ops[i].buf = malloc(spec[i].bytes);
    if (ops[i].buf == NULL) { fail(m->sh, "%s: out of memory", what); ok = 0; continue; }
    if (spec[i].isSend) fillPattern(ops[i].buf, spec[i].bytes, keys[i]);
    else memset(ops[i].buf, 0xee, spec[i].bytes);
    if (spec[i].isSend && spec[i].peer != me) payload += spec[i].bytes;
  }
  uint64_t before = g->bytesSent;
  if (ok) ok = callOk(m, gbAlgoSendRecv(g, ops, nops), what);
  for (int i = 0; ok && i < nops; i++) {
    char part[64];
    snprintf(part, sizeof part, "operation %d (%s peer %d)", i, spec[i].isSend ? "send to" : "receive from",
             spec[i].peer);
    ok = bytesOk(m, ops[i].buf, spec[i].bytes, keys[i], what, part);
  }
  if (ok) ok = sentOk(m, g, before, payload, what);
  for (int i = 0; i < nops; i++) free(ops[i].buf);
  return ok && barrier(m->sh);
}

/* Bytes member i sends member j in the everyone-to-everyone case: unequal,
 * some zero, some larger than socket buffers. */
static size_t pairBytes(int i, int j) { return (size_t)((i * 3 + j * 5 + 1) % 4) * 300007u; }

static int runSendRecv(member_t* m, gbAlgoGroup_t* g) {
  int n = g->n, me = g->me;
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  char what[128];
  const size_t big = 3 * PIECE + 1;

  /* Several sends and receives with the same peer: list order is matching
   * order (two equal sizes in a row show a swap too). */
  snprintf(what, sizeof what, "send/recv n=%d: many messages to the next member", n);
  opspec_t same[] = {{prev, 0, 5},  {next, 1, 5},  {next, 1, 0},   {prev, 0, 0},   {prev, 0, big},
                     {next, 1, big}, {next, 1, 64}, {next, 1, 64},  {prev, 0, 64},  {prev, 0, 64},
                     {next, 1, 1},  {prev, 0, 1}};
  if (!runP2p(m, g, same, (int)(sizeof same / sizeof same[0]), 400, what)) return 0;

  /* Copies to myself pair in list order, receive listed first or not;
   * zero-byte entries need no partner. */
  snprintf(what, sizeof what, "send/recv n=%d: to myself among messages to others", n);
  opspec_t self[] = {{me, 0, 100}, {me, 1, 100}, {me, 1, 0}, {next, 1, 33}, {me, 1, 7},
                     {prev, 0, 33}, {me, 0, 7},  {me, 1, 0}, {me, 0, 0},   {me, 0, 0}};
  if (!runP2p(m, g, self, (int)(sizeof self / sizeof self[0]), 401, what)) return 0;

  /* A ring shift of a large message: with n == 2 both members send each
   * other 16 MiB at once, more than the sockets buffer. */
  snprintf(what, sizeof what, "send/recv n=%d: ring shift of 16 MiB", n);
  opspec_t ring[] = {{next, 1, (16u << 20) + 3}, {prev, 0, (16u << 20) + 3}};
  if (!runP2p(m, g, ring, 2, 402, what)) return 0;

  /* Everyone to everyone (myself included) at once, unequal sizes; sends
   * listed in one order, receives in the other. */
  snprintf(what, sizeof what, "send/recv n=%d: everyone to everyone", n);
  opspec_t all[2 * MAX_N];
  int nall = 0;
  for (int j = 0; j < n; j++) {
    all[nall++] = (opspec_t){j, 1, pairBytes(me, j)};
    all[nall++] = (opspec_t){n - 1 - j, 0, pairBytes(n - 1 - j, me)};
  }
  if (!runP2p(m, g, all, nall, 403, what)) return 0;

  /* An empty list. */
  uint64_t before = g->bytesSent;
  return callOk(m, gbAlgoSendRecv(g, NULL, 0), "send/recv of no operations") &&
         sentOk(m, g, before, 0, "send/recv of no operations");
}

/* Calls that must fail before any communication (the group stays usable). */
static int runArgChecks(member_t* m, gbAlgoGroup_t* g) {
  int n = g->n, me = g->me;
  unsigned char x[64] = {0}, y[64 * MAX_N];
  gbAlgoP2p_t badPeer[] = {{n, 1, x, 4}};
  gbAlgoP2p_t negPeer[] = {{-1, 0, x, 4}};
  gbAlgoP2p_t nullBuf[] = {{me, 1, NULL, 4}, {me, 0, y, 4}};
  gbAlgoP2p_t lonely[] = {{me, 1, x, 4}};
  gbAlgoP2p_t unequal[] = {{me, 1, x, 4}, {me, 0, y, 8}};
  uint64_t before = g->bytesSent;
  struct {
    gbResult_t got;
    const char* what;
  } c[] = {
      {gbAlgoSendRecv(g, badPeer, 1), "send/recv peer == n"},
      {gbAlgoSendRecv(g, negPeer, 1), "send/recv peer -1"},
      {gbAlgoSendRecv(g, nullBuf, 2), "send/recv NULL buffer for 4 bytes"},
      {gbAlgoSendRecv(g, lonely, 1), "send/recv to myself without a receive"},
      {gbAlgoSendRecv(g, unequal, 2), "send/recv to myself of 4 bytes into 8"},
      {gbAlgoSendRecv(g, badPeer, -1), "send/recv of -1 operations"},
      {gbAlgoAllToAll(g, y, y, 8), "all-to-all in place"},
      {gbAlgoAllToAll(g, y, y + 4, 8), "all-to-all with overlapping buffers"},
      {gbAlgoAllGather(g, NULL, y, 8), "all-gather NULL send"},
      {gbAlgoAllToAll(g, x, NULL, 8), "all-to-all NULL recv"},
      /* n blocks of over SIZE_MAX / n bytes each (from 2 members on: one block always fits) */
      {n > 1 ? gbAlgoAllGather(g, x, y, SIZE_MAX / (size_t)n + 1) : gbInvalidArgument,
       "all-gather of blocks that overflow size_t together"},
      {n > 1 ? gbAlgoAllToAll(g, x, y, SIZE_MAX / (size_t)n + 1) : gbInvalidArgument,
       "all-to-all of blocks that overflow size_t together"},
      {gbAlgoReduceScatter(g, y, x, 1, (gbDataType_t)42, gbSum, 0), "reduce-scatter unknown type"},
      {gbAlgoReduceScatter(g, y, x, 1, gbFloat32, gbAvg, 0), "reduce-scatter avg as an op"},
      {gbAlgoReduceScatter(g, y, NULL, 1, gbFloat32, gbSum, 0), "reduce-scatter NULL recv"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    m->checks++;
    if (c[i].got != gbInvalidArgument) {
      fail(m->sh, "%s: member %d got result %d, want gbInvalidArgument (%d)", c[i].what, me, c[i].got,
           gbInvalidArgument);
      return 0;
    }
  }
  return sentOk(m, g, before, 0, "calls that fail their checks");
}

/* ------------------------------------------------------------- a member */

static void* memberMain(void* arg) {
  member_t* m = arg;
  shared_t* sh = m->sh;
  int n = sh->n, me = m->me;
  static const uint8_t secret[GB_NET_SECRET_BYTES] = {7, 1, 2, 4};
  const uint64_t commHash = 0xc011000u + (uint64_t)n;
  const gbNetOps_t* net = &gbNetTcpOps;
  gbNetListener_t* lis = NULL;
  gbNetConn_t* conns[MAX_N] = {0};
  int ranks[MAX_N];
  gbAlgoGroup_t g;
  memset(&g, 0, sizeof g);
  /* The largest case: a reduce-scatter of n blocks of 2 MiB and a bit. */
  size_t cap = (size_t)MAX_N * ((2u << 20) + 64);
  unsigned char* a = malloc(cap);
  unsigned char* b = malloc(cap);
  unsigned char* want = malloc(cap);
  if (a == NULL || b == NULL || want == NULL) {
    fail(sh, "member %d: out of memory", me);
    goto done;
  }

  const loopbackSpec_t spec = {net, secret, commHash, 4, "coll test", n, me, TIMEOUT_SEC, &sh->abortFlag};
  char why[128];
  if (!loopbackListen(&spec, &lis, &sh->addrs[me])) {
    fail(sh, "member %d: cannot listen on loopback", me);
    goto done;
  }
  if (!barrier(sh)) goto done;
  if (!loopbackJoin(&spec, lis, sh->addrs, conns, ranks, &g, why, sizeof why)) {
    fail(sh, "%s", why);
    goto done;
  }
  g.pieceBytes = PIECE;
  g.ringMinBytes = 1; /* reduce-scatter must not follow the all-reduce's choice */

  if (!runArgChecks(m, &g) || !barrier(sh)) goto done;
  if (!runAllGather(m, &g, a, b)) goto done;
  if (!runAllToAll(m, &g, a, b)) goto done;
  if (!runReduceScatter(m, &g, a, b, want)) goto done;
  if (!runSendRecv(m, &g)) goto done;

  /* Calls the others never join end at their deadline, not hang. */
  if (n > 1 && barrier(sh) && me == 0) {
    g.timeoutSec = 0.3;
    unsigned char x[16] = {0};
    gbAlgoP2p_t lone[] = {{1, 0, x, sizeof x}};
    struct {
      const char* what;
      gbResult_t got;
      double waited;
    } c[2];
    int64_t t0 = gbClockNowNs();
    c[0].what = "lone all-gather";
    c[0].got = gbAlgoAllGather(&g, x, b, sizeof x);
    c[0].waited = (double)(gbClockNowNs() - t0) / 1e9;
    t0 = gbClockNowNs();
    c[1].what = "lone receive";
    c[1].got = gbAlgoSendRecv(&g, lone, 1);
    c[1].waited = (double)(gbClockNowNs() - t0) / 1e9;
    for (int i = 0; i < 2; i++) {
      m->checks++;
      if (c[i].got != gbTimeout || c[i].waited > 5.0) {
        fail(sh, "%s: result %d after %.2f s, want gbTimeout (%d) near 0.3 s", c[i].what, c[i].got,
             c[i].waited, gbTimeout);
      }
    }
  }
  /* The others keep their connections open until member 0 is done. */
  if (n > 1) barrier(sh);

done:
  gbAlgoGroupFree(&g);
  for (int i = 0; i < n; i++) if (conns[i] != NULL) net->close(conns[i]);
  if (lis != NULL) net->listenerClose(lis);
  free(a);
  free(b);
  free(want);
  return NULL;
}


int main(int argc, char** argv) {
  static const int sizes[] = {1, 2, 3, 5};
  printf("test_algo_coll: WARN lines about invalid arguments and two timeouts are expected\n");
  fflush(stdout);
  if (!testScaleBy()) return 1;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (argc > 1 && atoi(argv[1]) != sizes[i]) continue; /* one group size, for debugging */
    if (!runGroup("test_algo_coll", sizes[i], memberMain)) return 1;
  }
  printf("test_algo_coll: PASS\n");
  return 0;
}
