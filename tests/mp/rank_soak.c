/* One rank of the soak (tests/mp/test_soak.py) and of the running job of the
 * wire fuzzer (tests/mp/test_fuzz_wire.py).
 *
 * Usage: rank_soak --layout V0,V1,... --seconds S [--seed N] [--max-count N]
 *                  [--split-every K] [--warm-fraction F]
 *                  [--wait-file R:PATH] [--root-port-for-rank R:PORT]
 *
 * Runs mixed collectives on the world communicator for S seconds: all-reduce
 * (every dtype and op; the expected bits follow the documented reduction
 * order of the resolved policy, rank_common.h), broadcast, reduce,
 * all-gather, reduce-scatter (integer types, where the order cannot matter),
 * all-to-all, send/recv rings with a random shift, and every K-th operation a
 * gbCommSplit with an all-reduce on the child. The operation, count, dtype,
 * op and root of step i come from the seed and i alone, so every rank makes
 * the same calls; every 16 steps a max all-reduce of "my time is up" decides
 * together whether to stop. Every result is compared bit for bit.
 *
 * Prints "mem: warm <meter> last <meter>" (measured once the warm-up
 * fraction of S has passed, and at the end, after the last synchronize) and
 * "ok: rank R: N operations (...) in T s", or "rank R: FAIL: ..." and exits 1.
 * A failed init prints "init error after X s: <text>" and exits 1.
 *
 * --wait-file R:PATH: rank R waits for PATH before init (the root keeps
 * gathering). --root-port-for-rank R:PORT: rank R reaches the rendezvous root
 * at PORT instead of MASTER_PORT (a recording relay of the fuzzer). */
#include <stdint.h>

#include "rank_common.h"
#include "rank_meter.h"

enum { OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL, OP_SENDRECV, OP_SPLIT,
       NUM_OPS };
static const char* kindNames[NUM_OPS] = {"allreduce", "broadcast",  "reduce",   "allgather",
                                         "reducescatter", "alltoall", "sendrecv", "split"};

typedef struct {
  gbComm_t comm;
  void* stream;
  int rank, policy;
  size_t maxCount, cap; /* cap: bytes of each buffer (n * maxCount * 8) */
  void *dSend, *dRecv;
  char *in, *got, *want, *tmp;
  long done[NUM_OPS];
} soak_t;

static void syncAndCheck(soak_t* S, gbComm_t comm, const char* what) {
  gbResult_t res = gbStreamSynchronize(S->stream);
  if (res != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", what, (int)res, gbGetLastError(comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", what, (int)async, gbGetLastError(comm));
}

#define CALL(what, comm, call)                                                                   \
  do {                                                                                           \
    gbResult_t r_ = (call);                                                                      \
    if (r_ != gbSuccess) DIE("%s: %s returned %d: %s", what, #call, (int)r_, gbGetLastError(comm)); \
  } while (0)

/* Integer dtypes and the ops whose result does not depend on the order. */
static const int intTypes[] = {gbInt8, gbUint8, gbInt32, gbUint32, gbInt64, gbUint64};
static const int intOps[] = {gbSum, gbProd, gbMax, gbMin};

/* want = op over ranks r of input(r)[pos, pos+len), for integer types. */
static void foldRanks(const int* ranks, int n, int caseIdx, size_t pos, size_t len, int dt, int op, void* want,
                      void* tmp) {
  genInput(inputKey(ranks[0], caseIdx), pos, len, dt, want);
  for (int k = 1; k < n; k++) {
    genInput(inputKey(ranks[k], caseIdx), pos, len, dt, tmp);
    refFold(want, tmp, len, dt, op);
  }
}

static void stepAllReduce(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = (int)(x % gbNumTypes), op = (int)((x >> 8) % gbNumOps);
  if (op == gbAvg && !isFloat(dt)) op = gbSum;
  int inPlace = (int)((x >> 16) & 1);
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: allreduce %s %s count %zu%s", caseIdx, dtNames[dt], opNames[op], count,
           inPlace ? " in place" : "");
  genInput(inputKey(S->rank, caseIdx), 0, count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(inPlace ? S->dRecv : S->dSend, S->in, count * es));
  CALL(what, S->comm, gbAllReduce(inPlace ? S->dRecv : S->dSend, S->dRecv, count, dt, op, S->comm, S->stream));
  syncAndCheck(S, S->comm, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, count * es));
  gCall.dt = dt;
  gCall.op = op; /* avg folds as sum; expectedAllReduce divides at the end */
  gCall.es = es;
  gCall.preMul = 0;
  expectedAllReduce(S->policy, caseIdx, count, S->want);
  compare(what, S->got, S->want, count, dt);
}

static void stepBroadcast(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = (int)(x % gbNumTypes), root = (int)((x >> 8) % (uint64_t)gN);
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: broadcast %s count %zu root %d", caseIdx, dtNames[dt], count, root);
  genInput(inputKey(S->rank, caseIdx), 0, count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, count * es));
  CALL(what, S->comm, gbBroadcast(S->dSend, S->dRecv, count, dt, root, S->comm, S->stream));
  syncAndCheck(S, S->comm, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, count * es));
  genInput(inputKey(root, caseIdx), 0, count, dt, S->want);
  compare(what, S->got, S->want, count, dt);
}

static void stepReduce(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = intTypes[x % 6], op = intOps[(x >> 8) % 4], root = (int)((x >> 16) % (uint64_t)gN);
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: reduce %s %s count %zu root %d", caseIdx, dtNames[dt], opNames[op], count,
           root);
  genInput(inputKey(S->rank, caseIdx), 0, count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, count * es));
  CALL(what, S->comm, gbReduce(S->dSend, S->dRecv, count, dt, op, root, S->comm, S->stream));
  syncAndCheck(S, S->comm, what);
  if (S->rank != root) return;
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, count * es));
  foldRanks(gAll, gN, caseIdx, 0, count, dt, op, S->want, S->tmp);
  compare(what, S->got, S->want, count, dt);
}

static void stepAllGather(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = (int)(x % gbNumTypes);
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: allgather %s count %zu", caseIdx, dtNames[dt], count);
  genInput(inputKey(S->rank, caseIdx), 0, count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, count * es));
  CALL(what, S->comm, gbAllGather(S->dSend, S->dRecv, count, dt, S->comm, S->stream));
  syncAndCheck(S, S->comm, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, (size_t)gN * count * es));
  for (int r = 0; r < gN; r++) genInput(inputKey(r, caseIdx), 0, count, dt, S->want + (size_t)r * count * es);
  compare(what, S->got, S->want, (size_t)gN * count, dt);
}

static void stepReduceScatter(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = intTypes[x % 6], op = intOps[(x >> 8) % 4];
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: reducescatter %s %s recvcount %zu", caseIdx, dtNames[dt], opNames[op],
           count);
  genInput(inputKey(S->rank, caseIdx), 0, (size_t)gN * count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, (size_t)gN * count * es));
  CALL(what, S->comm, gbReduceScatter(S->dSend, S->dRecv, count, dt, op, S->comm, S->stream));
  syncAndCheck(S, S->comm, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, count * es));
  foldRanks(gAll, gN, caseIdx, (size_t)S->rank * count, count, dt, op, S->want, S->tmp);
  compare(what, S->got, S->want, count, dt);
}

static void stepAllToAll(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = (int)(x % gbNumTypes);
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: alltoall %s count %zu", caseIdx, dtNames[dt], count);
  genInput(inputKey(S->rank, caseIdx), 0, (size_t)gN * count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, (size_t)gN * count * es));
  CALL(what, S->comm, gbAllToAll(S->dSend, S->dRecv, count, dt, S->comm, S->stream));
  syncAndCheck(S, S->comm, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, (size_t)gN * count * es));
  for (int r = 0; r < gN; r++)
    genInput(inputKey(r, caseIdx), (size_t)S->rank * count, count, dt, S->want + (size_t)r * count * es);
  compare(what, S->got, S->want, (size_t)gN * count, dt);
}

/* A ring shifted by k: send to rank+k, receive from rank-k, in one group. */
static void stepSendRecv(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int dt = (int)(x % gbNumTypes);
  int k = gN > 1 ? 1 + (int)((x >> 8) % (uint64_t)(gN - 1)) : 0;
  int to = (S->rank + k) % gN, from = (S->rank - k + gN) % gN;
  size_t es = dtSizes[dt];
  char what[160];
  snprintf(what, sizeof(what), "step %d: send/recv %s count %zu shift %d", caseIdx, dtNames[dt], count, k);
  genInput(inputKey(S->rank, caseIdx), 0, count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, count * es));
  CHECK_GB(gbGroupStart());
  CALL(what, S->comm, gbSend(S->dSend, count, dt, to, S->comm, S->stream));
  CALL(what, S->comm, gbRecv(S->dRecv, count, dt, from, S->comm, S->stream));
  CALL(what, S->comm, gbGroupEnd());
  syncAndCheck(S, S->comm, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, count * es));
  genInput(inputKey(from, caseIdx), 0, count, dt, S->want);
  compare(what, S->got, S->want, count, dt);
}

/* Colors 0..2 (some steps leave one rank out with GB_SPLIT_NOCOLOR), keys
 * from the step; the child runs one integer all-reduce and is destroyed. */
static void stepSplit(soak_t* S, int caseIdx, uint64_t x, size_t count) {
  int ncolors = 1 + (int)(x % 3), out = (x >> 4) & 1 ? (int)((x >> 8) % (uint64_t)gN) : -1;
  int color[MAX_RANKS], key[MAX_RANKS];
  for (int r = 0; r < gN; r++) {
    color[r] = r == out ? GB_SPLIT_NOCOLOR : (int)(mix64(x ^ (uint64_t)r) % (uint64_t)ncolors);
    key[r] = (int)(mix64(x + 77 + (uint64_t)r) % 5); /* ties broken by parent rank */
  }
  char what[160];
  snprintf(what, sizeof(what), "step %d: split into %d colors (rank %d out) + allreduce count %zu", caseIdx, ncolors,
           out, count);
  gbComm_t child = NULL;
  CALL(what, S->comm, gbCommSplit(S->comm, color[S->rank], key[S->rank], &child, NULL));
  if (color[S->rank] == GB_SPLIT_NOCOLOR) {
    if (child != NULL) DIE("%s: a NOCOLOR rank got a communicator", what);
    return;
  }
  /* The child's members in child rank order: by key, then parent rank. */
  int members[MAX_RANKS], n = 0;
  for (int kk = 0; kk < 5; kk++)
    for (int r = 0; r < gN; r++)
      if (color[r] == color[S->rank] && key[r] == kk) members[n++] = r;
  int cn = -1, cr = -1;
  CALL(what, child, gbCommCount(child, &cn));
  CALL(what, child, gbCommUserRank(child, &cr));
  if (cn != n || cr < 0 || cr >= n || members[cr] != S->rank)
    DIE("%s: child has %d ranks and calls me %d, expected %d ranks", what, cn, cr, n);
  int dt = intTypes[(x >> 12) % 6];
  size_t es = dtSizes[dt];
  genInput(inputKey(S->rank, caseIdx), 0, count, dt, S->in);
  CHECK_GB(gbMemcpyToDevice(S->dSend, S->in, count * es));
  CALL(what, child, gbAllReduce(S->dSend, S->dRecv, count, dt, gbSum, child, S->stream));
  syncAndCheck(S, child, what);
  CHECK_GB(gbMemcpyToHost(S->got, S->dRecv, count * es));
  foldRanks(members, n, caseIdx, 0, count, dt, gbSum, S->want, S->tmp);
  compare(what, S->got, S->want, count, dt);
  CALL(what, child, gbCommDestroy(child));
}

/* Whether every rank agrees it is time to stop (any rank's clock decides). */
static int timeUp(soak_t* S, double end) {
  int32_t mine = nowS() >= end ? 1 : 0, all = -1;
  CHECK_GB(gbMemcpyToDevice(S->dSend, &mine, sizeof(mine)));
  CALL("stop vote", S->comm, gbAllReduce(S->dSend, S->dRecv, 1, gbInt32, gbMax, S->comm, S->stream));
  syncAndCheck(S, S->comm, "stop vote");
  CHECK_GB(gbMemcpyToHost(&all, S->dRecv, sizeof(all)));
  if (all != 0 && all != 1) DIE("stop vote: max of 0s and 1s gave %d", (int)all);
  return all;
}

static void parseRankArg(const char* v, int* rank, const char** rest) {
  const char* colon = strchr(v, ':');
  if (!colon) DIE("expected R:VALUE, got '%s'", v);
  *rank = atoi(v);
  *rest = colon + 1;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gRank = envRank();
  const char *layout = NULL, *waitPath = NULL, *rootPort = NULL;
  double seconds = 10, warmFraction = 0.25;
  long maxCount = 40000;
  int splitEvery = 25, waitRank = -1, portRank = -1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) DIE("bad or incomplete argument '%s'", a);
    if (strcmp(a, "--layout") == 0) layout = v;
    else if (strcmp(a, "--seed") == 0) gSeed = strtoull(v, NULL, 10);
    else if (strcmp(a, "--seconds") == 0) seconds = atof(v);
    else if (strcmp(a, "--max-count") == 0) maxCount = atol(v);
    else if (strcmp(a, "--split-every") == 0) splitEvery = atoi(v);
    else if (strcmp(a, "--warm-fraction") == 0) warmFraction = atof(v);
    else if (strcmp(a, "--wait-file") == 0) parseRankArg(v, &waitRank, &waitPath);
    else if (strcmp(a, "--root-port-for-rank") == 0) parseRankArg(v, &portRank, &rootPort);
    else DIE("bad argument '%s'", a);
    i++;
  }
  if (!layout || maxCount < 1) DIE("--layout V0,V1,... is required (and --max-count >= 1)");
  parseLayout(layout);
  gChunkBytes = envSize("GPUBRIDGE_CHUNK_BYTES");
  gCall.ringMin = envSize("GPUBRIDGE_RING_MIN_BYTES");
  if (waitPath && gRank == waitRank) waitFile(waitPath, 120);
  if (rootPort && gRank == portRank) setenv("MASTER_PORT", rootPort, 1);

  soak_t S;
  memset(&S, 0, sizeof(S));
  double t0 = nowS();
  gbResult_t res = gbCommInitFromEnv(&S.comm, NULL);
  if (res != gbSuccess) {
    char line[4096];
    snprintf(line, sizeof(line), "%s", gbGetLastError(NULL));
    for (char* p = line; *p; p++)
      if (*p == '\n') *p = ' ';
    printf("init error after %.2f s: %s\n", nowS() - t0, line);
    return 1;
  }
  CHECK_GB(gbCommUserRank(S.comm, &S.rank));
  gRank = S.rank;
  int nranks = 0;
  CHECK_GB(gbCommCount(S.comm, &nranks));
  if (nranks != gN) DIE("gbCommCount says %d ranks, the layout has %d", nranks, gN);
  /* auto picks by size: the expected bits need the policy each size used. */
  const char* pol = getenv("GPUBRIDGE_POLICY");
  if (!pol || !*pol || strcmp(pol, "auto") == 0) DIE("set GPUBRIDGE_POLICY to a fixed policy (not auto)");
  S.policy = resolvedPolicy();
  checkTopology(S.comm, S.rank, S.policy);
  S.maxCount = (size_t)maxCount;
  S.cap = (size_t)gN * S.maxCount * 8 + 64;
  CHECK_GB(gbStreamCreate(&S.stream));
  CHECK_GB(gbMemAlloc(&S.dSend, S.cap));
  CHECK_GB(gbMemAlloc(&S.dRecv, S.cap));
  S.in = malloc(S.cap);
  S.got = malloc(S.cap);
  S.want = malloc(S.cap);
  S.tmp = malloc(S.cap);
  if (!S.in || !S.got || !S.want || !S.tmp) DIE("out of memory (%zu bytes)", S.cap);

  double start = nowS(), end = start + seconds, warmAt = start + warmFraction * seconds;
  meter_t warm, last;
  int warmed = 0;
  long steps = 0;
  /* Warm-up: every collective at maxCount in every data type, so whatever
   * the library keeps at its high-water mark (scratch, staging) has grown
   * before the warm measure; growth after it is then a leak. */
  static const int warmKinds[] = {OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE,   OP_ALLGATHER,
                                  OP_REDUCESCATTER, OP_ALLTOALL, OP_SENDRECV};
  const int warmSteps = (int)(sizeof(warmKinds) / sizeof(warmKinds[0])) * gbNumTypes;
  for (int i = 0;; i++) {
    if (i % 16 == 0) {
      if (!warmed && i >= warmSteps && nowS() >= warmAt) warm = meterRead(), warmed = 1;
      if (timeUp(&S, end)) break;
    }
    uint64_t x = mix64(gSeed * 0x51ed27ull + (uint64_t)i);
    int kind = (int)(x % NUM_OPS);
    if (kind == OP_SPLIT && (splitEvery <= 0 || i % splitEvery != 0)) kind = OP_ALLREDUCE;
    if (i == warmSteps && splitEvery > 0) kind = OP_SPLIT; /* before the warm-up measure */
    uint64_t y = mix64(x);
    /* Mostly small counts (many calls), sometimes up to maxCount, rarely 0. */
    size_t count = (y & 7) == 0 ? (size_t)(y >> 8) % S.maxCount + 1 : (size_t)(y >> 8) % 300 + 1;
    if ((y >> 60) == 0) count = 0;
    uint64_t z = mix64(y);
    if (i < warmSteps) {
      kind = warmKinds[i / gbNumTypes];
      count = S.maxCount;
      z = (z >> 8) / (uint64_t)gbNumTypes * (uint64_t)gbNumTypes + (uint64_t)(i % gbNumTypes); /* type i % n */
    }
    switch (kind) {
      case OP_ALLREDUCE: stepAllReduce(&S, i, z, count); break;
      case OP_BROADCAST: stepBroadcast(&S, i, z, count); break;
      case OP_REDUCE: stepReduce(&S, i, z, count); break;
      case OP_ALLGATHER: stepAllGather(&S, i, z, count); break;
      case OP_REDUCESCATTER: stepReduceScatter(&S, i, z, count); break;
      case OP_ALLTOALL: stepAllToAll(&S, i, z, count); break;
      case OP_SENDRECV: stepSendRecv(&S, i, z, count); break;
      case OP_SPLIT: stepSplit(&S, i, z, count); break;
    }
    S.done[kind]++;
    steps++;
  }
  if (!warmed) warm = meterRead();
  last = meterRead();
  char w[160], l[160], counts[512] = "";
  meterShow(&warm, w, sizeof(w));
  meterShow(&last, l, sizeof(l));
  printf("mem: warm %s; last %s\n", w, l);
  for (int k = 0; k < NUM_OPS; k++)
    snprintf(counts + strlen(counts), sizeof(counts) - strlen(counts), "%s%s %ld", k ? ", " : "", kindNames[k],
             S.done[k]);
  CHECK_GB(gbStreamDestroy(S.stream));
  CHECK_GB(gbMemFree(S.dSend));
  CHECK_GB(gbMemFree(S.dRecv));
  CHECK_GB(gbCommDestroy(S.comm));
  printf("ok: rank %d: %ld operations (%s) checked in %.1f s, policy %s\n", S.rank, steps, counts, nowS() - start,
         policyNames[S.policy]);
  free(S.in);
  free(S.got);
  free(S.want);
  free(S.tmp);
  return 0;
}
