/* The flight recorder on a one-rank communicator (host device): N calls give
 * N records numbered 1..N, done, in order, with what was called; the
 * observer sees each once, in order, on a gpubridge thread; counters add up;
 * nothing is in flight after a synchronize; a blocked stream shows its calls
 * in flight (oldest first) and a full ring leaves the newest unrecorded
 * rather than overwrite a call in flight; the ring keeps the newest `cap`
 * records (GPUBRIDGE_TRACE_BUFFER rounded up to a power of two); a dump
 * goes where asked with the documented name and no temporary file left, an
 * unwritable place gives an error that says what to do; the phase names;
 * GPUBRIDGE_TRACE_BUFFER=0 turns it all off.
 *
 * All of it runs three times, once per GPUBRIDGE_TRACE_DONE: auto and
 * marker (on the host device the stream's end marker is the done writer, so
 * a record is done when gbStreamSynchronize returns) and flag (the path of
 * GPUs: the stream writes a done flag and the watcher thread ends the record
 * within a poll, with GB_RECORD_DEVICE_DONE; the test waits for that with a
 * deadline). */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/param.h"
#include "check.h"
#include "unit/one_rank.h"
#include "device/device.h"
#include "gpubridge/gpubridge.h"

#define MAXREC 64

typedef struct {
  int calls;
  uint64_t seqs[MAXREC];
  int states[MAXREC];
  uint64_t counts[MAXREC];
  int onCaller;
  pthread_t caller;
} seen_t;

static void observe(gbComm_t comm, const gbCollRecord_t* r, void* arg) {
  (void)comm;
  seen_t* s = arg;
  if (pthread_equal(pthread_self(), s->caller)) s->onCaller++;
  int n = s->calls; /* one observer call at a time: the calls of one stream, or the watcher's */
  if (n < MAXREC) {
    s->seqs[n] = r->seq;
    s->states[n] = r->state;
    s->counts[n] = r->count;
  }
  __atomic_store_n(&s->calls, n + 1, __ATOMIC_RELEASE);
}

/* A stream task that holds the stream until released. */
static int gate;
static gbResult_t holdStream(void* arg) {
  (void)arg;
  for (int i = 0; i < 10000 && !__atomic_load_n(&gate, __ATOMIC_ACQUIRE); i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return gbSuccess;
}

static int byFlag; /* this round's records end by flag (GPUBRIDGE_TRACE_DONE=flag) */

/* Flag mode: waits (deadline) until inFlight records are left; marker mode
 * needs no wait, the end marker ran before the synchronize returned. */
static void settle(gbComm_t comm, int inFlight) {
  if (!byFlag) return;
  gbCollRecord_t recs[MAXREC];
  int count = -1;
  gbDeadline_t until = gbDeadlineIn(10.0);
  while (gbCommGetInFlight(comm, recs, MAXREC, &count) == gbSuccess && count > inFlight && !gbDeadlinePassed(until)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  CHECK(count == inFlight, "flag mode: %d records in flight after 10 s, not %d", count, inFlight);
}

/* A record's state is published before its observer call: flag mode waits
 * (deadline) for n calls of the watcher's. */
static void settleObserver(seen_t* s, int n) {
  gbDeadline_t until = gbDeadlineIn(10.0);
  while (byFlag && __atomic_load_n(&s->calls, __ATOMIC_ACQUIRE) < n && !gbDeadlinePassed(until)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
}

static int allReduces(gbComm_t comm, void* stream, int n, uint64_t firstCount, float* buf) {
  for (int i = 0; i < n; i++)
    if (gbAllReduce(buf, buf, firstCount + (uint64_t)i, gbFloat32, gbSum, comm, stream) != gbSuccess) return 0;
  return 1;
}

static void recordsAndObserver(gbComm_t comm, void* stream, float* buf) {
  seen_t seen;
  memset(&seen, 0, sizeof(seen));
  seen.caller = pthread_self();
  CHECK(gbCommSetObserver(comm, observe, &seen) == gbSuccess, "set observer: %s", gbGetLastError(comm));
  const int n = 5;
  CHECK(allReduces(comm, stream, n, 10, buf), "all-reduces: %s", gbGetLastError(comm));
  CHECK(gbStreamSynchronize(stream) == gbSuccess, "synchronize: %s", gbGetLastError(comm));
  settle(comm, 0);
  settleObserver(&seen, n);
  CHECK(seen.calls == n, "observer called %d times, not %d", seen.calls, n);
  CHECK(seen.onCaller == 0, "observer ran %d times on the calling thread (it runs on the stream's or the watcher's)",
        seen.onCaller);
  for (int i = 0; i < n && i < seen.calls; i++)
    CHECK(seen.seqs[i] == (uint64_t)i + 1 && seen.states[i] == gbRecordDone && seen.counts[i] == 10 + (uint64_t)i,
          "observer call %d: seq %llu state %d count %llu", i, (unsigned long long)seen.seqs[i], seen.states[i],
          (unsigned long long)seen.counts[i]);

  gbCollRecord_t recs[MAXREC];
  int count = -1;
  CHECK(gbCommGetRecords(comm, recs, MAXREC, &count) == gbSuccess && count == n, "records: %d, not %d", count, n);
  uint64_t islandBytes = 0;
  for (int i = 0; i < count; i++) {
    const gbCollRecord_t* r = &recs[i];
    CHECK(r->size == 168 && r->version == 1, "record %d: size %u version %u", i, r->size, r->version);
    CHECK(r->seq == (uint64_t)i + 1 && r->p2pSeq == 0 && r->count == 10 + (uint64_t)i, "record %d: seq %llu count %llu",
          i, (unsigned long long)r->seq, (unsigned long long)r->count);
    CHECK(r->coll == gbCollAllReduce && r->dtype == gbFloat32 && r->op == gbSum && r->root == -1 && r->peer == -1,
          "record %d: coll %d dtype %d op %d root %d peer %d", i, r->coll, r->dtype, r->op, r->root, r->peer);
    CHECK(r->state == gbRecordDone && r->result == gbSuccess, "record %d: state %d result %d", i, r->state, r->result);
    CHECK(!!(r->flags & GB_RECORD_DEVICE_DONE) == byFlag, "record %d: flags %d: GB_RECORD_DEVICE_DONE %s", i, r->flags,
          byFlag ? "missing (ended by flag)" : "set (ended by the marker)");
    CHECK(r->policy == gbPolicyNative && r->nchunks == 0 && !(r->flags & GB_RECORD_HAS_HOST_STEP),
          "record %d: one rank runs native without host steps: policy %d nchunks %d flags %d", i, r->policy,
          r->nchunks, r->flags);
    CHECK(r->t[gbPhaseEnqueued] > 0 && r->t[gbPhaseDone] >= r->t[gbPhaseEnqueued], "record %d: enqueued %lld done %lld",
          i, (long long)r->t[gbPhaseEnqueued], (long long)r->t[gbPhaseDone]);
    CHECK(r->bytes[gbHostGroupIsland] == r->count * sizeof(float), "record %d: island bytes %llu, not %llu", i,
          (unsigned long long)r->bytes[gbHostGroupIsland], (unsigned long long)(r->count * sizeof(float)));
    CHECK(strcmp(gbCollRecordPhase(r), "done") == 0, "record %d: phase %s", i, gbCollRecordPhase(r));
    islandBytes += r->count * sizeof(float);
  }
  /* The newest 2 only, oldest first. */
  CHECK(gbCommGetRecords(comm, recs, 2, &count) == gbSuccess && count == 2 && recs[0].seq == 4 && recs[1].seq == 5,
        "newest 2: count %d, seqs %llu %llu", count, (unsigned long long)recs[0].seq, (unsigned long long)recs[1].seq);
  CHECK(gbCommGetInFlight(comm, recs, MAXREC, &count) == gbSuccess && count == 0, "in flight after synchronize: %d",
        count);

  gbCommCounters_t k;
  CHECK(gbCommGetCounters(comm, &k) == gbSuccess, "counters: %s", gbGetLastError(comm));
  CHECK(k.size == 168 && k.version == 1 && k.enqueued == (uint64_t)n && k.completed == (uint64_t)n && k.failed == 0 &&
            k.unrecorded == 0 && k.byColl[gbCollAllReduce] == (uint64_t)n && k.latencyNs > 0,
        "counters: enqueued %llu completed %llu failed %llu unrecorded %llu all_reduce %llu latency %llu",
        (unsigned long long)k.enqueued, (unsigned long long)k.completed, (unsigned long long)k.failed,
        (unsigned long long)k.unrecorded, (unsigned long long)k.byColl[gbCollAllReduce],
        (unsigned long long)k.latencyNs);
  CHECK(k.bytes[gbHostGroupIsland] == islandBytes, "counter island bytes %llu, not %llu",
        (unsigned long long)k.bytes[gbHostGroupIsland], (unsigned long long)islandBytes);

  /* Removed: no more calls. */
  CHECK(gbCommSetObserver(comm, NULL, NULL) == gbSuccess, "remove observer: %s", gbGetLastError(comm));
  CHECK(allReduces(comm, stream, 1, 10, buf) && gbStreamSynchronize(stream) == gbSuccess, "all-reduce: %s",
        gbGetLastError(comm));
  settle(comm, 0);
  CHECK(seen.calls == n, "observer called %d times after its removal (%d before)", seen.calls, n);
}

/* A held stream: calls in flight, oldest first; a full ring leaves the
 * newest unrecorded; released, all finish. cap is 8; 6 records exist. */
static void inFlight(gbComm_t comm, void* stream, float* buf) {
  const gbDeviceOps* dev = NULL;
  CHECK(gbDeviceGet(&dev) == gbSuccess && dev->launchHostFn, "host device");
  if (!dev || !dev->launchHostFn) return;
  __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
  CHECK(dev->launchHostFn(stream, holdStream, NULL, NULL) == gbSuccess, "hold the stream");
  CHECK(allReduces(comm, stream, 10, 1, buf), "all-reduces: %s", gbGetLastError(comm));
  gbCollRecord_t recs[MAXREC];
  int count = -1;
  CHECK(gbCommGetInFlight(comm, recs, MAXREC, &count) == gbSuccess && count == 8, "in flight: %d, not 8 (the ring)",
        count);
  for (int i = 0; i < count; i++) {
    CHECK(recs[i].seq == 7 + (uint64_t)i && recs[i].state == gbRecordInFlight && recs[i].t[gbPhaseDone] == 0,
          "in flight %d: seq %llu state %d", i, (unsigned long long)recs[i].seq, recs[i].state);
    CHECK(strcmp(gbCollRecordPhase(&recs[i]), "island") == 0, "in flight %d: phase %s", i,
          gbCollRecordPhase(&recs[i]));
  }
  gbCommCounters_t k;
  CHECK(gbCommGetCounters(comm, &k) == gbSuccess && k.unrecorded == 2 && k.enqueued == 16 && k.completed == 6,
        "counters while held: unrecorded %llu enqueued %llu completed %llu", (unsigned long long)k.unrecorded,
        (unsigned long long)k.enqueued, (unsigned long long)k.completed);
  __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  CHECK(gbStreamSynchronize(stream) == gbSuccess, "synchronize: %s", gbGetLastError(comm));
  settle(comm, 0);
  CHECK(gbCommGetInFlight(comm, recs, MAXREC, &count) == gbSuccess && count == 0, "in flight after release: %d",
        count);
  CHECK(gbCommGetCounters(comm, &k) == gbSuccess && k.completed == 14, "completed %llu, not 14 (2 unrecorded)",
        (unsigned long long)k.completed);
  /* Wrapped: the newest 8 records: ids 10..17 hold seqs 10..14 and, after
   * the 2 unrecorded calls (seqs 15, 16), seqs 17..19. */
  CHECK(allReduces(comm, stream, 3, 1, buf) && gbStreamSynchronize(stream) == gbSuccess, "all-reduces: %s",
        gbGetLastError(comm));
  settle(comm, 0);
  CHECK(gbCommGetRecords(comm, recs, MAXREC, &count) == gbSuccess && count == 8, "records after wrap: %d", count);
  static const uint64_t want[8] = {10, 11, 12, 13, 14, 17, 18, 19};
  for (int i = 0; i < count && i < 8; i++)
    CHECK(recs[i].seq == want[i] && recs[i].state == gbRecordDone, "wrapped %d: seq %llu (not %llu) state %d", i,
          (unsigned long long)recs[i].seq, (unsigned long long)want[i], recs[i].state);
}

static void otherCalls(gbComm_t comm, void* stream, float* buf) {
  gbCollRecord_t r[2];
  int count = 0;
  CHECK(gbBroadcast(buf, buf, 7, gbFloat32, 0, comm, stream) == gbSuccess && gbBarrier(comm, stream) == gbSuccess &&
            gbStreamSynchronize(stream) == gbSuccess,
        "broadcast and barrier: %s", gbGetLastError(comm));
  settle(comm, 0);
  CHECK(gbCommGetRecords(comm, r, 2, &count) == gbSuccess && count == 2, "records: %d", count);
  CHECK(r[0].coll == gbCollBroadcast && r[0].root == 0 && r[0].op == -1 && r[0].count == 7, "broadcast: %d %d %d %llu",
        r[0].coll, r[0].root, r[0].op, (unsigned long long)r[0].count);
  CHECK(r[1].coll == gbCollAllReduce && r[1].count == 1 && r[1].dtype == gbInt32 && r[1].seq == r[0].seq + 1,
        "barrier records as an all-reduce of 1 int32: coll %d count %llu dtype %d", r[1].coll,
        (unsigned long long)r[1].count, r[1].dtype);
}

static void dumps(gbComm_t comm) {
  char dir[] = "/tmp/gb-test-trace-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char path[4096] = "";
  CHECK(gbCommDumpTrace(comm, dir, path, sizeof(path)) == gbSuccess, "dump: %s", gbGetLastError(comm));
  const char* base = strrchr(path, '/');
  CHECK(base && strncmp(base + 1, "gpubridge-trace-", 16) == 0 && strlen(base + 1) == 16 + 16 + 8 &&
            strcmp(base + 1 + 32, "-r0.json") == 0 && strncmp(path, dir, strlen(dir)) == 0,
        "dump path %s", path);
  FILE* f = fopen(path, "r");
  CHECK(f != NULL, "open %s", path);
  if (f) {
    char text[256] = "";
    size_t got = fread(text, 1, sizeof(text) - 1, f);
    text[got] = '\0';
    fclose(f);
    CHECK(strncmp(text, "{\"schema\":\"gpubridge-trace/1\"", 29) == 0 && strstr(text, "\"reason\":\"api\""),
          "dump starts %.80s", text);
  }
  DIR* d = opendir(dir);
  int files = 0;
  for (struct dirent* e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') files++;
  if (d) closedir(d);
  CHECK(files == 1, "%d files in %s, not 1 (no temporary file left)", files, dir);
  unlink(path);
  rmdir(dir);

  /* A regular file where the directory should be: an error that says what to do. */
  char notDir[] = "/tmp/gb-test-trace-file-XXXXXX";
  int fd = mkstemp(notDir);
  CHECK(fd >= 0, "mkstemp");
  if (fd >= 0) close(fd);
  gbResult_t r = gbCommDumpTrace(comm, notDir, path, sizeof(path));
  const char* text = gbGetLastError(NULL);
  CHECK(r == gbSystemError && strstr(text, "cannot write") && strstr(text, "GPUBRIDGE_TRACE_DIR") &&
            strstr(text, notDir),
        "dump into a file: %d \"%s\"", (int)r, text);
  unlink(notDir);
  /* No directory given and none set. */
  r = gbCommDumpTrace(comm, NULL, NULL, 0);
  CHECK(r == gbInvalidUsage && strstr(gbGetLastError(NULL), "GPUBRIDGE_TRACE_DIR"), "dump without a dir: %d \"%s\"",
        (int)r, gbGetLastError(NULL));
}

static void phases(void) {
  gbCollRecord_t r;
  memset(&r, 0, sizeof(r));
  r.state = gbRecordInFlight;
  r.flags = GB_RECORD_HAS_CHECK | GB_RECORD_HAS_HOST_STEP;
  r.t[gbPhaseEnqueued] = 1;
  CHECK(strcmp(gbCollRecordPhase(&r), "check") == 0, "no check end: %s", gbCollRecordPhase(&r));
  r.t[gbPhaseCheckBegin] = 2;
  r.t[gbPhaseCheckEnd] = 3;
  CHECK(strcmp(gbCollRecordPhase(&r), "island") == 0, "checked, not staged: %s", gbCollRecordPhase(&r));
  r.t[gbPhaseStaged] = 4;
  CHECK(strcmp(gbCollRecordPhase(&r), "staged") == 0, "staged: %s", gbCollRecordPhase(&r));
  r.t[gbPhaseBridgeBegin] = 5;
  CHECK(strcmp(gbCollRecordPhase(&r), "bridge") == 0, "bridging: %s", gbCollRecordPhase(&r));
  r.t[gbPhaseBridgeEnd] = 6;
  CHECK(strcmp(gbCollRecordPhase(&r), "copy-back") == 0, "bridged: %s", gbCollRecordPhase(&r));
  r.flags = 0;
  CHECK(strcmp(gbCollRecordPhase(&r), "island") == 0, "no host step: %s", gbCollRecordPhase(&r));
  r.state = gbRecordFailed;
  CHECK(strcmp(gbCollRecordPhase(&r), "failed") == 0, "failed: %s", gbCollRecordPhase(&r));
}

static void off(void* stream, float* buf) {
  setenv("GPUBRIDGE_TRACE_BUFFER", "0", 1);
  gbParamReset();
  gbComm_t comm = initOne();
  seen_t seen;
  memset(&seen, 0, sizeof(seen));
  gbResult_t r = gbCommSetObserver(comm, observe, &seen);
  CHECK(r == gbInvalidUsage && strstr(gbGetLastError(NULL), "GPUBRIDGE_TRACE_BUFFER"), "observer when off: %d \"%s\"",
        (int)r, gbGetLastError(NULL));
  int count = -1;
  gbCollRecord_t rec;
  CHECK(gbCommGetRecords(comm, &rec, 1, &count) == gbInvalidUsage && count == -1, "records when off");
  CHECK(allReduces(comm, stream, 2, 3, buf) && gbStreamSynchronize(stream) == gbSuccess, "all-reduce when off: %s",
        gbGetLastError(comm));
  CHECK(gbCommDestroy(comm) == gbSuccess, "destroy: %s", gbGetLastError(NULL));
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  unsetenv("GPUBRIDGE_TRACE_DIR");
  void* stream = NULL;
  if (gbStreamCreate(&stream) != gbSuccess) return printf("FAIL: gbStreamCreate: %s\n", gbGetLastError(NULL)), 1;
  static float buf[64];
  static const char* const modes[] = {"auto", "marker", "flag"};
  for (int m = 0; m < 3; m++) {
    setenv("GPUBRIDGE_TRACE_DONE", modes[m], 1);
    setenv("GPUBRIDGE_TRACE_BUFFER", "5", 1); /* rounded up to 8 */
    gbParamReset();
    byFlag = strcmp(modes[m], "flag") == 0; /* auto: the host device runs host functions: marker */
    int before = failures;
    gbComm_t comm = initOne();
    recordsAndObserver(comm, stream, buf);
    inFlight(comm, stream, buf);
    otherCalls(comm, stream, buf);
    dumps(comm);
    CHECK(gbCommDestroy(comm) == gbSuccess, "destroy: %s", gbGetLastError(NULL));
    off(stream, buf);
    printf("GPUBRIDGE_TRACE_DONE=%s: %s\n", modes[m], failures == before ? "ok" : "FAILED");
  }
  phases();
  gbStreamDestroy(stream);
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
