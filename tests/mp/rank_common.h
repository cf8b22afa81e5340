/* Shared pieces of the rank programs of the correctness matrices
 * (rank_collectives.c, rank_matrix.c): failing with a message, data types and
 * reference kernels, the counter-based input generator, the island layout and
 * the expected bits of an all-reduce under every policy, written from
 * docs/REDUCTION_ORDER.md (never from the library), and a bit-for-bit compare
 * that names the first bad index.
 *
 * Header only, included by one program each: functions are static inline and
 * globals are marked unused, so a program that needs only part of it still
 * compiles warning-free. */
#ifndef GB_TESTS_MP_RANK_COMMON_H
#define GB_TESTS_MP_RANK_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpubridge/gpubridge.h"
#include "rank_die.h"

#define MAX_RANKS 64
#define BLOCK 8192 /* elements per reference block */
#define RC_UNUSED __attribute__((unused))

/* ------------------------------------------------------------ small helpers */

static inline void waitFile(const char* path, double seconds) {
  double end = nowS() + seconds;
  while (access(path, F_OK) != 0) {
    if (nowS() > end) DIE("file %s did not appear within %.0f s", path, seconds);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL); /* polling interval of a deadline-bounded wait */
  }
}

static inline int envRank(void) {
  const char* names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (int i = 0; i < 3; i++)
    if (getenv(names[i])) return atoi(getenv(names[i]));
  return -1;
}

/* Bytes with an optional K/M/G suffix (1024-based), as GPUBRIDGE_* sizes. */
static inline long long envSize(const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) DIE("%s must be set by the driver (the expected order depends on it)", name);
  char* end;
  long long x = strtoll(v, &end, 10);
  if (*end == 'K' || *end == 'k') x <<= 10, end++;
  else if (*end == 'M' || *end == 'm') x <<= 20, end++;
  else if (*end == 'G' || *end == 'g') x <<= 30, end++;
  if (*end || x < 0) DIE("%s=%s is not a size", name, v);
  return x;
}

static inline int nameIndex(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (names[i] && strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* ------------------------------------------------------------ data types */

static const char* dtNames[gbNumTypes] RC_UNUSED = {"int8",    "uint8",   "int32",    "uint32",    "int64",
                                                    "uint64",  "float16", "float32",  "float64",   "bfloat16",
                                                    "float8e4m3", "float8e5m2"};
static const size_t dtSizes[gbNumTypes] RC_UNUSED = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char* opNames[gbNumOps] RC_UNUSED = {"sum", "prod", "max", "min", "avg"};
static const char* policyNames[gbNumPolicies] RC_UNUSED = {"auto", "hierarchical", "native",
                                                           "flat", "split-rail",   "tuned"};

static inline int isFp8(int dt) { return dt == gbFloat8e4m3 || dt == gbFloat8e5m2; }
static inline int isFloat(int dt) {
  return dt == gbFloat16 || dt == gbFloat32 || dt == gbFloat64 || dt == gbBfloat16 || isFp8(dt);
}

/* fp8 (docs/REDUCTION_ORDER.md), written apart from base/fp8.h: a code's
 * value by formula; a value's code by a binary search of the ordered finite
 * codes, the nearer neighbour (ties to the even code); past the largest
 * finite value e4m3 saturates to 448 (0x7e), e5m2 becomes inf (0x7c);
 * NaN is sign | 0x7f. */
static inline double fp8Value(int dt, uint8_t c) {
  int mb = dt == gbFloat8e4m3 ? 3 : 2, bias = dt == gbFloat8e4m3 ? 7 : 15;
  int e = (c & 0x7f) >> mb, m = c & ((1 << mb) - 1);
  double v;
  if (dt == gbFloat8e4m3 ? (c & 0x7f) == 0x7f : (c & 0x7f) > 0x7c) return NAN;
  if (dt == gbFloat8e5m2 && (c & 0x7f) == 0x7c) v = INFINITY;
  else v = e == 0 ? ldexp(m, 1 - bias - mb) : ldexp((1 << mb) + m, e - bias - mb);
  return (c & 0x80) ? -v : v;
}
static inline uint8_t fp8Code(int dt, double x) {
  uint8_t sign = signbit(x) ? 0x80 : 0, maxc = dt == gbFloat8e4m3 ? 0x7e : 0x7b, over = dt == gbFloat8e4m3 ? 0x7e : 0x7c;
  double past = dt == gbFloat8e4m3 ? 480.0 : 65536.0, a = fabs(x);
  if (isnan(x)) return sign | 0x7f;
  if (a >= past) return sign | over;
  int lo = 0, hi = maxc; /* the largest code whose value <= a */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (fp8Value(dt, (uint8_t)mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  double vlo = fp8Value(dt, (uint8_t)lo), vhi = lo == maxc ? past : fp8Value(dt, (uint8_t)(lo + 1));
  int up = a - vlo > vhi - a || (a - vlo == vhi - a && (lo & 1));
  return sign | (up ? (lo == maxc ? over : (uint8_t)(lo + 1)) : (uint8_t)lo);
}

static inline float h2f(uint16_t h) {
  _Float16 x;
  memcpy(&x, &h, 2);
  return (float)x;
}
static inline uint16_t f2h(float f) {
  _Float16 x = (_Float16)f; /* round to nearest even */
  uint16_t h;
  memcpy(&h, &x, 2);
  return h;
}
static inline float b2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f2b(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float fop(float a, float b, int op) {
  switch (op) {
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    case gbMin: return a < b ? a : b;
    default: return a + b;
  }
}
static inline double dop(double a, double b, int op) {
  switch (op) {
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    case gbMin: return a < b ? a : b;
    default: return a + b;
  }
}

/* Integers: sum and prod in the unsigned type of the same width (wraps). */
#define INT_FOLD(T, UT)                                                        \
  do {                                                                         \
    T* a = acc;                                                                \
    const T* b = in;                                                           \
    for (size_t i = 0; i < n; i++) {                                           \
      switch (op) {                                                            \
        case gbProd: a[i] = (T)(UT)((UT)a[i] * (UT)b[i]); break;               \
        case gbMax: a[i] = a[i] > b[i] ? a[i] : b[i]; break;                   \
        case gbMin: a[i] = a[i] < b[i] ? a[i] : b[i]; break;                   \
        default: a[i] = (T)(UT)((UT)a[i] + (UT)b[i]); break;                   \
      }                                                                        \
    }                                                                          \
  } while (0)

/* acc = acc op in, elementwise (avg and PreMulSum fold as sum). */
static inline void refFold(void* acc, const void* in, size_t n, int dt, int op) {
  switch (dt) {
    case gbInt8: INT_FOLD(int8_t, uint8_t); break;
    case gbUint8: INT_FOLD(uint8_t, uint32_t); break;
    case gbInt32: INT_FOLD(int32_t, uint32_t); break;
    case gbUint32: INT_FOLD(uint32_t, uint32_t); break;
    case gbInt64: INT_FOLD(int64_t, uint64_t); break;
    case gbUint64: INT_FOLD(uint64_t, uint64_t); break;
    case gbFloat32: {
      float* a = acc;
      const float* b = in;
      for (size_t i = 0; i < n; i++) a[i] = fop(a[i], b[i], op);
      break;
    }
    case gbFloat64: {
      double* a = acc;
      const double* b = in;
      for (size_t i = 0; i < n; i++) a[i] = dop(a[i], b[i], op);
      break;
    }
    case gbFloat16: {
      uint16_t* a = acc;
      const uint16_t* b = in;
      for (size_t i = 0; i < n; i++) a[i] = f2h(fop(h2f(a[i]), h2f(b[i]), op));
      break;
    }
    case gbBfloat16: {
      uint16_t* a = acc;
      const uint16_t* b = in;
      for (size_t i = 0; i < n; i++) a[i] = f2b(fop(b2f(a[i]), b2f(b[i]), op));
      break;
    }
    case gbFloat8e4m3:
    case gbFloat8e5m2: {
      uint8_t* a = acc;
      const uint8_t* b = in;
      for (size_t i = 0; i < n; i++) a[i] = fp8Code(dt, dop(fp8Value(dt, a[i]), fp8Value(dt, b[i]), op));
      break;
    }
  }
}

static inline void refDivide(void* buf, size_t n, int dt, int divisor) {
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
      case gbFloat32: ((float*)buf)[i] = ((float*)buf)[i] / (float)divisor; break;
      case gbFloat64: ((double*)buf)[i] = ((double*)buf)[i] / (double)divisor; break;
      case gbFloat16: ((uint16_t*)buf)[i] = f2h(h2f(((uint16_t*)buf)[i]) / (float)divisor); break;
      case gbBfloat16: ((uint16_t*)buf)[i] = f2b(b2f(((uint16_t*)buf)[i]) / (float)divisor); break;
      case gbFloat8e4m3:
      case gbFloat8e5m2: ((uint8_t*)buf)[i] = fp8Code(dt, fp8Value(dt, ((uint8_t*)buf)[i]) / divisor); break;
    }
  }
}

/* Integer elements in the unsigned type of the same width: scale wraps. */
#define INT_SCALE(UT)                                                          \
  do {                                                                         \
    UT s, *a = buf;                                                            \
    memcpy(&s, scalar, sizeof(UT));                                            \
    for (size_t i = 0; i < n; i++) a[i] = (UT)(s * a[i]);                      \
  } while (0)

/* buf[i] = scalar * buf[i] (PreMulSum's contribution): scalar is one element
 * of dt; the product is rounded once to the type (f16 and bf16 multiply in
 * float, which is exact for two 11- or 8-bit significands). */
static inline void refScale(void* buf, size_t n, int dt, const void* scalar) {
  switch (dt) {
    case gbInt8:
    case gbUint8: INT_SCALE(uint8_t); break;
    case gbInt32:
    case gbUint32: INT_SCALE(uint32_t); break;
    case gbInt64:
    case gbUint64: INT_SCALE(uint64_t); break;
    case gbFloat32: {
      float s, *a = buf;
      memcpy(&s, scalar, 4);
      for (size_t i = 0; i < n; i++) a[i] = s * a[i];
      break;
    }
    case gbFloat64: {
      double s, *a = buf;
      memcpy(&s, scalar, 8);
      for (size_t i = 0; i < n; i++) a[i] = s * a[i];
      break;
    }
    case gbFloat16:
    case gbBfloat16: {
      uint16_t s16, *a = buf;
      memcpy(&s16, scalar, 2);
      float s = dt == gbFloat16 ? h2f(s16) : b2f(s16);
      for (size_t i = 0; i < n; i++)
        a[i] = dt == gbFloat16 ? f2h(s * h2f(a[i])) : f2b(s * b2f(a[i]));
      break;
    }
    case gbFloat8e4m3:
    case gbFloat8e5m2: {
      uint8_t* a = buf;
      double s = fp8Value(dt, *(const uint8_t*)scalar);
      for (size_t i = 0; i < n; i++) a[i] = fp8Code(dt, s * fp8Value(dt, a[i]));
      break;
    }
  }
}

/* One element of dt holding x (an integer for integer types). out may be
   unaligned (a byte array), so the value goes through memcpy. */
static inline void encodeScalar(double x, int dt, void* out) {
  union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f; double d; } v;
  size_t size;
  switch (dt) {
    case gbInt8:
    case gbUint8: v.u8 = (uint8_t)(int64_t)x; size = 1; break;
    case gbInt32:
    case gbUint32: v.u32 = (uint32_t)(int64_t)x; size = 4; break;
    case gbInt64:
    case gbUint64: v.u64 = (uint64_t)(int64_t)x; size = 8; break;
    case gbFloat16: v.u16 = f2h((float)x); size = 2; break;
    case gbBfloat16: v.u16 = f2b((float)x); size = 2; break;
    case gbFloat8e4m3:
    case gbFloat8e5m2: v.u8 = fp8Code(dt, x); size = 1; break;
    case gbFloat32: v.f = (float)x; size = 4; break;
    case gbFloat64: v.d = x; size = 8; break;
    default: return;
  }
  memcpy(out, &v, size);
}

/* ------------------------------------------------------------ inputs */

static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t gSeed RC_UNUSED = 1;

/* The key of one rank's input in one case: elements are mix64(key + i). */
static inline uint64_t inputKey(int rank, int caseIdx) {
  return mix64(gSeed ^ mix64(((uint64_t)(uint32_t)rank << 32) ^ (uint64_t)(uint32_t)caseIdx));
}

/* Floats in +-[0.5, 2): products of 8 stay finite even in float16. */
static inline float unitFloat(uint64_t x) {
  float f = 0.5f + 1.5f * (float)(x >> 40) * (1.0f / 16777216.0f);
  return (x & 1) ? -f : f;
}

/* Elements [pos, pos+len) of a rank's input. */
static inline void genInput(uint64_t key, size_t pos, size_t len, int dt, void* out) {
  for (size_t i = 0; i < len; i++) {
    uint64_t x = mix64(key + pos + i);
    switch (dt) {
      case gbInt8:
      case gbUint8: ((uint8_t*)out)[i] = (uint8_t)(x >> 24); break;
      case gbInt32:
      case gbUint32: ((uint32_t*)out)[i] = (uint32_t)(x >> 16); break;
      case gbInt64:
      case gbUint64: ((uint64_t*)out)[i] = x; break;
      case gbFloat16: ((uint16_t*)out)[i] = f2h(unitFloat(x)); break;
      case gbBfloat16: ((uint16_t*)out)[i] = f2b(unitFloat(x)); break;
      case gbFloat8e4m3:
      case gbFloat8e5m2: ((uint8_t*)out)[i] = fp8Code(dt, unitFloat(x)); break;
      case gbFloat32: ((float*)out)[i] = unitFloat(x); break;
      case gbFloat64: {
        double d = 0.5 + 1.5 * (double)(x >> 11) * (1.0 / 9007199254740992.0);
        ((double*)out)[i] = (x & 1) ? -d : d;
        break;
      }
    }
  }
}

/* ------------------------------------------------------------ expected bits */

/* A group of n members doing one host all-reduce; get() writes member k's
 * contribution for buffer elements [pos, pos+len). */
typedef struct group group_t;
struct group {
  int n;
  void (*get)(const group_t* g, int k, size_t pos, size_t len, void* out);
  const int* members;  /* global ranks (rank groups) */
  const void* islands; /* the bridge's islands (bridge group) */
  int caseIdx;
  size_t chunkBase, chunkCount; /* the bridge's call */
};

typedef struct {
  int dt, op;       /* op: sum for avg and PreMulSum */
  size_t es;
  long long ringMin;
  int preMul;       /* contributions are scalar * x (PreMulSum) */
  unsigned char scalar[8];
  const unsigned char (*rankScalar)[8]; /* PreMulSum: rank r's own scalar, when ranks differ (else NULL) */
} call_t;

static call_t gCall RC_UNUSED;

static inline size_t sliceBegin(size_t count, int n, int j) {
  return (size_t)(((unsigned __int128)count * (unsigned)j) / (unsigned)n);
}

/* acc = contribution of member first, then op with members first+1, ...
 * (mod n), left to right, for buffer elements [pos, pos+len), len <= BLOCK. */
static inline void foldMembers(const group_t* g, int first, size_t pos, size_t len, void* acc, void* tmp) {
  g->get(g, first, pos, len, acc);
  for (int t = 1; t < g->n; t++) {
    g->get(g, (first + t) % g->n, pos, len, tmp);
    refFold(acc, tmp, len, gCall.dt, gCall.op);
  }
}

/* Elements [w0, w1) of one host all-reduce over g of the call covering
 * buffer elements [base, base+c): exchange order (x0 op ... op x(n-1)) below
 * the ring threshold or for n < 3 (the ring of two folds x0 op x1 too), else
 * slice j folded from x(j+1). */
static inline void hostAllReduce(const group_t* g, size_t base, size_t c, size_t w0, size_t w1, void* out) {
  size_t es = gCall.es;
  int ring = !((long long)(c * es) < gCall.ringMin || g->n < 3);
  char* tmp = malloc(BLOCK * es);
  if (!tmp) DIE("out of memory");
  size_t s = w0;
  while (s < w1) {
    size_t e = w1, rel = s - base;
    int first = 0;
    if (ring) {
      int j = 0;
      while (j + 1 < g->n && sliceBegin(c, g->n, j + 1) <= rel) j++;
      size_t sliceEnd = base + sliceBegin(c, g->n, j + 1);
      if (sliceEnd < e) e = sliceEnd;
      first = (j + 1) % g->n;
    }
    if (e - s > BLOCK) e = s + BLOCK;
    foldMembers(g, first, s, e - s, (char*)out + (s - w0) * es, tmp);
    s = e;
  }
  free(tmp);
}

/* A rank's contribution: its input, times the scalar for PreMulSum. */
static inline void getRankInput(const group_t* g, int k, size_t pos, size_t len, void* out) {
  genInput(inputKey(g->members[k], g->caseIdx), pos, len, gCall.dt, out);
  if (gCall.preMul)
    refScale(out, len, gCall.dt, gCall.rankScalar ? gCall.rankScalar[g->members[k]] : gCall.scalar);
}

/* Island k's result for the bridge's chunk: its own host all-reduce. */
static inline void getIslandResult(const group_t* g, int k, size_t pos, size_t len, void* out) {
  const group_t* islands = g->islands;
  hostAllReduce(&islands[k], g->chunkBase, g->chunkCount, pos, pos + len, out);
}

/* ------------------------------------------------------------ topology */

static int gN RC_UNUSED;                       /* world size */
static char gVendor[MAX_RANKS][32] RC_UNUSED;  /* --layout */
static int gNislands RC_UNUSED;
static int gIslandOf[MAX_RANKS] RC_UNUSED, gLeader[MAX_RANKS] RC_UNUSED, gIslandSize[MAX_RANKS] RC_UNUSED;
static int gMembers[MAX_RANKS][MAX_RANKS] RC_UNUSED;
static int gAll[MAX_RANKS] RC_UNUSED;
static long long gChunkBytes RC_UNUSED;
static int gRails RC_UNUSED; /* split-rail: GPUBRIDGE_RAILS, 0 = no cap */

/* Islands from the --layout vendors: one per vendor, numbered in the order of
 * their lowest rank. Fills gN's island tables. */
static inline void layoutIslands(void) {
  gNislands = 0;
  for (int r = 0; r < gN; r++) {
    int is = -1;
    for (int k = 0; k < gNislands; k++)
      if (strcmp(gVendor[gLeader[k]], gVendor[r]) == 0) is = k;
    if (is < 0) {
      is = gNislands++;
      gLeader[is] = r;
      gIslandSize[is] = 0;
    }
    gIslandOf[r] = is;
    gMembers[is][gIslandSize[is]++] = r;
    gAll[r] = r;
  }
}

/* "V0,V1,..." -> gVendor, gN, and the island tables. */
static inline void parseLayout(const char* layout) {
  char lbuf[4096], *sv;
  snprintf(lbuf, sizeof(lbuf), "%s", layout);
  gN = 0;
  for (char* tok = strtok_r(lbuf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (gN == MAX_RANKS) DIE("layout too long");
    snprintf(gVendor[gN++], sizeof(gVendor[0]), "%s", tok);
  }
  layoutIslands();
}

/* The policy GPUBRIDGE_POLICY names, auto resolved as the header says
 * (native with one island, flat when every island has one rank, else
 * hierarchical). */
static inline int resolvedPolicy(void) {
  const char* pol = getenv("GPUBRIDGE_POLICY");
  int configured = pol && *pol ? nameIndex(pol, policyNames, gbNumPolicies) : gbPolicyAuto;
  if (configured < 0 || configured == gbPolicyTuned)
    DIE("GPUBRIDGE_POLICY=%s is not a policy this test knows", pol);
  if (configured != gbPolicyAuto) return configured;
  return gNislands == 1 ? gbPolicyNative : gNislands == gN ? gbPolicyFlat : gbPolicyHierarchical;
}

/* What gbTopology_t.policy reports: the policy a large all-reduce runs, from
 * the policy the caller resolved (resolvedPolicy). auto with islands of two
 * or more ranks runs split-rail from 2 MiB (k = 2 rails) or 32 MiB (k >= 3),
 * as test_rails.py's traffic counters show; GPUBRIDGE_RAILS=1 leaves one
 * rail, so hierarchical. */
static inline int largeAllReducePolicy(int resolved) {
  const char* pol = getenv("GPUBRIDGE_POLICY");
  int configured = pol && *pol ? nameIndex(pol, policyNames, gbNumPolicies) : gbPolicyAuto;
  if (configured != gbPolicyAuto || resolved != gbPolicyHierarchical) return resolved;
  int k = gIslandSize[0];
  for (int i = 1; i < gNislands; i++)
    if (gIslandSize[i] < k) k = gIslandSize[i];
  const char* cap = getenv("GPUBRIDGE_RAILS");
  if (cap && atoi(cap) > 0 && k > atoi(cap)) k = atoi(cap);
  return k >= 2 ? gbPolicySplitRail : gbPolicyHierarchical;
}

/* policy: the all-reduce policy the caller resolved (resolvedPolicy). */
static inline void checkTopology(gbComm_t comm, int rank, int policy) {
  policy = largeAllReducePolicy(policy);
  gbTopology_t t;
  CHECK_GB(gbCommGetTopology(comm, &t));
  if (t.nranks != gN || t.rank != rank) DIE("topology: nranks %d rank %d, expected %d and %d", t.nranks, t.rank, gN, rank);
  if (t.nislands != gNislands) DIE("topology: %d islands, expected %d", t.nislands, gNislands);
  if (t.island != gIslandOf[rank]) DIE("topology: my island %d, expected %d", t.island, gIslandOf[rank]);
  if (t.runKind != gbRunSimulated) DIE("topology: runKind %d, expected simulated (%d)", t.runKind, gbRunSimulated);
  if (t.policy != policy)
    DIE("topology: policy %d, expected %d (%s)", t.policy, policy, policyNames[policy]);
  for (int r = 0; r < gN; r++)
    if (t.islandOfRank[r] != gIslandOf[r]) DIE("topology: islandOfRank[%d] = %d, expected %d", r, t.islandOfRank[r], gIslandOf[r]);
  for (int k = 0; k < gNislands; k++) {
    if (t.leaderOfIsland[k] != gLeader[k]) DIE("topology: leader of island %d is %d, expected %d", k, t.leaderOfIsland[k], gLeader[k]);
    if (t.islandSize[k] != gIslandSize[k]) DIE("topology: island %d has %d ranks, expected %d", k, t.islandSize[k], gIslandSize[k]);
    if (!t.islandVendor[k] || strcmp(t.islandVendor[k], gVendor[gLeader[k]]) != 0)
      DIE("topology: island %d vendor '%s', expected '%s'", k, t.islandVendor[k] ? t.islandVendor[k] : "(null)", gVendor[gLeader[k]]);
  }
}

/* split-rail's k: the smallest island's size, capped by GPUBRIDGE_RAILS. */
static inline int railCount(void) {
  int k = gIslandSize[0];
  for (int i = 1; i < gNislands; i++)
    if (gIslandSize[i] < k) k = gIslandSize[i];
  if (gRails > 0 && k > gRails) k = gRails;
  return k;
}

/* The expected result of an all-reduce of count elements under policy (gCall
 * set): native is one host all-reduce over the whole buffer; the others cut
 * chunks of floor(chunk bytes / size) elements; flat reduces each over all
 * ranks; hierarchical over the islands' own results; split-rail cuts each
 * chunk into k slices, each reduced like a hierarchical chunk. avg divides
 * once by the world size at the end. */
static inline void expectedAllReduce(int policy, int caseIdx, size_t count, void* out) {
  size_t es = gCall.es;
  group_t world = {gN, getRankInput, gAll, NULL, caseIdx, 0, 0};
  if (policy == gbPolicyNative) {
    hostAllReduce(&world, 0, count, 0, count, out);
  } else {
    size_t chunk = (size_t)gChunkBytes / es;
    if (chunk == 0) chunk = 1;
    int k = policy == gbPolicySplitRail ? railCount() : 1;
    group_t islands[MAX_RANKS];
    for (int i = 0; i < gNislands; i++)
      islands[i] = (group_t){gIslandSize[i], getRankInput, gMembers[i], NULL, caseIdx, 0, 0};
    for (size_t b = 0; b < count; b += chunk) {
      size_t cc = count - b < chunk ? count - b : chunk;
      if (policy == gbPolicyFlat) {
        hostAllReduce(&world, b, cc, b, b + cc, (char*)out + b * es);
        continue;
      }
      for (int i = 0; i < k; i++) {
        size_t s0 = b + sliceBegin(cc, k, i), s1 = b + sliceBegin(cc, k, i + 1);
        if (s0 == s1) continue;
        group_t bridge = {gNislands, getIslandResult, NULL, islands, caseIdx, s0, s1 - s0};
        hostAllReduce(&bridge, s0, s1 - s0, s0, s1, (char*)out + s0 * es);
      }
    }
  }
  if (gCall.op == gbAvg) refDivide(out, count, gCall.dt, gN);
}

/* ------------------------------------------------------------ comparing */

static inline void showValue(const void* p, int dt, char* buf, size_t len) {
  switch (dt) {
    case gbInt8: snprintf(buf, len, "%d", *(const int8_t*)p); break;
    case gbUint8: snprintf(buf, len, "%u", *(const uint8_t*)p); break;
    case gbInt32: snprintf(buf, len, "%d (0x%08x)", *(const int32_t*)p, *(const uint32_t*)p); break;
    case gbUint32: snprintf(buf, len, "%u (0x%08x)", *(const uint32_t*)p, *(const uint32_t*)p); break;
    case gbInt64: snprintf(buf, len, "%lld", (long long)*(const int64_t*)p); break;
    case gbUint64: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t*)p); break;
    case gbFloat16: snprintf(buf, len, "%.9g (0x%04x)", h2f(*(const uint16_t*)p), *(const uint16_t*)p); break;
    case gbBfloat16: snprintf(buf, len, "%.9g (0x%04x)", b2f(*(const uint16_t*)p), *(const uint16_t*)p); break;
    case gbFloat32: {
      uint32_t u;
      memcpy(&u, p, 4);
      snprintf(buf, len, "%.9g (0x%08x)", *(const float*)p, u);
      break;
    }
    case gbFloat64: {
      uint64_t u;
      memcpy(&u, p, 8);
      snprintf(buf, len, "%.17g (0x%016llx)", *(const double*)p, (unsigned long long)u);
      break;
    }
  }
}

static inline void compare(const char* what, const void* got, const void* want, size_t count, int dt) {
  size_t es = dtSizes[dt];
  if (memcmp(got, want, count * es) == 0) return;
  size_t first = count, bad = 0;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char*)got + i * es, (const char*)want + i * es, es) != 0) {
      if (first == count) first = i;
      bad++;
    }
  char g[64], w[64];
  showValue((const char*)got + first * es, dt, g, sizeof(g));
  showValue((const char*)want + first * es, dt, w, sizeof(w));
  DIE("%s: first bad index %zu of %zu: got %s, expected %s (%zu elements differ)", what, first, count, g, w, bad);
}

#endif
