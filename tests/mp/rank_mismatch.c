/* One rank of the call-mismatch suite (tests/mp/test_mismatch.py).
 *
 * Every rank makes a few matching calls (checked against values computed
 * here), then one rank (--odd) makes a different call from the others for
 * the same sequence number. The call must return gbSuccess (it is
 * asynchronous); gbStreamSynchronize must then fail, gbCommGetAsyncError
 * must say gbInvalidUsage, and gbGetLastError(comm) must explain. This
 * program checks the codes and prints the text and timings for the driver,
 * which compares the text across ranks:
 *   report: call R sync R async R after SECONDS s
 *   text: <gbGetLastError(comm), with \ and newlines escaped>
 *   destroy: R after SECONDS s
 *
 * Usage: rank_mismatch --case KIND --odd RANK [--warmup N] [--count C]
 *   KIND: coll (all-reduce vs broadcast), count, dtype, op, bcast-root,
 *         reduce-root, allgather (all-gather vs all-reduce), barrier
 *         (gbBarrier vs an all-reduce of one int32 summed, which is how
 *         gbBarrier runs: the check must still tell them apart),
 *         sendrecv-count (in a ring of send/recv groups, --odd receives
 *           C/2 float32 where its predecessor sends C),
 *         send-unmatched (the ring, plus --odd sends C float32 to rank
 *           odd+2, which posts no receive from it),
 *         count0 (--odd calls all-reduce with count 0, then C; the others
 *           call C twice: with the call check the count-0 call takes part),
 *         count0-allgather (the same with all-gather),
 *         queued (two all-reduces of C queued back to back; --odd's second
 *           has C-1: the verdict for the second must not break the first)
 * The queued kinds make two calls without synchronizing between them; the
 * first must return gbSuccess, the second gbSuccess or (when the verdict
 * arrived in between) gbInvalidUsage, the communicator having failed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/gpubridge.h"
#include "rank_die.h"

static int gFailed;

/* A failed expectation after the mismatch: reported, but the run goes on so
 * that the driver still sees the text and the timings. */
#define SOFT_FAIL(...)                         \
  do {                                         \
    fprintf(stdout, "rank %d: FAIL: ", gRank); \
    fprintf(stdout, __VA_ARGS__);              \
    fprintf(stdout, "\n");                     \
    gFailed = 1;                               \
  } while (0)

static int32_t val(int rank, int c, size_t i) { return (int32_t)((rank + 1) * 1000 + c * 100 + (int)(i % 97)); }

typedef struct {
  gbComm_t comm;
  void* stream;
  int rank, n;
  void *dSend, *dRecv;
  int32_t *hSend, *hRecv, *want;
  size_t cap; /* bytes */
} run_t;

static void syncOk(run_t* R, const char* what) {
  gbResult_t res = gbStreamSynchronize(R->stream);
  if (res != gbSuccess) DIE("%s: gbStreamSynchronize returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(R->comm, &async));
  if (async != gbSuccess) DIE("%s: async error %d: %s", what, (int)async, gbGetLastError(R->comm));
}

/* Matching call c: all-reduce sum, broadcast from the last rank, all-reduce
 * max, then again; each checked. */
static void warmup(run_t* R, int c, size_t count) {
  char what[96];
  int kind = c % 3, root = R->n - 1;
  for (size_t i = 0; i < count; i++) R->hSend[i] = val(R->rank, c, i);
  CHECK_GB(gbMemcpyToDevice(R->dSend, R->hSend, count * 4));
  for (size_t i = 0; i < count; i++) {
    int32_t a = val(0, c, i);
    for (int r = 1; r < R->n; r++) {
      int32_t b = val(r, c, i);
      a = kind == 0 ? a + b : (b > a ? b : a);
    }
    R->want[i] = kind == 1 ? val(root, c, i) : a;
  }
  gbResult_t res;
  if (kind == 1) {
    snprintf(what, sizeof(what), "matching call %d: broadcast int32 count %zu root %d", c, count, root);
    res = gbBroadcast(R->dSend, R->dRecv, count, gbInt32, root, R->comm, R->stream);
  } else {
    snprintf(what, sizeof(what), "matching call %d: all-reduce int32 %s count %zu", c, kind ? "max" : "sum", count);
    res = gbAllReduce(R->dSend, R->dRecv, count, gbInt32, kind ? gbMax : gbSum, R->comm, R->stream);
  }
  if (res != gbSuccess) DIE("%s: returned %d: %s", what, (int)res, gbGetLastError(R->comm));
  syncOk(R, what);
  CHECK_GB(gbMemcpyToHost(R->hRecv, R->dRecv, count * 4));
  for (size_t i = 0; i < count; i++)
    if (R->hRecv[i] != R->want[i]) DIE("%s: element %zu is %d, expected %d", what, i, R->hRecv[i], R->want[i]);
}

/* A second call queued right after the first (--case count0, queued): it
 * may find the communicator already failed by the first's verdict. */
static gbResult_t second(gbResult_t res) {
  if (res != gbSuccess && res != gbInvalidUsage)
    SOFT_FAIL("the second queued call returned %d (%s), expected gbSuccess or gbInvalidUsage (the first call's "
              "verdict came first)", (int)res, gbGetErrorString(res));
  return gbSuccess;
}

/* The mismatching call; returns the first non-success result of its calls. */
static gbResult_t mismatch(run_t* R, const char* kind, int odd, size_t C) {
  int me = R->rank, n = R->n, isOdd = me == odd;
  void *s = R->dSend, *r = R->dRecv;
  if (strcmp(kind, "count0") == 0 || strcmp(kind, "queued") == 0) {
    size_t first = strcmp(kind, "count0") == 0 && isOdd ? 0 : C;
    size_t then = strcmp(kind, "queued") == 0 && isOdd ? C - 1 : C;
    gbResult_t res = gbAllReduce(s, r, first, gbInt32, gbSum, R->comm, R->stream);
    if (res == gbSuccess) res = second(gbAllReduce(s, r, then, gbInt32, gbSum, R->comm, R->stream));
    return res;
  }
  if (strcmp(kind, "count0-allgather") == 0) {
    gbResult_t res = gbAllGather(s, r, isOdd ? 0 : C, gbInt32, R->comm, R->stream);
    if (res == gbSuccess) res = second(gbAllGather(s, r, C, gbInt32, R->comm, R->stream));
    return res;
  }
  if (strcmp(kind, "coll") == 0) {
    if (isOdd) return gbBroadcast(s, r, C, gbInt32, 0, R->comm, R->stream);
    return gbAllReduce(s, r, C, gbInt32, gbSum, R->comm, R->stream);
  }
  if (strcmp(kind, "count") == 0) return gbAllReduce(s, r, isOdd ? C - 1 : C, gbInt32, gbSum, R->comm, R->stream);
  if (strcmp(kind, "dtype") == 0)
    return gbAllReduce(s, r, C, isOdd ? gbFloat32 : gbInt32, gbSum, R->comm, R->stream);
  if (strcmp(kind, "op") == 0) return gbAllReduce(s, r, C, gbInt32, isOdd ? gbMax : gbSum, R->comm, R->stream);
  if (strcmp(kind, "bcast-root") == 0) return gbBroadcast(s, r, C, gbInt32, isOdd ? 1 : 0, R->comm, R->stream);
  if (strcmp(kind, "reduce-root") == 0)
    return gbReduce(s, r, C, gbInt32, gbSum, isOdd ? 1 : 0, R->comm, R->stream);
  if (strcmp(kind, "barrier") == 0) {
    if (isOdd) return gbBarrier(R->comm, R->stream);
    return gbAllReduce(s, r, 1, gbInt32, gbSum, R->comm, R->stream);
  }
  if (strcmp(kind, "allgather") == 0) {
    if (isOdd) return gbAllGather(s, r, C, gbInt32, R->comm, R->stream);
    return gbAllReduce(s, r, C, gbInt32, gbSum, R->comm, R->stream);
  }
  if (strcmp(kind, "sendrecv-count") == 0 || strcmp(kind, "send-unmatched") == 0) {
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    size_t recvCount = (strcmp(kind, "sendrecv-count") == 0 && isOdd) ? C / 2 : C;
    char* rbuf = R->dRecv;
    gbResult_t res = gbGroupStart();
    if (res != gbSuccess) return res;
    res = gbSend(s, C, gbFloat32, next, R->comm, R->stream);
    if (res == gbSuccess) res = gbRecv(rbuf, recvCount, gbFloat32, prev, R->comm, R->stream);
    if (res == gbSuccess && strcmp(kind, "send-unmatched") == 0 && isOdd)
      res = gbSend(s, C, gbFloat32, (me + 2) % n, R->comm, R->stream);
    gbResult_t end = gbGroupEnd();
    return res != gbSuccess ? res : end;
  }
  DIE("unknown --case '%s'", kind);
}

/* --case count0-off (run with GPUBRIDGE_CHECK_CALLS=off): --odd calls
 * all-reduce with count 0 and then C, the others only C. A count-0 call is a
 * no-op, as in NCCL: every rank's C-element sum must come out right. */
static int countZeroOff(run_t* R, int odd, size_t C) {
  for (size_t i = 0; i < C; i++) R->hSend[i] = val(R->rank, 7, i);
  CHECK_GB(gbMemcpyToDevice(R->dSend, R->hSend, C * 4));
  if (R->rank == odd) CHECK_GB(gbAllReduce(R->dSend, R->dRecv, 0, gbInt32, gbSum, R->comm, R->stream));
  CHECK_GB(gbAllReduce(R->dSend, R->dRecv, C, gbInt32, gbSum, R->comm, R->stream));
  syncOk(R, "count-0 all-reduce on one rank, then a matching one");
  CHECK_GB(gbMemcpyToHost(R->hRecv, R->dRecv, C * 4));
  for (size_t i = 0; i < C; i++) {
    int32_t want = 0;
    for (int r = 0; r < R->n; r++) want += val(r, 7, i);
    if (R->hRecv[i] != want) DIE("count0-off: element %zu is %d, expected %d", i, R->hRecv[i], want);
  }
  CHECK_GB(gbCommDestroy(R->comm));
  CHECK_GB(gbStreamDestroy(R->stream));
  gbMemFree(R->dSend);
  gbMemFree(R->dRecv);
  free(R->hSend);
  free(R->hRecv);
  free(R->want);
  printf("ok: rank %d of %d, case count0-off, odd rank %d: %zu sums checked\n", R->rank, R->n, odd, C);
  return 0;
}

static void printEscaped(const char* prefix, const char* text) {
  fputs(prefix, stdout);
  for (const char* p = text; *p; p++) {
    if (*p == '\\') fputs("\\\\", stdout);
    else if (*p == '\n') fputs("\\n", stdout);
    else putchar(*p);
  }
  putchar('\n');
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* rv = getenv("RANK");
  gRank = rv ? atoi(rv) : -1;
  const char* kind = NULL;
  int odd = -1, warmups = 3;
  size_t C = 100;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--case") == 0 && v) kind = v, i++;
    else if (strcmp(a, "--odd") == 0 && v) odd = atoi(v), i++;
    else if (strcmp(a, "--warmup") == 0 && v) warmups = atoi(v), i++;
    else if (strcmp(a, "--count") == 0 && v) C = (size_t)strtoull(v, NULL, 10), i++;
    else DIE("bad argument '%s'", a);
  }
  if (!kind || odd < 0 || C < 2) DIE("usage: rank_mismatch --case KIND --odd RANK [--warmup N] [--count C>=2]");

  run_t R;
  memset(&R, 0, sizeof(R));
  double tInit = nowS();
  gbResult_t res = gbCommInitFromEnv(&R.comm, NULL);
  if (res != gbSuccess) DIE("gbCommInitFromEnv returned %d: %s", (int)res, gbGetLastError(NULL));
  CHECK_GB(gbCommUserRank(R.comm, &R.rank));
  CHECK_GB(gbCommCount(R.comm, &R.n));
  gRank = R.rank;
  if (odd >= R.n) DIE("--odd %d: only %d ranks", odd, R.n);
  size_t wcount = 1000;
  R.cap = ((size_t)R.n * (C > wcount ? C : wcount) + 64) * 8;
  CHECK_GB(gbStreamCreate(&R.stream));
  CHECK_GB(gbMemAlloc(&R.dSend, R.cap));
  CHECK_GB(gbMemAlloc(&R.dRecv, R.cap));
  R.hSend = calloc(1, R.cap);
  R.hRecv = calloc(1, R.cap);
  R.want = calloc(1, R.cap);
  if (!R.hSend || !R.hRecv || !R.want) DIE("out of memory");
  CHECK_GB(gbMemcpyToDevice(R.dSend, R.hSend, R.cap)); /* defined bytes for every call below */
  CHECK_GB(gbMemcpyToDevice(R.dRecv, R.hRecv, R.cap));

  for (int c = 0; c < warmups; c++) warmup(&R, c, wcount + (size_t)c);
  printf("warmup: %d matching calls checked\n", warmups);

  if (strcmp(kind, "count0-off") == 0) return countZeroOff(&R, odd, C);

  double t0 = nowS();
  gbResult_t call = mismatch(&R, kind, odd, C);
  gbResult_t sync = gbStreamSynchronize(R.stream);
  /* Before gbCommGetAsyncError (which records the communicator's text on
   * this thread): gbGetLastError(comm) must give the first failure, not the
   * synchronize's own error. */
  char* syncText = strdup(gbGetLastError(R.comm));
  if (!syncText) DIE("out of memory");
  gbResult_t async = gbSuccess;
  gbResult_t ga = gbCommGetAsyncError(R.comm, &async);
  double after = nowS() - t0;
  const char* last = gbGetLastError(R.comm);
  char* text = strdup(last ? last : "(null)");
  if (!text) DIE("out of memory");
  printf("report: call %d sync %d async %d after %.3f s\n", (int)call, (int)sync, (int)async, after);
  printEscaped("text: ", text);
  printEscaped("sync-text: ", syncText);
  if (call != gbSuccess)
    SOFT_FAIL("the mismatching call returned %d (%s), expected gbSuccess: it is asynchronous", (int)call,
              gbGetErrorString(call));
  /* Send/recv is pairwise: only the ranks of the pair that disagrees must
   * see the mismatch; a send nobody receives ends at the deadline. */
  int sendrecv = strcmp(kind, "sendrecv-count") == 0, unmatched = strcmp(kind, "send-unmatched") == 0;
  int me = R.rank, prev = (odd + R.n - 1) % R.n;
  int inPair = (!sendrecv && !unmatched) || (sendrecv && (me == odd || me == prev)) || (unmatched && me == odd);
  if (ga != gbSuccess) SOFT_FAIL("gbCommGetAsyncError returned %d", (int)ga);
  if (inPair) {
    if (sync == gbSuccess) SOFT_FAIL("gbStreamSynchronize returned gbSuccess after the mismatching call");
    if (async != gbInvalidUsage && !(unmatched && async == gbTimeout))
      SOFT_FAIL("gbCommGetAsyncError reports %d (%s), expected gbInvalidUsage (%d)", (int)async,
                gbGetErrorString(async), (int)gbInvalidUsage);
    if (!text[0]) SOFT_FAIL("gbGetLastError(comm) is empty");
  }

  double td = nowS();
  gbResult_t d = gbCommDestroy(R.comm);
  printf("destroy: %d after %.3f s\n", (int)d, nowS() - td);
  gbStreamDestroy(R.stream); /* may report the stream's error again */
  gbMemFree(R.dSend);
  gbMemFree(R.dRecv);
  free(text);
  free(syncText);
  free(R.hSend);
  free(R.hRecv);
  free(R.want);
  if (gFailed) return 1;
  printf("ok: rank %d of %d, case %s, odd rank %d, error after %.3f s, %.2f s in all\n", R.rank, R.n, kind, odd,
         after, nowS() - tInit);
  return 0;
}
