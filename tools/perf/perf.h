/* gpubridge-perf: an nccl-tests-style benchmark of gpubridge's collectives.
 * Uses only the public API (gpubridge/gpubridge.h). The pieces:
 *   options.c  command line (parsed before init, so bad flags fail alike everywhere)
 *   types.c    data type and op tables, float16/bfloat16 encodings
 *   buffers.c  device buffers with guard areas, fill and check
 *   ranks.c    small collectives that combine per-rank numbers
 *   table.c    the printed table and the JSON lines
 *   bench.c    one (type, op, root) sweep over the sizes
 *   main.c     init, the sweeps, the exit status */
#ifndef GB_PERF_PERF_H
#define GB_PERF_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "gpubridge/gpubridge.h"

#define PERF_EXIT_USAGE 2

/* ----------------------------------------------------------------- options */

typedef enum { PERF_ALL_REDUCE = 0, PERF_BROADCAST = 1 } perfColl_t;

/* -a: how the ranks' times are combined into the printed one. */
typedef enum { PERF_AVG_RANK0 = 0, PERF_AVG_MEAN = 1, PERF_AVG_MIN = 2, PERF_AVG_MAX = 3 } perfAverage_t;

typedef struct {
  perfColl_t coll;
  size_t minBytes, maxBytes;
  size_t stepFactor; /* -f, used when stepBytes is 0 */
  size_t stepBytes;  /* -i */
  int iters, warmup, check, blocking, average, root;
  int timeoutSeconds; /* 0: not given (the library's default applies) */
  int nTypes;
  gbDataType_t types[gbNumTypes];
  int nOps;
  gbRedOp_t ops[gbNumOps];
  const char* jsonPath; /* NULL: none */
} perfOptions_t;

/* Parses argv. Returns 0 to run, 1 when -h printed the usage (exit 0), or
 * PERF_EXIT_USAGE after printing why the command line is wrong. */
int perfOptionsParse(int argc, char** argv, perfOptions_t* opts);

/* The sizes to run for one element size: -b to -e by -f or -i, each rounded
 * down to whole elements (at least one), repeats dropped. Start with *raw = 0;
 * each call sets *bytes to the next size and returns 1, or returns 0 at the end. */
int perfOptionsNextSize(const perfOptions_t* opts, size_t elemSize, size_t* raw, size_t* bytes);

/* The largest byte count any size of any type may need. */
size_t perfOptionsMaxBytes(const perfOptions_t* opts);

const char* perfCollName(perfColl_t coll);

/* ------------------------------------------------------------------- types */

size_t perfTypeSize(gbDataType_t dt);
const char* perfTypeName(gbDataType_t dt); /* nccl-tests' names: "float", "half" */
int perfTypeIsFloat(gbDataType_t dt);
const char* perfOpName(gbRedOp_t op);
/* Whether gpubridge defines op on dt (avg needs a floating type). */
int perfOpValid(gbRedOp_t op, gbDataType_t dt);

/* The bits of one element of dt for an exact value: integers wrap modulo
 * 2^bits, floating types round to nearest even. */
uint64_t perfTypeBitsFromInt(gbDataType_t dt, int64_t v);
uint64_t perfTypeBitsFromDouble(gbDataType_t dt, double v);
/* The value of one element's bits, for messages. */
double perfTypeBitsToDouble(gbDataType_t dt, uint64_t bits);
/* Reads or writes element i of a host buffer as bits. */
uint64_t perfTypeLoad(const void* buf, size_t i, gbDataType_t dt);
void perfTypeStore(void* buf, size_t i, gbDataType_t dt, uint64_t bits);

/* ----------------------------------------------------------------- buffers */

/* A device buffer between two guard areas. */
typedef struct {
  unsigned char* base; /* from gbMemAlloc: guard, capacity bytes, guard */
  unsigned char* data;
  size_t capacity;
} perfBuffer_t;

#define PERF_GUARD_BYTES 4096

void perfBufferAlloc(perfBuffer_t* buf, size_t capacity);
void perfBufferFree(perfBuffer_t* buf);
/* Writes the guard pattern around the buffer and over the unused bytes just
 * past `bytes` (up to PERF_GUARD_BYTES of them), so an overrun of the current
 * size is caught too. */
void perfBufferGuardSet(perfBuffer_t* buf, size_t bytes);
/* Counts the guard bytes that changed since perfBufferGuardSet(buf, bytes). */
uint64_t perfBufferGuardCheck(const perfBuffer_t* buf, size_t bytes);

/* What one check run compares against. */
typedef struct {
  perfColl_t coll;
  gbDataType_t dt;
  gbRedOp_t op;
  int root;
  int rank, nranks;
} perfCheckSpec_t;

/* Host scratch big enough for the largest size; owned by the caller. */
typedef struct {
  void* host;
  size_t capacity;
} perfHost_t;

/* Fills the first count elements of buf with this rank's input for spec. */
void perfBufferFillInput(perfBuffer_t* buf, size_t count, const perfCheckSpec_t* spec, perfHost_t* host);
/* Fills buf with a value no correct result equals. */
void perfBufferPoison(perfBuffer_t* buf, size_t bytes, perfHost_t* host);
/* Counts the elements of buf that differ from the expected result. */
uint64_t perfBufferCheck(const perfBuffer_t* buf, size_t count, const perfCheckSpec_t* spec,
                         perfHost_t* host, const char* where);

/* ------------------------------------------------------------------- ranks */

typedef struct {
  gbComm_t comm;
  void* stream;
  gbTopology_t topo;
  void* scratch; /* device memory for the small combining collectives */
  size_t scratchBytes;
} perfCtx_t;

/* Unless res is gbSuccess: prints "gpubridge-perf: <call> failed: <code>:
 * <last error>" to stderr, aborts the communicator given to perfCheckUseComm
 * (so the other ranks stop waiting for this one), and exits 1. */
void perfCheck(gbResult_t res, const char* call);
void perfCheckUseComm(gbComm_t comm);
/* Synchronizes ctx's stream and fails on an asynchronous error. */
void perfSync(perfCtx_t* ctx);

/* values[k] = op over ranks of values[k], for n values. op: gbSum, gbMin, gbMax. */
void perfRanksCombineDouble(perfCtx_t* ctx, double* values, int n, gbRedOp_t op);
void perfRanksSumU64(perfCtx_t* ctx, uint64_t* values, int n);

/* One rank's description, gathered for the header. */
typedef struct {
  int32_t pid;
  char host[60];
} perfRankInfo_t;

/* Returns a malloc'd array of nranks records, the same on every rank. */
perfRankInfo_t* perfRanksGather(perfCtx_t* ctx);

/* ------------------------------------------------------------------- table */

typedef struct {
  double timeUs, algBw, busBw;
  uint64_t wrong;
} perfHalf_t;

typedef struct {
  size_t bytes, count;
  gbDataType_t dt;
  gbRedOp_t op;
  int root; /* -1 for all-reduce */
  perfHalf_t outOfPlace, inPlace;
} perfRow_t;

typedef struct {
  FILE* json; /* NULL: none */
  int check;
  int simulated;
  int splitTest; /* a one-vendor job relabelled into islands: every result says so */
  int emulatedAmd; /* an island runs on the emulated-AMD test rig: every result says so */
  double busBwSum;
  int busBwCount;
} perfTable_t;

const char* perfRunKindName(int runKind);
/* Whether an island is the emulated-AMD test rig (its label says "emulated"). */
int perfHasEmulatedIsland(const gbTopology_t* t);
const char* perfPolicyName(int policy);
void perfTableHeader(const perfOptions_t* opts, const perfCtx_t* ctx, const perfRankInfo_t* ranks);
void perfTableRow(perfTable_t* table, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRow_t* row);
void perfTableFooter(perfTable_t* table, uint64_t outOfBounds);

/* ------------------------------------------------------------------- bench */

typedef struct {
  perfBuffer_t send, recv;
  perfHost_t host;
  uint64_t outOfBounds; /* summed over ranks */
  uint64_t wrong;       /* summed over ranks and results */
} perfState_t;

/* Runs every size for one type, op and root, printing rows on rank 0. */
void perfBenchSweep(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* state,
                    perfTable_t* table, gbDataType_t dt, gbRedOp_t op, int root);

#endif
