/* What rank_nccl_abi.c needs to call libgpubridge-nccl as a program built
 * against nccl.h would: NCCL's types, written here from NCCL's documentation
 * (independently of abi/nccl), and a table of the library's nccl*
 * functions found with dlsym on a handle opened by path, so that the calls
 * go to that library and nowhere else. Header of one program. */
#ifndef GB_TESTS_MP_RANK_NCCL_ABI_H
#define GB_TESTS_MP_RANK_NCCL_ABI_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int gRank = -1;
static long gChecks;

#define DIE(...)                               \
  do {                                         \
    fprintf(stdout, "rank %d: FAIL: ", gRank); \
    fprintf(stdout, __VA_ARGS__);              \
    fprintf(stdout, "\n");                     \
    fflush(stdout);                            \
    exit(1);                                   \
  } while (0)

#define EXPECT(cond, ...)      \
  do {                         \
    gChecks++;                 \
    if (!(cond)) DIE(__VA_ARGS__); \
  } while (0)

/* ---------------------------------------------------- NCCL's C types */

typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
enum { R_SUCCESS = 0, R_INVALID_ARGUMENT = 4, R_INVALID_USAGE = 5, R_REMOTE = 6, R_IN_PROGRESS = 7, R_TIMEOUT = 8 };
enum { T_INT8, T_UINT8, T_INT32, T_UINT32, T_INT64, T_UINT64, T_FLOAT16, T_FLOAT32, T_FLOAT64, T_BFLOAT16,
       T_FP8E4M3, T_FP8E5M2, T_NUM };
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG };
enum { SCALAR_DEVICE = 0, SCALAR_HOST = 1 };
#define SPLIT_NOCOLOR (-1)
#define CONFIG_MAGIC 0xcafebeefu
#define UNDEF_INT INT32_MIN

/* ncclConfig_t's fields by byte offset, NCCL 2.14 .. 2.30 (each version
 * appends): what a caller compiled against that version's nccl.h passes. */
typedef struct { const char* name; size_t offset; int isPointer; } configField_t;
static const configField_t configFields[] = {
    {"blocking", 16, 0},       {"cgaClusterSize", 20, 0},     {"minCTAs", 24, 0},
    {"maxCTAs", 28, 0},        {"netName", 32, 1},            {"splitShare", 40, 0},
    {"trafficClass", 44, 0},   {"commName", 48, 1},           {"collnetEnable", 56, 0},
    {"CTAPolicy", 60, 0},      {"shrinkShare", 64, 0},        {"nvlsCTAs", 68, 0},
    {"nChannelsPerNetPeer", 72, 0}, {"nvlinkCentricSched", 76, 0}, {"graphUsageMode", 80, 0},
    {"numRmaCtx", 84, 0},      {"maxP2pPeers", 88, 0},
};

/* ------------------------------------------------- the function table */

typedef int nr_t; /* ncclResult_t */
#define NCCL_FUNCS(X)                                                                                 \
  X(nr_t, ncclGetVersion, (int*))                                                                     \
  X(nr_t, ncclGetUniqueId, (ncclUniqueId*))                                                           \
  X(const char*, ncclGetErrorString, (nr_t))                                                          \
  X(const char*, ncclGetLastError, (ncclComm_t))                                                      \
  X(nr_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))                                    \
  X(nr_t, ncclCommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, void*))                       \
  X(nr_t, ncclCommInitRankScalable, (ncclComm_t*, int, int, int, ncclUniqueId*, void*))               \
  X(nr_t, ncclCommInitAll, (ncclComm_t*, int, const int*))                                            \
  X(nr_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, void*))                                  \
  X(nr_t, ncclCommFinalize, (ncclComm_t))                                                             \
  X(nr_t, ncclCommDestroy, (ncclComm_t))                                                              \
  X(nr_t, ncclCommAbort, (ncclComm_t))                                                                \
  X(nr_t, ncclCommGetAsyncError, (ncclComm_t, nr_t*))                                                 \
  X(nr_t, ncclCommCount, (ncclComm_t, int*))                                                          \
  X(nr_t, ncclCommCuDevice, (ncclComm_t, int*))                                                       \
  X(nr_t, ncclCommUserRank, (ncclComm_t, int*))                                                       \
  X(nr_t, ncclMemAlloc, (void**, size_t))                                                             \
  X(nr_t, ncclMemFree, (void*))                                                                       \
  X(nr_t, ncclCommRegister, (ncclComm_t, void*, size_t, void**))                                      \
  X(nr_t, ncclCommDeregister, (ncclComm_t, void*))                                                    \
  X(nr_t, ncclRedOpCreatePreMulSum, (int*, void*, int, int, ncclComm_t))                              \
  X(nr_t, ncclRedOpDestroy, (int, ncclComm_t))                                                        \
  X(nr_t, ncclAllReduce, (const void*, void*, size_t, int, int, ncclComm_t, void*))                   \
  X(nr_t, ncclBroadcast, (const void*, void*, size_t, int, int, ncclComm_t, void*))                   \
  X(nr_t, ncclBcast, (void*, size_t, int, int, ncclComm_t, void*))                                    \
  X(nr_t, ncclReduce, (const void*, void*, size_t, int, int, int, ncclComm_t, void*))                 \
  X(nr_t, ncclAllGather, (const void*, void*, size_t, int, ncclComm_t, void*))                        \
  X(nr_t, ncclReduceScatter, (const void*, void*, size_t, int, int, ncclComm_t, void*))               \
  X(nr_t, ncclAlltoAll, (const void*, void*, size_t, int, ncclComm_t, void*))                         \
  X(nr_t, ncclGather, (const void*, void*, size_t, int, int, ncclComm_t, void*))                      \
  X(nr_t, ncclScatter, (const void*, void*, size_t, int, int, ncclComm_t, void*))                     \
  X(nr_t, ncclSend, (const void*, size_t, int, int, ncclComm_t, void*))                               \
  X(nr_t, ncclRecv, (void*, size_t, int, int, ncclComm_t, void*))                                     \
  X(nr_t, ncclGroupStart, (void))                                                                     \
  X(nr_t, ncclGroupEnd, (void))                                                                       \
  X(nr_t, ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, void*, int))                           \
  X(nr_t, ncclCommWindowRegister, (ncclComm_t, void*, size_t, void**, int))                           \
  X(nr_t, ncclCommWindowDeregister, (ncclComm_t, void*))                                              \
  X(nr_t, ncclGroupSimulateEnd, (void*))                                                              \
  X(nr_t, ncclCommRevoke, (ncclComm_t, int))

typedef struct {
#define NCCL_FIELD(ret, name, args) ret(*name) args;
  NCCL_FUNCS(NCCL_FIELD)
#undef NCCL_FIELD
} nccl_t;

static nccl_t N;

/* POSIX lets a dlsym result be converted to a function pointer; memcpy
 * keeps -Wpedantic quiet about it. */
static void bindOne(void* lib, const char* name, void* field) {
  void* p = dlsym(lib, name);
  if (!p) DIE("the library does not export %s", name);
  char alias[128];
  snprintf(alias, sizeof(alias), "p%s", name);
  void* q = dlsym(lib, alias);
  EXPECT(q == p, "%s (profiling alias) is %p, not %s's address %p", alias, q, name, p);
  memcpy(field, &p, sizeof(p));
}

static void bindLibrary(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) DIE("dlopen %s: %s", path, dlerror());
#define NCCL_BIND(ret, name, args) bindOne(lib, #name, &N.name);
  NCCL_FUNCS(NCCL_BIND)
#undef NCCL_BIND
}

/* ------------------------------------------------------------ helpers */

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause10ms(void) {
  struct timespec ts = {0, 10 * 1000 * 1000};
  nanosleep(&ts, NULL); /* polling interval of a deadline-bounded wait */
}

static int envInt(const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) DIE("%s is not set (run under gpubridge-run)", name);
  return atoi(v);
}

#endif
