/* One rank of tests/mp/test_nccl_abi.py: drives libgpubridge-nccl through
 * NCCL's C API only, as a program built against nccl.h would, on simulated
 * islands. The library is opened by path (--lib) and every nccl* function
 * found with dlsym on that handle (rank_nccl_abi.h); gpubridge's own calls
 * are used only for what NCCL leaves to CUDA (streams, copies).
 *
 * Unique ids go from rank 0 to the others through files in --dir (written
 * to a temporary name, then renamed). Inputs are small integers, so every
 * expected value is exact in every type and independent of the order of
 * reduction; they are computed here from the formulas, never read back.
 *
 * Usage: rank_nccl_abi --lib PATH --dir DIR [--case all|timeout|interpose]
 *        [--fake PATH] */
#include <math.h>
#include <stdint.h>

#include "gpubridge/gpubridge.h"
#include "rank_nccl_abi.h"

#define COUNT 1031
#define ID_WAIT_S 60.0
#define ASYNC_WAIT_S 60.0

static int gN;
static const char* gDir;
static void* gStream;

#define NCCL_OK(call)                                                                                       \
  do {                                                                                                      \
    nr_t r_ = (call);                                                                                       \
    gChecks++;                                                                                              \
    if (r_ != R_SUCCESS)                                                                                    \
      DIE("%s returned %d (%s): %s", #call, r_, N.ncclGetErrorString(r_), N.ncclGetLastError(NULL));       \
  } while (0)

/* got must be want, and the last error must contain text (when given). */
static void expectError(nr_t got, nr_t want, const char* what, const char* text) {
  gChecks++;
  const char* last = N.ncclGetLastError(NULL);
  if (got != want) DIE("%s returned %d, expected %d; last error: %s", what, got, want, last);
  if (text && !strstr(last, text)) DIE("%s: the last error does not name '%s': %s", what, text, last);
}
#define NCCL_ERR(call, want, text) expectError((call), (want), #call, (text))

/* ------------------------------------------------------ ids, buffers */

static ncclUniqueId shareId(const char* tag) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof(path), "%s/id-%s", gDir, tag);
  ncclUniqueId id;
  if (gRank == 0) {
    NCCL_OK(N.ncclGetUniqueId(&id));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(&id, 1, sizeof(id), f) != sizeof(id) || fclose(f) != 0 || rename(tmp, path) != 0)
      DIE("cannot write the id to %s", path);
    return id;
  }
  double end = nowS() + ID_WAIT_S;
  for (;;) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t got = fread(&id, 1, sizeof(id), f);
      fclose(f);
      if (got != sizeof(id)) DIE("%s holds %zu bytes, not 128", path, got);
      return id;
    }
    if (nowS() > end) DIE("rank 0 did not publish %s within %.0f s", path, ID_WAIT_S);
    pause10ms();
  }
}

static void* devAlloc(size_t bytes) {
  void* p = NULL;
  NCCL_OK(N.ncclMemAlloc(&p, bytes ? bytes : 1));
  return p;
}

/* Copies and frees wait for the stream first: work still queued may read
 * or write the buffer (the copies themselves are synchronous). */
static void syncStream(void) {
  if (gbStreamSynchronize(gStream) != gbSuccess) DIE("gbStreamSynchronize: %s", gbGetLastError(NULL));
}

static void devFree(void* d) {
  syncStream();
  NCCL_OK(N.ncclMemFree(d));
}

static void toDev(void* d, const void* h, size_t bytes) {
  syncStream();
  if (bytes && gbMemcpyToDevice(d, h, bytes) != gbSuccess) DIE("gbMemcpyToDevice: %s", gbGetLastError(NULL));
}

static void toHost(void* h, const void* d, size_t bytes) {
  syncStream();
  if (bytes && gbMemcpyToHost(h, d, bytes) != gbSuccess) DIE("gbMemcpyToHost: %s", gbGetLastError(NULL));
}

/* ----------------------------------------------- values in every type */

static size_t dtSize(int dt) {
  static const size_t sizes[T_NUM] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[dt];
}

static int isUnsigned(int dt) { return dt == T_UINT8 || dt == T_UINT32 || dt == T_UINT64; }

/* IEEE half bits of x, exactly representable (0 or normal): x = m 2^e, m in [0.5, 1). */
static uint16_t halfBits(double x) {
  if (x == 0) return 0;
  int e;
  double m = frexp(fabs(x), &e);
  unsigned mant = (unsigned)((m * 2 - 1) * 1024);
  return (uint16_t)((x < 0 ? 0x8000u : 0) | (unsigned)(e - 1 + 15) << 10 | mant);
}

/* fp8 bits of x, exactly representable: the code whose value, by formula
 * (e4m3: 3 mantissa bits, bias 7; e5m2: 2, bias 15), is |x|. */
static uint8_t fp8Bits(int dt, double x) {
  int mb = dt == T_FP8E4M3 ? 3 : 2, bias = dt == T_FP8E4M3 ? 7 : 15;
  for (int c = 0; c < 0x7c; c++) {
    int e = c >> mb, m = c & ((1 << mb) - 1);
    double v = e == 0 ? ldexp(m, 1 - bias - mb) : ldexp((1 << mb) + m, e - bias - mb);
    if (v == fabs(x)) return (uint8_t)((x < 0 ? 0x80 : 0) | c);
  }
  DIE("fp8Bits: %g is not exact in type %d", x, dt);
}

static void encode(int dt, double v, void* p) {
  switch (dt) {
    case T_INT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case T_UINT8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case T_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case T_UINT32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case T_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case T_UINT64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case T_FLOAT16: { uint16_t x = halfBits(v); memcpy(p, &x, 2); break; }
    case T_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case T_FLOAT64: memcpy(p, &v, 8); break;
    case T_BFLOAT16: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4); uint16_t x = (uint16_t)(b >> 16); memcpy(p, &x, 2); break; }
    case T_FP8E4M3: case T_FP8E5M2: { uint8_t x = fp8Bits(dt, v); memcpy(p, &x, 1); break; }
    default: DIE("encode: type %d", dt);
  }
}

/* Rank r's element i for op: small integers whose sums, products (of 1..3
 * over up to 4 ranks), and averages over 2 or 4 ranks are exact in every type. */
static double gen(int dt, int op, int r, size_t i) {
  int k = (int)(i % 1000);
  switch (op) {
    case OP_PROD: return 1 + (r + k) % 3;
    case OP_MAX: case OP_MIN: return (r * 7 + k * 3) % 11 - (isUnsigned(dt) ? 0 : 5);
    case OP_AVG: return r * 2 + k % 4;
    default: return (r * 5 + k * 3) % 13 - (isUnsigned(dt) ? 0 : 6);
  }
}

static double expected(int dt, int op, size_t i) {
  double acc = gen(dt, op, 0, i);
  for (int r = 1; r < gN; r++) {
    double v = gen(dt, op, r, i);
    acc = op == OP_PROD ? acc * v : op == OP_MAX ? fmax(acc, v) : op == OP_MIN ? fmin(acc, v) : acc + v;
  }
  return op == OP_AVG ? acc / gN : acc;
}

/* Compares count elements of type dt; names the first bad one. */
static void expectBytes(const char* what, int dt, const void* got, const void* want, size_t count) {
  gChecks++;
  size_t s = dtSize(dt);
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char*)got + i * s, (const char*)want + i * s, s) != 0) {
      uint64_t g = 0, w = 0;
      memcpy(&g, (const char*)got + i * s, s);
      memcpy(&w, (const char*)want + i * s, s);
      DIE("%s: element %zu of %zu has bits 0x%llx, expected 0x%llx", what, i, count, (unsigned long long)g,
          (unsigned long long)w);
    }
}

static int32_t* ints(size_t count) {
  int32_t* p = calloc(count ? count : 1, sizeof(int32_t));
  if (!p) DIE("out of memory");
  return p;
}

#include "rank_nccl_abi_cases.h"

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* lib = NULL;
  const char* which = "all";
  const char* fake = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--lib") == 0) lib = argv[i + 1];
    else if (strcmp(argv[i], "--dir") == 0) gDir = argv[i + 1];
    else if (strcmp(argv[i], "--case") == 0) which = argv[i + 1];
    else if (strcmp(argv[i], "--fake") == 0) fake = argv[i + 1];
    else DIE("unknown argument %s (usage: --lib PATH --dir DIR [--case all|timeout|interpose] [--fake PATH])",
             argv[i]);
  }
  if (!lib || !gDir) DIE("--lib and --dir are required");
  gRank = envInt("RANK");
  gN = envInt("WORLD_SIZE");
  bindLibrary(lib);
  if (gbStreamCreate(&gStream) != gbSuccess) DIE("gbStreamCreate: %s", gbGetLastError(NULL));
  if (strcmp(which, "timeout") == 0) caseTimeout();
  else if (strcmp(which, "all") == 0) caseAll();
  else if (strcmp(which, "interpose") == 0) caseInterpose(fake);
  else DIE("unknown case %s", which);
  printf("ok: %ld checks\n", gChecks);
  return 0;
}
