/* One rank of the leak loops (tests/mp/test_leak_loops.py).
 *
 * Usage: rank_leaks --mode plain|collectives|abort|failinit|split|premul
 *                   [--cycles 200] [--warm 20] [--ops 1000]
 *
 * Every rank inits a control communicator from the launcher's variables and
 * then runs the cycles of one mode, in step with the others:
 *   plain        rank 0 makes a unique id (gbGetUniqueId), the control
 *                communicator broadcasts it, every rank inits a communicator
 *                on it (gbCommInitRank) and destroys it;
 *   collectives  the same, with a checked all-reduce, all-gather and
 *                send/recv ring on it before the destroy;
 *   abort        the same, with an all-reduce enqueued and the communicator
 *                aborted (gbCommAbort) without waiting for it;
 *   failinit     the same, but the last rank asks for another chunk size, so
 *                init fails on every rank (the verdict names the setting);
 *   split        gbCommSplit of the control communicator (two colors), a
 *                checked all-reduce on the child, then its destroy;
 *   premul       --ops PreMulSum ops created and destroyed on the control
 *                communicator, one of them used in a checked all-reduce.
 * After --warm cycles and after the last one each rank measures itself
 * (descriptors, threads, its /dev/shm segments, resident memory, heap; see
 * rank_meter.h), waiting up to 2 s for the numbers to settle (threads that
 * are ending), and prints "leaks MODE: warm <meter>; last <meter>" and
 * "ok: rank R: MODE, N cycles in T s". A failure prints "rank R: FAIL: ...". */
#include "rank_common.h"
#include "rank_meter.h"

static gbComm_t gCtl;
static void* gStream;
static int gMe, gWorld;
static void *dA, *dB;
#define LEAK_COUNT 1024

static void syncOk(gbComm_t comm, const char* what) {
  gbResult_t r = gbStreamSynchronize(gStream);
  if (r != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", what, (int)r, gbGetLastError(comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", what, (int)async, gbGetLastError(comm));
}

/* The control communicator's all-reduce of 0s: keeps the ranks in step. */
static void barrier(void) {
  int32_t z = 0;
  CHECK_GB(gbMemcpyToDevice(dA, &z, sizeof(z)));
  CHECK_GB(gbAllReduce(dA, dB, 1, gbInt32, gbSum, gCtl, gStream));
  syncOk(gCtl, "control barrier");
}

/* Rank 0 makes a unique id; the control communicator broadcasts it. */
static gbUniqueId freshId(void) {
  gbUniqueId id;
  memset(&id, 0, sizeof(id));
  if (gMe == 0) CHECK_GB(gbGetUniqueId(&id));
  CHECK_GB(gbMemcpyToDevice(dA, &id, sizeof(id)));
  CHECK_GB(gbBroadcast(dA, dB, sizeof(id), gbUint8, 0, gCtl, gStream));
  syncOk(gCtl, "unique id broadcast");
  CHECK_GB(gbMemcpyToHost(&id, dB, sizeof(id)));
  return id;
}

/* A checked int32 sum all-reduce of rank-dependent inputs on comm, whose
 * ranks are the control ranks members[0..n) in order. */
static void checkedAllReduce(gbComm_t comm, const int* members, int n, int cycle, const char* what) {
  int cr = -1;
  CHECK_GB(gbCommUserRank(comm, &cr));
  int32_t in[LEAK_COUNT], got[LEAK_COUNT], want[LEAK_COUNT], tmp[LEAK_COUNT];
  genInput(inputKey(gMe, cycle), 0, LEAK_COUNT, gbInt32, in);
  CHECK_GB(gbMemcpyToDevice(dA, in, sizeof(in)));
  gbResult_t r = gbAllReduce(dA, dB, LEAK_COUNT, gbInt32, gbSum, comm, gStream);
  if (r != gbSuccess) DIE("%s: gbAllReduce returned %d: %s", what, (int)r, gbGetLastError(comm));
  syncOk(comm, what);
  CHECK_GB(gbMemcpyToHost(got, dB, sizeof(got)));
  genInput(inputKey(members[0], cycle), 0, LEAK_COUNT, gbInt32, want);
  for (int k = 1; k < n; k++) {
    genInput(inputKey(members[k], cycle), 0, LEAK_COUNT, gbInt32, tmp);
    refFold(want, tmp, LEAK_COUNT, gbInt32, gbSum);
  }
  compare(what, got, want, LEAK_COUNT, gbInt32);
}

static void moreCollectives(gbComm_t c, int cycle) {
  int32_t in[64], got[64 * MAX_RANKS], want[64 * MAX_RANKS];
  genInput(inputKey(gMe, cycle + 100000), 0, 64, gbInt32, in);
  CHECK_GB(gbMemcpyToDevice(dA, in, sizeof(in)));
  CHECK_GB(gbAllGather(dA, dB, 64, gbInt32, c, gStream));
  syncOk(c, "all-gather");
  CHECK_GB(gbMemcpyToHost(got, dB, sizeof(int32_t) * 64 * (size_t)gWorld));
  for (int r = 0; r < gWorld; r++) genInput(inputKey(r, cycle + 100000), 0, 64, gbInt32, want + 64 * r);
  compare("all-gather", got, want, 64 * (size_t)gWorld, gbInt32);
  int to = (gMe + 1) % gWorld, from = (gMe + gWorld - 1) % gWorld;
  CHECK_GB(gbGroupStart());
  CHECK_GB(gbSend(dA, 64, gbInt32, to, c, gStream));
  CHECK_GB(gbRecv(dB, 64, gbInt32, from, c, gStream));
  CHECK_GB(gbGroupEnd());
  syncOk(c, "send/recv ring");
  CHECK_GB(gbMemcpyToHost(got, dB, sizeof(int32_t) * 64));
  genInput(inputKey(from, cycle + 100000), 0, 64, gbInt32, want);
  compare("send/recv ring", got, want, 64, gbInt32);
}

static void cycleInit(const char* mode, int cycle) {
  gbUniqueId id = freshId();
  gbComm_t c = NULL;
  char what[96];
  snprintf(what, sizeof(what), "%s cycle %d", mode, cycle);
  if (strcmp(mode, "failinit") == 0) {
    gbConfig_t cfg = GB_CONFIG_INITIALIZER;
    cfg.chunkBytes = gMe == gWorld - 1 ? 128 * 1024 : 64 * 1024;
    gbResult_t r = gbCommInitRankConfig(&c, gWorld, id, gMe, &cfg);
    if (r == gbSuccess) DIE("%s: init succeeded although the last rank asked for another chunk size", what);
    if (c != NULL) DIE("%s: a failed init left a communicator", what);
    const char* text = gbGetLastError(NULL);
    if (!text || !strstr(text, "GPUBRIDGE_CHUNK_BYTES"))
      DIE("%s: init returned %d with a text that does not name the chunk size: %s", what, (int)r, text ? text : "");
    return;
  }
  gbResult_t r = gbCommInitRank(&c, gWorld, id, gMe);
  if (r != gbSuccess) DIE("%s: gbCommInitRank returned %d: %s", what, (int)r, gbGetLastError(NULL));
  if (strcmp(mode, "collectives") == 0) {
    checkedAllReduce(c, gAll, gWorld, cycle, what);
    moreCollectives(c, cycle);
  }
  if (strcmp(mode, "abort") == 0) {
    /* A stream of its own: the aborted all-reduce may leave an error on it. */
    void* s = NULL;
    CHECK_GB(gbStreamCreate(&s));
    r = gbAllReduce(dA, dB, LEAK_COUNT, gbInt32, gbSum, c, s);
    if (r != gbSuccess) DIE("%s: gbAllReduce returned %d: %s", what, (int)r, gbGetLastError(c));
    r = gbCommAbort(c);
    if (r != gbSuccess) DIE("%s: gbCommAbort returned %d: %s", what, (int)r, gbGetLastError(NULL));
    (void)gbStreamSynchronize(s); /* success or the abort's error: both are fine */
    CHECK_GB(gbStreamDestroy(s));
    return;
  }
  r = gbCommDestroy(c);
  if (r != gbSuccess) DIE("%s: gbCommDestroy returned %d: %s", what, (int)r, gbGetLastError(NULL));
}

static void cycleSplit(int cycle) {
  int color = (gMe + cycle) % 2, members[MAX_RANKS], n = 0;
  for (int r = 0; r < gWorld; r++)
    if ((r + cycle) % 2 == color) members[n++] = r;
  gbComm_t child = NULL;
  CHECK_GB(gbCommSplit(gCtl, color, gMe, &child, NULL));
  if (!child) DIE("split cycle %d: no child communicator", cycle);
  char what[64];
  snprintf(what, sizeof(what), "split cycle %d", cycle);
  checkedAllReduce(child, members, n, cycle, what);
  CHECK_GB(gbCommDestroy(child));
}

static void cyclePremul(int cycle, int ops) {
  for (int k = 0; k < ops; k++) {
    gbRedOp_t op;
    int32_t scalar = 3;
    CHECK_GB(gbRedOpCreatePreMulSum(&op, &scalar, gbInt32, gbScalarHostImmediate, gCtl));
    if (k == 0) {
      /* sum of 3 * x over ranks, in wrapping int32 arithmetic */
      int32_t in[LEAK_COUNT], got[LEAK_COUNT], want[LEAK_COUNT], tmp[LEAK_COUNT];
      genInput(inputKey(gMe, cycle), 0, LEAK_COUNT, gbInt32, in);
      CHECK_GB(gbMemcpyToDevice(dA, in, sizeof(in)));
      CHECK_GB(gbAllReduce(dA, dB, LEAK_COUNT, gbInt32, op, gCtl, gStream));
      syncOk(gCtl, "PreMulSum all-reduce");
      CHECK_GB(gbMemcpyToHost(got, dB, sizeof(got)));
      memset(want, 0, sizeof(want));
      for (int r = 0; r < gWorld; r++) {
        genInput(inputKey(r, cycle), 0, LEAK_COUNT, gbInt32, tmp);
        refScale(tmp, LEAK_COUNT, gbInt32, &scalar);
        refFold(want, tmp, LEAK_COUNT, gbInt32, gbSum);
      }
      compare("PreMulSum all-reduce", got, want, LEAK_COUNT, gbInt32);
    }
    CHECK_GB(gbRedOpDestroy(op, gCtl));
  }
}

/* Reads until two reads 50 ms apart agree on descriptors, threads and
 * segments (a thread or socket of the last cycle may still be ending), for
 * at most 2 s. */
static meter_t settled(void) {
  meter_t a = meterRead();
  double end = nowS() + 2.0;
  for (;;) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* polling interval of a deadline-bounded wait */
    meter_t b = meterRead();
    if ((b.fds == a.fds && b.threads == a.threads && b.shm == a.shm) || nowS() > end) return b;
    a = b;
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gRank = envRank();
  const char* mode = NULL;
  int cycles = 200, warm = 20, ops = 1000;
  for (int i = 1; i < argc; i++) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) DIE("bad or incomplete argument '%s'", argv[i]);
    if (strcmp(argv[i], "--mode") == 0) mode = v;
    else if (strcmp(argv[i], "--cycles") == 0) cycles = atoi(v);
    else if (strcmp(argv[i], "--warm") == 0) warm = atoi(v);
    else if (strcmp(argv[i], "--ops") == 0) ops = atoi(v);
    else DIE("bad argument '%s'", argv[i]);
    i++;
  }
  const char* modes[] = {"plain", "collectives", "abort", "failinit", "split", "premul"};
  if (!mode || nameIndex(mode, modes, 6) < 0 || warm < 1 || cycles <= warm)
    DIE("need --mode plain|collectives|abort|failinit|split|premul and --cycles > --warm >= 1");
  CHECK_GB(gbCommInitFromEnv(&gCtl, NULL));
  CHECK_GB(gbCommUserRank(gCtl, &gMe));
  CHECK_GB(gbCommCount(gCtl, &gWorld));
  gRank = gMe;
  for (int r = 0; r < gWorld; r++) gAll[r] = r;
  CHECK_GB(gbStreamCreate(&gStream));
  CHECK_GB(gbMemAlloc(&dA, sizeof(int32_t) * LEAK_COUNT * MAX_RANKS));
  CHECK_GB(gbMemAlloc(&dB, sizeof(int32_t) * LEAK_COUNT * MAX_RANKS));

  double t0 = nowS();
  meter_t w = {0, 0, 0, 0, 0, 0};
  for (int cycle = 0; cycle < cycles; cycle++) {
    if (cycle == warm) {
      barrier();
      w = settled();
    }
    if (strcmp(mode, "split") == 0) cycleSplit(cycle);
    else if (strcmp(mode, "premul") == 0) cyclePremul(cycle, ops);
    else cycleInit(mode, cycle);
    barrier();
  }
  meter_t l = settled();
  char ws[160], ls[160];
  meterShow(&w, ws, sizeof(ws));
  meterShow(&l, ls, sizeof(ls));
  printf("leaks %s: warm %s; last %s\n", mode, ws, ls);
  CHECK_GB(gbStreamDestroy(gStream));
  CHECK_GB(gbMemFree(dA));
  CHECK_GB(gbMemFree(dB));
  CHECK_GB(gbCommDestroy(gCtl));
  printf("ok: rank %d: %s, %d cycles in %.1f s\n", gMe, mode, cycles, nowS() - t0);
  return 0;
}
