/* One rank of the collectives matrix (tests/mp/test_collectives.py).
 *
 * Every rank generates every rank's inputs from a counter-based generator,
 * computes the expected bits on its own from the documented reduction order
 * (written again here from the contract, not taken from the library), and
 * compares its result bit for bit. Any difference prints the first bad index
 * and exits 1.
 *
 * Usage: rank_collectives --layout V0,V1,... [--seed S]
 *          [--allreduce COUNTS:DTYPES:OPS:PLACES]...   PLACES: o, i or oi
 *          [--broadcast COUNTS:DTYPES:ROOTS:PLACES]... ROOTS: ranks, -1 = last
 *          [--avg-int-check] [--reps N]
 *          [--wait-file R:PATH] (rank R waits for PATH before init)
 *          [--wait-file-after-init PATH] (every rank waits after init)
 * The policy, chunk and ring threshold come from GPUBRIDGE_POLICY,
 * GPUBRIDGE_CHUNK_BYTES and GPUBRIDGE_RING_MIN_BYTES, which the driver sets. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpubridge/gpubridge.h"

#define MAX_RANKS 64
#define MAX_SPECS 16
#define BLOCK 8192 /* elements per reference block */

/* ------------------------------------------------------------ small helpers */

static int gRank = -1;

#define DIE(...)                                  \
  do {                                            \
    fprintf(stdout, "rank %d: FAIL: ", gRank);    \
    fprintf(stdout, __VA_ARGS__);                 \
    fprintf(stdout, "\n");                        \
    fflush(stdout);                               \
    exit(1);                                      \
  } while (0)

#define CHECK_GB(call)                                                                  \
  do {                                                                                  \
    gbResult_t r_ = (call);                                                             \
    if (r_ != gbSuccess)                                                                \
      DIE("%s returned %d (%s): %s", #call, (int)r_, gbGetErrorString(r_), gbGetLastError(NULL)); \
  } while (0)

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for a file to exist, polling, up to a deadline. */
static void waitFile(const char* path, double seconds) {
  double end = nowS() + seconds;
  while (access(path, F_OK) != 0) {
    if (nowS() > end) DIE("file %s did not appear within %.0f s", path, seconds);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL); /* polling interval of a deadline-bounded wait */
  }
}

static int envRank(void) {
  const char* names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (int i = 0; i < 3; i++)
    if (getenv(names[i])) return atoi(getenv(names[i]));
  return -1;
}

/* Bytes with an optional K/M/G suffix (1024-based), as GPUBRIDGE_* sizes. */
static long long envSize(const char* name) {
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

/* ------------------------------------------------------------ data types */

static const char* dtNames[gbNumTypes] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                          "uint64",  "float16", "float32", "float64", "bfloat16"};
static const size_t dtSizes[gbNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
static const char* opNames[gbNumOps] = {"sum", "prod", "max", "min", "avg"};
static const char* policyNames[gbNumPolicies] = {"auto", "hierarchical", "native", "flat"};

static int isFloat(int dt) { return dt == gbFloat16 || dt == gbFloat32 || dt == gbFloat64 || dt == gbBfloat16; }

static float h2f(uint16_t h) {
  _Float16 x;
  memcpy(&x, &h, 2);
  return (float)x;
}
static uint16_t f2h(float f) {
  _Float16 x = (_Float16)f; /* round to nearest even */
  uint16_t h;
  memcpy(&h, &x, 2);
  return h;
}
static float b2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f2b(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float fop(float a, float b, int op) {
  switch (op) {
    case gbProd: return a * b;
    case gbMax: return a > b ? a : b;
    case gbMin: return a < b ? a : b;
    default: return a + b;
  }
}
static double dop(double a, double b, int op) {
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

/* acc = acc op in, elementwise (avg folds as sum). */
static void refFold(void* acc, const void* in, size_t n, int dt, int op) {
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
  }
}

static void refDivide(void* buf, size_t n, int dt, int divisor) {
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
      case gbFloat32: ((float*)buf)[i] = ((float*)buf)[i] / (float)divisor; break;
      case gbFloat64: ((double*)buf)[i] = ((double*)buf)[i] / (double)divisor; break;
      case gbFloat16: ((uint16_t*)buf)[i] = f2h(h2f(((uint16_t*)buf)[i]) / (float)divisor); break;
      case gbBfloat16: ((uint16_t*)buf)[i] = f2b(b2f(((uint16_t*)buf)[i]) / (float)divisor); break;
    }
  }
}

/* ------------------------------------------------------------ inputs */

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t gSeed = 1;

/* The key of one rank's input in one case: elements are mix64(key + i). */
static uint64_t inputKey(int rank, int caseIdx) {
  return mix64(gSeed ^ mix64(((uint64_t)(uint32_t)rank << 32) ^ (uint64_t)(uint32_t)caseIdx));
}

/* Floats in +-[0.5, 2): products of 8 stay finite even in float16. */
static float unitFloat(uint64_t x) {
  float f = 0.5f + 1.5f * (float)(x >> 40) * (1.0f / 16777216.0f);
  return (x & 1) ? -f : f;
}

/* Elements [pos, pos+len) of a rank's input. */
static void genInput(uint64_t key, size_t pos, size_t len, int dt, void* out) {
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
  int dt, op;
  size_t es;
  long long ringMin;
} call_t;

static call_t gCall;

static size_t sliceBegin(size_t count, int n, int j) {
  return (size_t)(((unsigned __int128)count * (unsigned)j) / (unsigned)n);
}

/* Elements [w0, w1) of one host all-reduce over g of the call covering
 * buffer elements [base, base+c): exchange order (x0 op ... op x(n-1)) below
 * the ring threshold or for n < 3, else slice j folded from x(j+1). */
static void hostAllReduce(const group_t* g, size_t base, size_t c, size_t w0, size_t w1, void* out) {
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
    char* acc = (char*)out + (s - w0) * es;
    g->get(g, first, s, e - s, acc);
    for (int t = 1; t < g->n; t++) {
      g->get(g, (first + t) % g->n, s, e - s, tmp);
      refFold(acc, tmp, e - s, gCall.dt, gCall.op);
    }
    s = e;
  }
  free(tmp);
}

static void getRankInput(const group_t* g, int k, size_t pos, size_t len, void* out) {
  genInput(inputKey(g->members[k], g->caseIdx), pos, len, gCall.dt, out);
}

/* Island k's result for the bridge's chunk: its own host all-reduce. */
static void getIslandResult(const group_t* g, int k, size_t pos, size_t len, void* out) {
  const group_t* islands = g->islands;
  hostAllReduce(&islands[k], g->chunkBase, g->chunkCount, pos, pos + len, out);
}

/* ------------------------------------------------------------ topology */

static int gN;                       /* world size */
static char gVendor[MAX_RANKS][32];  /* --layout */
static int gNislands;
static int gIslandOf[MAX_RANKS], gLeader[MAX_RANKS], gIslandSize[MAX_RANKS];
static int gMembers[MAX_RANKS][MAX_RANKS];
static int gAll[MAX_RANKS];
static int gPolicy; /* resolved */
static long long gChunkBytes;

static void layoutIslands(void) {
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

static void checkTopology(gbComm_t comm, int rank) {
  gbTopology_t t;
  CHECK_GB(gbCommGetTopology(comm, &t));
  if (t.nranks != gN || t.rank != rank) DIE("topology: nranks %d rank %d, expected %d and %d", t.nranks, t.rank, gN, rank);
  if (t.nislands != gNislands) DIE("topology: %d islands, expected %d", t.nislands, gNislands);
  if (t.island != gIslandOf[rank]) DIE("topology: my island %d, expected %d", t.island, gIslandOf[rank]);
  if (t.runKind != gbRunSimulated) DIE("topology: runKind %d, expected simulated (%d)", t.runKind, gbRunSimulated);
  if (t.policy != gPolicy)
    DIE("topology: policy %d, expected %d (%s)", t.policy, gPolicy, policyNames[gPolicy]);
  for (int r = 0; r < gN; r++)
    if (t.islandOfRank[r] != gIslandOf[r]) DIE("topology: islandOfRank[%d] = %d, expected %d", r, t.islandOfRank[r], gIslandOf[r]);
  for (int k = 0; k < gNislands; k++) {
    if (t.leaderOfIsland[k] != gLeader[k]) DIE("topology: leader of island %d is %d, expected %d", k, t.leaderOfIsland[k], gLeader[k]);
    if (t.islandSize[k] != gIslandSize[k]) DIE("topology: island %d has %d ranks, expected %d", k, t.islandSize[k], gIslandSize[k]);
    if (!t.islandVendor[k] || strcmp(t.islandVendor[k], gVendor[gLeader[k]]) != 0)
      DIE("topology: island %d vendor '%s', expected '%s'", k, t.islandVendor[k] ? t.islandVendor[k] : "(null)", gVendor[gLeader[k]]);
  }
}

/* The expected result of an all-reduce of count elements, by the policy. */
static void expectedAllReduce(int caseIdx, size_t count, void* out) {
  size_t es = gCall.es;
  group_t world = {gN, getRankInput, gAll, NULL, caseIdx, 0, 0};
  if (gPolicy == gbPolicyNative) {
    hostAllReduce(&world, 0, count, 0, count, out);
  } else {
    size_t chunk = (size_t)gChunkBytes / es;
    if (chunk == 0) chunk = 1;
    group_t islands[MAX_RANKS];
    for (int k = 0; k < gNislands; k++)
      islands[k] = (group_t){gIslandSize[k], getRankInput, gMembers[k], NULL, caseIdx, 0, 0};
    for (size_t b = 0; b < count; b += chunk) {
      size_t cc = count - b < chunk ? count - b : chunk;
      char* dst = (char*)out + b * es;
      if (gPolicy == gbPolicyFlat) {
        hostAllReduce(&world, b, cc, b, b + cc, dst);
      } else {
        group_t bridge = {gNislands, getIslandResult, NULL, islands, caseIdx, b, cc};
        hostAllReduce(&bridge, b, cc, b, b + cc, dst);
      }
    }
  }
  if (gCall.op == gbAvg) refDivide(out, count, gCall.dt, gN);
}

/* ------------------------------------------------------------ comparing */

static void showValue(const void* p, int dt, char* buf, size_t len) {
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

static void compare(const char* what, const void* got, const void* want, size_t count, int dt) {
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

/* ------------------------------------------------------------ the matrix */

typedef struct {
  int broadcast;
  size_t counts[32];
  int ncounts;
  int dtypes[gbNumTypes], ndtypes;
  int ops[gbNumOps], nops;
  int roots[32], nroots;
  int outOfPlace, inPlace;
} spec_t;

static spec_t gSpecs[MAX_SPECS];
static int gNspecs;

static int nameIndex(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* "COUNTS:DTYPES:OPS_OR_ROOTS:PLACES" */
static void parseSpec(const char* text, int broadcast) {
  if (gNspecs == MAX_SPECS) DIE("too many specs");
  spec_t* s = &gSpecs[gNspecs++];
  memset(s, 0, sizeof(*s));
  s->broadcast = broadcast;
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", text);
  char* fields[4];
  char* save = NULL;
  for (int f = 0; f < 4; f++) {
    fields[f] = strtok_r(f ? NULL : buf, ":", &save);
    if (!fields[f]) DIE("spec '%s' needs 4 fields COUNTS:DTYPES:%s:PLACES", text, broadcast ? "ROOTS" : "OPS");
  }
  char *tok, *sv;
  for (tok = strtok_r(fields[0], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv))
    if (s->ncounts < 32) s->counts[s->ncounts++] = (size_t)strtoull(tok, NULL, 10);
  for (tok = strtok_r(fields[1], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (strcmp(tok, "all") == 0) {
      for (int d = 0; d < gbNumTypes; d++) s->dtypes[s->ndtypes++] = d;
      continue;
    }
    int d = nameIndex(tok, dtNames, gbNumTypes);
    if (d < 0) DIE("unknown dtype %s", tok);
    s->dtypes[s->ndtypes++] = d;
  }
  for (tok = strtok_r(fields[2], ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (broadcast) {
      int r = atoi(tok);
      if (r < 0) r += gN;
      int dup = 0;
      for (int i = 0; i < s->nroots; i++) dup |= s->roots[i] == r;
      if (r >= 0 && r < gN && !dup && s->nroots < 32) s->roots[s->nroots++] = r;
    } else if (strcmp(tok, "all") == 0) {
      for (int o = 0; o < gbNumOps; o++) s->ops[s->nops++] = o;
    } else {
      int o = nameIndex(tok, opNames, gbNumOps);
      if (o < 0) DIE("unknown op %s", tok);
      s->ops[s->nops++] = o;
    }
  }
  s->outOfPlace = strchr(fields[3], 'o') != NULL;
  s->inPlace = strchr(fields[3], 'i') != NULL;
}

typedef struct {
  gbComm_t comm;
  void* stream;
  int rank;
  void *dSend, *dRecv;       /* device buffers */
  char *in, *got, *want;     /* host buffers */
  size_t cap;                /* bytes of each buffer */
  int caseIdx;
  int nAllReduce, nBroadcast;
} run_t;

#define PATTERN 0xA5

static void syncAndCheck(run_t* R, const char* what) {
  gbResult_t res = gbStreamSynchronize(R->stream);
  if (res != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(R->comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", what, (int)async, gbGetLastError(R->comm));
}

static void runAllReduce(run_t* R, size_t count, int dt, int op, int inPlace) {
  int caseIdx = R->caseIdx++;
  size_t es = dtSizes[dt], bytes = count * es, probe = bytes ? bytes : 16;
  char what[160];
  snprintf(what, sizeof(what), "case %d: allreduce %s %s count %zu %s (policy %s)", caseIdx, dtNames[dt],
           opNames[op], count, inPlace ? "in place" : "out of place", policyNames[gPolicy]);
  genInput(inputKey(R->rank, caseIdx), 0, count, dt, R->in);
  memset(R->want, PATTERN, probe);
  CHECK_GB(gbMemcpyToDevice(R->dRecv, R->want, probe));
  if (inPlace) CHECK_GB(gbMemcpyToDevice(R->dRecv, R->in, bytes));
  else CHECK_GB(gbMemcpyToDevice(R->dSend, R->in, bytes));
  const void* send = inPlace ? R->dRecv : R->dSend;
  gbResult_t res = gbAllReduce(send, R->dRecv, count, dt, op, R->comm, R->stream);
  if (res != gbSuccess) DIE("%s: gbAllReduce returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  syncAndCheck(R, what);
  CHECK_GB(gbMemcpyToHost(R->got, R->dRecv, probe));
  if (count == 0) {
    compare(what, R->got, R->want, probe, gbUint8); /* untouched */
  } else {
    gCall = (call_t){dt, op, es, gCall.ringMin};
    expectedAllReduce(caseIdx, count, R->want);
    compare(what, R->got, R->want, count, dt);
  }
  if (!inPlace && count) {
    CHECK_GB(gbMemcpyToHost(R->got, R->dSend, bytes));
    char w2[200];
    snprintf(w2, sizeof(w2), "%s: send buffer changed", what);
    compare(w2, R->got, R->in, count, dt);
  }
  R->nAllReduce++;
}

static void runBroadcast(run_t* R, size_t count, int dt, int root, int inPlace) {
  int caseIdx = R->caseIdx++;
  size_t es = dtSizes[dt], bytes = count * es, probe = bytes ? bytes : 16;
  char what[160];
  snprintf(what, sizeof(what), "case %d: broadcast %s count %zu root %d %s", caseIdx, dtNames[dt], count, root,
           inPlace ? "in place" : "out of place");
  genInput(inputKey(R->rank, caseIdx), 0, count, dt, R->in);
  memset(R->want, PATTERN, probe);
  CHECK_GB(gbMemcpyToDevice(R->dRecv, R->want, probe));
  if (inPlace && R->rank == root) CHECK_GB(gbMemcpyToDevice(R->dRecv, R->in, bytes));
  if (!inPlace) CHECK_GB(gbMemcpyToDevice(R->dSend, R->in, bytes));
  const void* send = inPlace ? R->dRecv : R->dSend;
  gbResult_t res = gbBroadcast(send, R->dRecv, count, dt, root, R->comm, R->stream);
  if (res != gbSuccess) DIE("%s: gbBroadcast returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  syncAndCheck(R, what);
  CHECK_GB(gbMemcpyToHost(R->got, R->dRecv, probe));
  if (count == 0) {
    compare(what, R->got, R->want, probe, gbUint8);
  } else {
    genInput(inputKey(root, caseIdx), 0, count, dt, R->want);
    compare(what, R->got, R->want, count, dt);
  }
  if (!inPlace && count) {
    CHECK_GB(gbMemcpyToHost(R->got, R->dSend, bytes));
    char w2[200];
    snprintf(w2, sizeof(w2), "%s: send buffer changed", what);
    compare(w2, R->got, R->in, count, dt);
  }
  R->nBroadcast++;
}

/* avg needs a floating type: every integer type must be refused with
 * gbInvalidArgument before anything is sent (the matrix that follows would
 * fall out of step otherwise). */
static void avgIntCheck(run_t* R) {
  for (int dt = 0; dt < gbNumTypes; dt++) {
    if (isFloat(dt)) continue;
    gbResult_t res = gbAllReduce(R->dSend, R->dRecv, 7, dt, gbAvg, R->comm, R->stream);
    if (res != gbInvalidArgument)
      DIE("allreduce avg on %s returned %d (%s), expected gbInvalidArgument (%d)", dtNames[dt], (int)res,
          gbGetErrorString(res), (int)gbInvalidArgument);
    if (!*gbGetLastError(R->comm)) DIE("allreduce avg on %s: gbGetLastError is empty", dtNames[dt]);
  }
  syncAndCheck(R, "after the refused avg calls");
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gRank = envRank();
  const char* layout = NULL;
  const char* waitAfter = NULL;
  int waitRank = -1, avgInt = 0, reps = 1;
  const char* waitPath = NULL;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--layout") == 0 && v) layout = v, i++;
    else if (strcmp(a, "--seed") == 0 && v) gSeed = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--reps") == 0 && v) reps = atoi(v), i++;
    else if (strcmp(a, "--avg-int-check") == 0) avgInt = 1;
    else if (strcmp(a, "--wait-file-after-init") == 0 && v) waitAfter = v, i++;
    else if (strcmp(a, "--wait-file") == 0 && v && strchr(v, ':')) {
      waitRank = atoi(v);
      waitPath = strchr(v, ':') + 1;
      i++;
    } else if ((strcmp(a, "--allreduce") == 0 || strcmp(a, "--broadcast") == 0) && v) {
      i++; /* parsed once the world size is known */
    } else DIE("bad argument '%s'", a);
  }
  if (!layout) DIE("--layout V0,V1,... is required");
  char lbuf[4096], *sv;
  snprintf(lbuf, sizeof(lbuf), "%s", layout);
  gN = 0;
  for (char* tok = strtok_r(lbuf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (gN == MAX_RANKS) DIE("layout too long");
    snprintf(gVendor[gN++], sizeof(gVendor[0]), "%s", tok);
  }
  layoutIslands();
  for (int i = 1; i + 1 < argc; i++) {
    if (strcmp(argv[i], "--allreduce") == 0) parseSpec(argv[++i], 0);
    else if (strcmp(argv[i], "--broadcast") == 0) parseSpec(argv[++i], 1);
  }
  const char* pol = getenv("GPUBRIDGE_POLICY");
  int configured = pol && *pol ? nameIndex(pol, policyNames, gbNumPolicies) : gbPolicyAuto;
  if (configured < 0) DIE("GPUBRIDGE_POLICY=%s is not a policy this test knows", pol);
  gPolicy = configured != gbPolicyAuto ? configured : (gNislands == 1 ? gbPolicyNative : gbPolicyHierarchical);
  gChunkBytes = envSize("GPUBRIDGE_CHUNK_BYTES");
  gCall.ringMin = envSize("GPUBRIDGE_RING_MIN_BYTES");

  if (waitPath && gRank == waitRank) waitFile(waitPath, 60);

  double t0 = nowS();
  run_t R;
  memset(&R, 0, sizeof(R));
  gbResult_t res = gbCommInitFromEnv(&R.comm, NULL);
  if (res != gbSuccess) DIE("gbCommInitFromEnv returned %d: %s", (int)res, gbGetLastError(NULL));
  int nranks;
  CHECK_GB(gbCommUserRank(R.comm, &R.rank));
  CHECK_GB(gbCommCount(R.comm, &nranks));
  gRank = R.rank;
  if (nranks != gN) DIE("gbCommCount says %d ranks, the layout has %d", nranks, gN);
  const char* myVendor = getenv("GPUBRIDGE_VENDOR");
  if (!myVendor || strcmp(myVendor, gVendor[R.rank]) != 0)
    DIE("GPUBRIDGE_VENDOR=%s, but the layout gives rank %d '%s'", myVendor ? myVendor : "(unset)", R.rank,
        gVendor[R.rank]);
  checkTopology(R.comm, R.rank);
  if (waitAfter) waitFile(waitAfter, 60);

  for (int s = 0; s < gNspecs; s++)
    for (int c = 0; c < gSpecs[s].ncounts; c++)
      for (int d = 0; d < gSpecs[s].ndtypes; d++)
        if (gSpecs[s].counts[c] * dtSizes[gSpecs[s].dtypes[d]] > R.cap)
          R.cap = gSpecs[s].counts[c] * dtSizes[gSpecs[s].dtypes[d]];
  R.cap += 64;
  CHECK_GB(gbStreamCreate(&R.stream));
  CHECK_GB(gbMemAlloc(&R.dSend, R.cap));
  CHECK_GB(gbMemAlloc(&R.dRecv, R.cap));
  R.in = malloc(R.cap);
  R.got = malloc(R.cap);
  R.want = malloc(R.cap);
  if (!R.in || !R.got || !R.want) DIE("out of memory (%zu bytes)", R.cap);

  if (avgInt) avgIntCheck(&R);
  for (int rep = 0; rep < reps; rep++)
    for (int s = 0; s < gNspecs; s++) {
      const spec_t* sp = &gSpecs[s];
      for (int c = 0; c < sp->ncounts; c++)
        for (int d = 0; d < sp->ndtypes; d++)
          for (int p = 0; p < 2; p++) {
            if ((p == 0 && !sp->outOfPlace) || (p == 1 && !sp->inPlace)) continue;
            if (sp->broadcast) {
              for (int k = 0; k < sp->nroots; k++) runBroadcast(&R, sp->counts[c], sp->dtypes[d], sp->roots[k], p);
            } else {
              for (int o = 0; o < sp->nops; o++) {
                if (sp->ops[o] == gbAvg && !isFloat(sp->dtypes[d])) continue;
                runAllReduce(&R, sp->counts[c], sp->dtypes[d], sp->ops[o], p);
              }
            }
          }
    }

  CHECK_GB(gbStreamDestroy(R.stream));
  CHECK_GB(gbMemFree(R.dSend));
  CHECK_GB(gbMemFree(R.dRecv));
  CHECK_GB(gbCommDestroy(R.comm));
  printf("ok: rank %d of %d, %d islands, policy %s, %d all-reduce and %d broadcast cases passed in %.2f s\n",
         R.rank, gN, gNislands, policyNames[gPolicy], R.nAllReduce, R.nBroadcast, nowS() - t0);
  free(R.in);
  free(R.got);
  free(R.want);
  return 0;
}
