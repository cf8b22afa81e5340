/* gpubridge-perf: an nccl-tests-style benchmark of gpubridge's collectives.
 * Uses only the public API (gpubridge/gpubridge.h). The pieces:
 *   options.c     command line (parsed before init, so bad flags fail alike everywhere)
 *   colls.c       the collectives: names, sizes, bus factors, in-place layout, the calls
 *   types.c       data type and op tables, float16/bfloat16 encodings
 *   pattern.c     check inputs and expected results, computed independently
 *   buffers.c     device buffers with guard areas, fill and compare
 *   fixed.c       nccl-tests flags taken only at fixed values (-t 1, -g 1, ...)
 *   join.c        joining the job: a launcher's variables, or one rank alone
 *   ranks.c       small collectives that combine per-rank numbers
 *   describe.c    what each rank runs on: host, device, vendor library version
 *   meta.c        run metadata: version, mode, GPUBRIDGE_* variables
 *   table.c       the printed table and the JSON lines
 *   measure.c     one timed or checked run of a collective
 *   phases.c      --phases: rank 0's time per phase, from the flight recorder
 *   events.c      timing with device events on real GPUs
 *   bench.c       one (type, op, root) sweep over the sizes, with --baseline
 *   progress.c    --progress: rank 0's size k of n and time left, on stderr
 *   tune.c        --tune: the fastest all-reduce policy per size
 *   thresholds.c  the thresholds file --tune writes
 *   vendor.c      NCCL or RCCL alone, loaded with dlopen, for --baseline
 *   main.c        init, the sweeps, the exit status */
#ifndef GB_PERF_PERF_H
#define GB_PERF_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "gpubridge/gpubridge.h"

#define PERF_EXIT_USAGE 2

/* ------------------------------------------------------------- collectives */

typedef enum {
  PERF_ALL_REDUCE = 0,
  PERF_BROADCAST,
  PERF_REDUCE,
  PERF_ALL_GATHER,
  PERF_REDUCE_SCATTER,
  PERF_ALLTOALL,
  PERF_SENDRECV,
  PERF_NUM_COLLS
} perfColl_t;

const char* perfCollName(perfColl_t coll); /* nccl-tests' name: "all_reduce" */
/* Returns 0 and sets *coll for a known name (nccl-tests' or without the '_'). */
int perfCollFromName(const char* name, perfColl_t* coll);
const char* perfCollCall(perfColl_t coll); /* "gbAllReduce" */
int perfCollReduces(perfColl_t coll);   /* takes -o */
int perfCollRooted(perfColl_t coll);    /* takes -r */
int perfCollHasInPlace(perfColl_t coll); /* the header defines an in-place form */
/* 1, or nranks where the size is the total of nranks equal parts (count each). */
int perfCollParts(perfColl_t coll, int nranks);
/* nccl-tests' busbw / algbw. */
double perfCollBusFactor(perfColl_t coll, int nranks);

/* Elements of one rank's buffers for a call with `count`, and where its send
 * and receive pointers sit in the one buffer of an in-place call. */
typedef struct {
  size_t sendElems, recvElems;
  size_t sendOff, recvOff; /* in place: send = buf + sendOff, recv = buf + recvOff */
  size_t inPlaceElems;     /* elements of that one buffer */
} perfLayout_t;

void perfCollLayout(perfColl_t coll, size_t count, int rank, int nranks, perfLayout_t* layout);

/* Enqueues one call of coll on gpubridge. */
gbResult_t perfCollEnqueue(perfColl_t coll, const void* send, void* recv, size_t count, gbDataType_t dt,
                           gbRedOp_t op, int root, gbComm_t comm, void* stream);

/* ----------------------------------------------------------------- options */

/* -a: how the ranks' times are combined into the printed one. */
typedef enum { PERF_AVG_RANK0 = 0, PERF_AVG_MEAN = 1, PERF_AVG_MIN = 2, PERF_AVG_MAX = 3 } perfAverage_t;

typedef struct {
  perfColl_t coll;
  size_t minBytes, maxBytes;
  size_t stepFactor; /* -f, used when stepBytes is 0 */
  size_t stepBytes;  /* -i */
  int iters, warmup, blocking, average, root;
  int check;          /* -c: check runs per size and form before timing, stopping at a wrong one (0: none) */
  int cycles;         /* -N: times the whole sweep runs */
  int events;         /* -E: time with device events where every rank has them */
  int timeoutSeconds; /* 0: not given (the library's default applies) */
  int nTypes;
  gbDataType_t types[gbNumTypes];
  int nOps;
  gbRedOp_t ops[gbNumOps];
  const char* jsonPath;  /* NULL: none */
  const char* tunePath;  /* --tune FILE; NULL: none */
  int baseline;          /* --baseline */
  int phases;            /* --phases */
  int progress;          /* --progress: 1 on, 0 off, -1 (default) when stderr is a terminal */
  int version;           /* --version on the rank that prints it */
} perfOptions_t;

/* fixed.c: nccl-tests flags gpubridge-perf accepts only at the values that
 * mean what it does anyway (-t 1, -g 1, -G 0, ...). */
typedef struct {
  int flag;             /* 't' */
  const char* longName; /* "nthreads" */
  int lo, hi;           /* the values accepted */
  const char* what;     /* what the flag sets, for messages */
  const char* why;      /* why other values are refused, and what to do; NULL: a range (-p), or -t/-g */
} perfFixedFlag_t;

extern const perfFixedFlag_t perfFixedFlags[];
extern const int perfFixedFlagCount;
const perfFixedFlag_t* perfFixedFlagFind(int flag); /* NULL: not one of them */
/* 0 if value is accepted; else -1 with the message in why. */
int perfFixedFlagCheck(const perfFixedFlag_t* f, const char* value, char* why, size_t len);

/* Parses argv. Returns 0 to run, 1 when -h printed the usage or --version
 * asked for the version (opts->version: print it; exit 0), or
 * PERF_EXIT_USAGE after printing why the command line is wrong. */
int perfOptionsParse(int argc, char** argv, perfOptions_t* opts);

/* The sizes to run for a unit of `unit` bytes (an element, or one element per
 * part): -b to -e by -f or -i, each rounded down to whole units (at least one),
 * repeats dropped. Start with *raw = 0; each call sets *bytes to the next size
 * and returns 1, or returns 0 at the end. */
int perfOptionsNextSize(const perfOptions_t* opts, size_t unit, size_t* raw, size_t* bytes);

/* The largest byte count any buffer of any size and type may need. */
size_t perfOptionsMaxBytes(const perfOptions_t* opts, int nranks);

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

/* ----------------------------------------------------------------- pattern */

/* What one check run compares against. */
typedef struct {
  perfColl_t coll;
  gbDataType_t dt;
  gbRedOp_t op;
  int root;
  int rank, nranks;
  size_t count; /* the call's count */
} perfCheckSpec_t;

/* The input and expected values of a check run, as element bits. */
typedef struct perfPattern perfPattern_t;

perfPattern_t* perfPatternCreate(const perfCheckSpec_t* spec);
void perfPatternDestroy(perfPattern_t* p);
const perfCheckSpec_t* perfPatternSpec(const perfPattern_t* p);
/* Whether this rank sends data (a broadcast's non-roots hold poison). */
int perfPatternHasInput(const perfPattern_t* p);
/* Element i of this rank's send buffer. */
uint64_t perfPatternInput(const perfPattern_t* p, size_t i);
/* Element i of this rank's receive buffer after the call. Where the call must
 * not write (a reduce's non-roots) that is what was there: the input in place,
 * poison out of place. */
uint64_t perfPatternExpected(const perfPattern_t* p, size_t i, int inPlace);
/* The bits of a poisoned element. */
uint64_t perfPatternPoison(const perfPattern_t* p);
/* Differences of one unit in the last place that are accepted (avg on the
 * 16-bit floats divides in float and rounds once more). */
int perfPatternSlack(const perfPattern_t* p);

/* ----------------------------------------------------------------- buffers */

/* A device buffer between two guard areas. */
typedef struct {
  unsigned char* base; /* from gbMemAlloc: guard, capacity bytes, guard */
  unsigned char* data;
  size_t capacity;
} perfBuffer_t;

#define PERF_GUARD_BYTES 4096
/* Every byte of a poisoned element: no correct result equals it. */
#define PERF_POISON_BYTE 0xEE

void perfBufferAlloc(perfBuffer_t* buf, size_t capacity);
void perfBufferFree(perfBuffer_t* buf);
/* Writes the guard pattern around the buffer and over the unused bytes just
 * past `bytes` (up to PERF_GUARD_BYTES of them), so an overrun of the current
 * size is caught too. */
void perfBufferGuardSet(perfBuffer_t* buf, size_t bytes);
/* Counts the guard bytes that changed since perfBufferGuardSet(buf, bytes). */
uint64_t perfBufferGuardCheck(const perfBuffer_t* buf, size_t bytes);

/* Host scratch big enough for the largest size; owned by the caller. */
typedef struct {
  void* host;
  size_t capacity;
} perfHost_t;

/* Fills elems elements from element `at` of buf with a value no correct result
 * equals. */
void perfBufferPoison(perfBuffer_t* buf, size_t at, size_t elems, gbDataType_t dt, perfHost_t* host);
/* Writes this rank's input into elems elements from element `at`. */
void perfBufferFillInput(perfBuffer_t* buf, size_t at, size_t elems, const perfPattern_t* p, perfHost_t* host);
/* Counts the elements from `at` that differ from the expected result of an
 * in-place or out-of-place call; the first one is reported on stderr. */
uint64_t perfBufferCheck(const perfBuffer_t* buf, size_t at, size_t elems, const perfPattern_t* p, int inPlace,
                         perfHost_t* host);

/* ------------------------------------------------------------------- ranks */

typedef struct perfEvents perfEvents_t;

typedef struct {
  gbComm_t comm;
  void* stream;
  perfEvents_t* events; /* device-event timer; NULL: the host clock */
  char timing[200];     /* how times are taken, for the header and the JSON */
  gbTopology_t topo;
  void* scratch; /* device memory for the small combining collectives */
  size_t scratchBytes;
  int alone;     /* started without a launcher: a job of one rank (join.c) */
} perfCtx_t;

/* join.c. The first launcher variable set (RANK, SLURM_PROCID,
 * OMPI_COMM_WORLD_RANK, PMI_RANK, GPUBRIDGE_UNIQUE_ID, ...), or NULL. */
const char* perfJoinLauncherVar(void);
/* Creates ctx->comm: gbCommInitFromEnv under a launcher; with none, a job of
 * one rank (gbGetUniqueId, gbCommInitRankConfig) and ctx->alone = 1. Fails
 * the process on an error. */
void perfJoin(perfCtx_t* ctx, gbConfig_t* config);

/* Unless res is gbSuccess: prints "gpubridge-perf: <call> failed: <code>:
 * <last error>" to stderr, aborts the communicator given to perfCheckUseComm
 * (so the other ranks stop waiting for this one), and exits 1. */
void perfCheck(gbResult_t res, const char* call);
void perfCheckUseComm(gbComm_t comm);
/* Prints "gpubridge-perf: <why>" and stops like a failed perfCheck. */
void perfFail(const char* why);
/* Synchronizes ctx's stream and fails on an asynchronous error of comm. */
void perfSyncComm(perfCtx_t* ctx, gbComm_t comm);
void perfSync(perfCtx_t* ctx); /* of ctx->comm */

/* values[k] = op over ranks of values[k], for n values. op: gbSum, gbMin, gbMax. */
void perfRanksCombineDouble(perfCtx_t* ctx, double* values, int n, gbRedOp_t op);
void perfRanksSumU64(perfCtx_t* ctx, uint64_t* values, int n);
/* Copies n bytes of root's data to every rank's data. */
void perfRanksBroadcast(perfCtx_t* ctx, void* data, size_t n, int root);

/* events.c. The device-event timer of a real GPU rank (start and stop events
 * of the runtime gpubridge loaded), or NULL with why where there is none. */
perfEvents_t* perfEventsOpen(const gbTopology_t* t, char* why, size_t whyLen);
/* Records the start (which = 0) or stop (1) event on stream; 0 or -1. */
int perfEventsRecord(perfEvents_t* e, int which, void* stream);
/* Seconds from start to stop once stop completed; < 0 on failure. */
double perfEventsElapsed(perfEvents_t* e);
const char* perfEventsRuntime(const perfEvents_t* e); /* "cuda", "hip" */
void perfEventsClose(perfEvents_t* e);
/* Sets ctx->events and ctx->timing: device events when -E 1 and every rank
 * has them, else the host clock on every rank (the ranks agree first). */
void perfEventsSetup(perfCtx_t* ctx, const perfOptions_t* opts);

/* One rank's description, gathered for the header. */
typedef struct {
  int32_t pid;
  char host[60];
  char device[64];  /* "simulated nvidia", "NVIDIA H200 (0000:1a:00.0)" */
  char library[32]; /* "NCCL 2.28.3"; "" when simulated */
} perfRankInfo_t;

/* describe.c: the library named by envVar, else the first of names (NULL
 * ended), that this process has loaded already (RTLD_NOLOAD: never a second
 * copy), or NULL. dlclose the handle when done. */
void* perfLoadedLibrary(const char* envVar, const char* const* names);
extern const char* const perfHipNames[]; /* libamdhip64.so.7, .6, .so */

/* Fills this rank's record (describe.c). */
void perfDescribeSelf(const perfCtx_t* ctx, perfRankInfo_t* mine);
/* Returns a malloc'd array of nranks records, the same on every rank. */
perfRankInfo_t* perfRanksGather(perfCtx_t* ctx);

/* -------------------------------------------------------------------- meta */

const char* perfRunKindName(int runKind);
/* Whether an island is the emulated-AMD test rig (its label says "emulated"). */
int perfHasEmulatedIsland(const gbTopology_t* t);
const char* perfPolicyName(int policy);
/* "simulated", "real", "real split-test", "real emulated-AMD". */
void perfModeLabel(const gbTopology_t* t, char* buf, size_t len);
/* "nvidia:2,amd:2": each island's vendor and size, in island order. */
void perfLayoutLabel(const gbTopology_t* t, char* buf, size_t len);
/* Now, UTC, as 2026-11-30T23:59:00Z. */
void perfDateText(char* buf, size_t len);
/* The '#' lines of version, mode, date and rank 0's GPUBRIDGE_* variables. */
void perfMetaPrint(const perfCtx_t* ctx);
/* The JSON file's first line: {"meta": {...}}. */
void perfMetaJson(FILE* f, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRankInfo_t* ranks);
/* s as a JSON string, quotes included. */
void perfJsonString(FILE* f, const char* s);

/* ------------------------------------------------------------------ phases */

/* Consecutive spans of a call (phases.c says where each begins and ends). */
typedef enum {
  PERF_PHASE_CHECK = 0,
  PERF_PHASE_ISLAND,
  PERF_PHASE_WAIT,
  PERF_PHASE_BRIDGE,
  PERF_PHASE_AFTER,
  PERF_NUM_PHASES
} perfPhase_t;

typedef struct {
  int records;                /* calls averaged; 0: none */
  double us[PERF_NUM_PHASES]; /* mean microseconds per call */
} perfPhases_t;

const char* perfPhaseName(perfPhase_t p); /* "check", "island", "wait", "bridge", "after" */
/* With --phases: stops every rank alike (exit 2) when rank 0 cannot read its
 * flight recorder (GPUBRIDGE_TRACE_BUFFER=0, or a library without one). Collective. */
void perfPhasesSetup(perfCtx_t* ctx, const perfOptions_t* opts);
/* The mean phases of the newest `calls` records of comm, which must be calls
 * of coll (gbCollKind_t has perfColl_t's order). blocking 0: the calls queued
 * behind each other, so each starts when the previous one was done. */
void perfPhasesRead(gbComm_t comm, perfColl_t coll, int calls, int blocking, perfPhases_t* out);

/* ------------------------------------------------------------------- table */

typedef struct {
  int ran; /* 0: no such form (in place of sendrecv): printed N/A */
  double timeUs, algBw, busBw;
  uint64_t wrong;
  perfPhases_t phases; /* --phases, gpubridge's rows on rank 0 */
} perfHalf_t;

typedef struct {
  size_t bytes, count;
  gbDataType_t dt;
  gbRedOp_t op;
  int root; /* -1 where the collective has none */
  perfHalf_t outOfPlace, inPlace;
} perfRow_t;

typedef struct {
  FILE* json; /* NULL: none */
  int check;
  int simulated;
  int splitTest; /* a one-vendor job relabelled into islands: every result says so */
  int emulatedAmd; /* an island runs on the emulated-AMD test rig: every result says so */
  int phases;      /* --phases: the phase columns and JSON objects */
  double busBwSum;
  int busBwCount;
} perfTable_t;

void perfTableHeader(const perfOptions_t* opts, const perfCtx_t* ctx, const perfRankInfo_t* ranks);
/* baseline and its label are NULL unless --baseline. */
void perfTableRow(perfTable_t* table, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRow_t* row,
                  const perfRow_t* baseline, const char* baselineLabel);
void perfTableFooter(perfTable_t* table, uint64_t outOfBounds);

/* ---------------------------------------------------------------- baseline */

/* The vendor library (NCCL or RCCL) alone, over the same ranks. */
typedef struct perfVendor perfVendor_t;

/* The library an island's vendor label uses: "nccl", "rccl", or NULL. */
const char* perfVendorLibraryOf(const char* islandVendor);
/* "NCCL 2.28.3" for lib ("nccl" or "rccl") into buf; "" when it cannot be loaded. */
void perfVendorVersionText(const char* lib, char* buf, size_t len);
/* Loads lib and creates its communicator over ctx's ranks (rank 0 makes the id,
 * gbBroadcast hands it on). Collective. Fails the job on an error. */
perfVendor_t* perfVendorCreate(perfCtx_t* ctx, const char* lib);
void perfVendorDestroy(perfVendor_t* v);
const char* perfVendorLabel(const perfVendor_t* v); /* "nccl-2.28.3" */
/* Enqueues one call of coll through the vendor library; fails the job on an error. */
void perfVendorEnqueue(perfVendor_t* v, const perfCtx_t* ctx, perfColl_t coll, const void* send, void* recv,
                       size_t count, gbDataType_t dt, gbRedOp_t op, int root, void* stream);

/* ----------------------------------------------------------------- measure */

typedef struct {
  perfBuffer_t send, recv;
  perfHost_t host;
  uint64_t outOfBounds; /* summed over ranks */
  uint64_t wrong;       /* summed over ranks and results */
} perfState_t;

/* One collective as measured: on a gpubridge communicator, or the vendor library. */
typedef struct {
  perfCtx_t* ctx;
  const perfOptions_t* opts;
  perfColl_t coll;
  gbDataType_t dt;
  gbRedOp_t op;
  int root;
  gbComm_t comm;        /* gpubridge: ctx->comm, or a --tune child */
  perfVendor_t* vendor; /* non-NULL: the vendor library instead */
} perfRun_t;

/* Average seconds per iteration on this rank: -w warm-up calls, then -n timed
 * ones enqueued (synchronizing after each with -z 1) and one synchronize.
 * phases: NULL, or where the timed calls' mean phases go (phases.c). */
double perfMeasureTime(const perfRun_t* r, perfState_t* st, size_t count, int inPlace, perfPhases_t* phases);
/* One call with fresh inputs; returns this rank's wrong elements. */
uint64_t perfMeasureCheck(const perfRun_t* r, perfState_t* st, size_t count, int inPlace);
/* The printed time from every rank's, as -a says. Collective. */
void perfMeasureCombine(perfCtx_t* ctx, const perfOptions_t* opts, double* t, int n);

/* ------------------------------------------------------------------- bench */

/* Runs every size for one type, op and root, printing rows on rank 0. */
void perfBenchSweep(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* state, perfTable_t* table,
                    perfVendor_t* baseline, gbDataType_t dt, gbRedOp_t op, int root);

/* -------------------------------------------------------------------- tune */

#define PERF_TUNE_MAX_POLICIES 4

/* The winner at each measured size, in increasing size order. */
typedef struct {
  size_t bytes;
  int policy; /* a gbPolicy_t */
} perfTunePoint_t;

/* --tune: measures every candidate policy and writes the thresholds to out
 * (rank 0's, closed here; NULL elsewhere); the measured table goes to stdout
 * and, one object a size, to json. */
void perfTuneRun(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* st, FILE* out, FILE* json);
/* Writes the thresholds file for the points to f: ranges from 0 to "-"
 * (unbounded), a boundary at each size where the winner changes. */
void perfThresholdsWrite(FILE* f, const perfTunePoint_t* points, int n, const char* collective,
                         const char* date, int nranks, const char* layout);

/* ---------------------------------------------------------------- progress */

typedef struct {
  int on, terminal, done, total;
  const char* what;
  double start, costDone, costLeft;
} perfProgress_t;

/* Counts the sweep's sizes; on only on rank 0, as opts->progress says. */
void perfProgressStart(perfProgress_t* p, const perfOptions_t* opts, int rank, size_t unit, const char* what);
/* Before each size: size k of n, and the time left once one size has run. */
void perfProgressSize(perfProgress_t* p, size_t bytes);
/* Clears a terminal's progress line before a table row is printed. */
void perfProgressClear(perfProgress_t* p);

#endif
