/* --phases: where a call's time goes, from the flight recorder. After the
 * timed iterations rank 0 reads its newest records (gbCommGetRecords) and
 * averages, per call, the spans between the phase stamps: check (from the
 * start to the call check's end), island (the island step, up to the chunk
 * staged for the proxy; the whole call on a rank without a host step), wait
 * (staged until the proxy begins the bridge step), bridge, after (the
 * copy-back and the island step after the bridge, up to done). The spans
 * follow each other, so they add up to done - start. A call starts when it
 * was enqueued; with -z 0 the calls queue behind each other on the stream,
 * so a call starts when the previous one was done, if that is later. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "perf.h"

static const char* const phaseNames[PERF_NUM_PHASES] = {"check", "island", "wait", "bridge", "after"};

const char* perfPhaseName(perfPhase_t p) {
  return p >= 0 && p < PERF_NUM_PHASES ? phaseNames[p] : "?";
}

/* Rank 0 reads the records; every rank learns whether it can, so all stop alike when it cannot. */
void perfPhasesSetup(perfCtx_t* ctx, const perfOptions_t* opts) {
  if (!opts->phases) return;
  uint64_t failed = 0;
  char why[600] = "";
  if (ctx->topo.rank == 0) {
    gbCommCounters_t counters;
    memset(&counters, 0, sizeof(counters));
    gbResult_t res = gbCommGetCounters(ctx->comm, &counters);
    if (res != gbSuccess) {
      snprintf(why, sizeof(why), "--phases reads the flight recorder, which rank 0 cannot: %s: %s; unset "
               "GPUBRIDGE_TRACE_BUFFER (or set it above 0) or drop --phases", gbGetErrorString(res),
               gbGetLastError(ctx->comm));
      failed = 1;
    }
  }
  perfRanksSumU64(ctx, &failed, 1);
  if (!failed) return;
  if (ctx->topo.rank == 0) fprintf(stderr, "gpubridge-perf: %s\n", why);
  perfCheckUseComm(NULL);
  perfCheck(gbCommDestroy(ctx->comm), "gbCommDestroy");
  exit(PERF_EXIT_USAGE);
}

static int64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Adds the span from *at to end to *sum and moves *at to end (a stamp of 0 was not reached). */
static void span(int64_t* at, int64_t end, double* sum) {
  if (end == 0) return;
  if (end > *at) {
    *sum += (double)(end - *at);
    *at = end;
  }
}

/* How long to wait for the last record's done stamp: on a GPU a host thread
 * stamps it when it sees the stream's flag, shortly after the stream got there. */
#define DONE_DEADLINE_NS 2000000000LL

void perfPhasesRead(gbComm_t comm, perfColl_t coll, int calls, int blocking, perfPhases_t* out) {
  memset(out, 0, sizeof(*out));
  /* One more than the calls: the call before the first gives its done time. */
  int want = calls + 1;
  gbCollRecord_t* recs = calloc((size_t)want, sizeof(*recs));
  if (!recs) perfFail("--phases: out of memory for the records");
  int n = 0;
  int64_t deadline = nowNs() + DONE_DEADLINE_NS;
  for (;;) {
    perfCheck(gbCommGetRecords(comm, recs, want, &n), "gbCommGetRecords");
    if (n == 0 || recs[n - 1].state != gbRecordInFlight || nowNs() > deadline) break;
    struct timespec pause = {0, 200000};
    nanosleep(&pause, NULL);
  }
  double sum[PERF_NUM_PHASES] = {0};
  int used = 0;
  for (int k = n > calls ? n - calls : 0; k < n; k++) {
    const gbCollRecord_t* r = &recs[k];
    if (r->state != gbRecordDone || r->coll != (int32_t)coll || r->t[gbPhaseEnqueued] == 0) continue;
    int64_t at = r->t[gbPhaseEnqueued];
    if (!blocking && k > 0 && recs[k - 1].t[gbPhaseDone] > at) at = recs[k - 1].t[gbPhaseDone];
    if (r->flags & GB_RECORD_HAS_CHECK) span(&at, r->t[gbPhaseCheckEnd], &sum[PERF_PHASE_CHECK]);
    if (r->flags & GB_RECORD_HAS_HOST_STEP) {
      span(&at, r->t[gbPhaseStaged], &sum[PERF_PHASE_ISLAND]);
      span(&at, r->t[gbPhaseBridgeBegin], &sum[PERF_PHASE_WAIT]);
      span(&at, r->t[gbPhaseBridgeEnd], &sum[PERF_PHASE_BRIDGE]);
      span(&at, r->t[gbPhaseDone], &sum[PERF_PHASE_AFTER]);
    } else {
      span(&at, r->t[gbPhaseDone], &sum[PERF_PHASE_ISLAND]);
    }
    used++;
  }
  free(recs);
  out->records = used;
  for (int p = 0; p < PERF_NUM_PHASES && used > 0; p++) out->us[p] = sum[p] / used / 1e3;
}
