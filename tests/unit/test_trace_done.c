/* Flight-recorder records that end by a done flag (GPUBRIDGE_TRACE_DONE=flag
 * on the host device: the path GPUs take, since they run no host functions
 * on streams). One-rank communicators:
 * - teardown right after the calls still ends every record, done and in
 *   order, with one observer call each (GB_RECORD_DEVICE_DONE set);
 * - a stream that fails drops the flag writes: those records end failed
 *   (gbRemoteError, as the end marker's drop says), and the flag's error is
 *   cleared, so the entry's next record (the ring wraps) stays in flight
 *   while its stream is held, then ends done;
 * - a communicator that fails while its stream is stuck: the dump written
 *   at the failure shows the calls in flight, then they end failed (the
 *   communicator's error, no GB_RECORD_DEVICE_DONE) while the stream is
 *   still stuck, and nothing ends twice when the stream goes on. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/param.h"
#include "base/result.h"
#include "check.h"
#include "core/comm.h"
#include "device/device.h"
#include "gpubridge/gpubridge.h"

#define MAXREC 32

typedef struct {
  pthread_mutex_t mu;
  int calls;
  gbCollRecord_t recs[MAXREC];
} seen_t;

static void observe(gbComm_t comm, const gbCollRecord_t* r, void* arg) {
  (void)comm;
  seen_t* s = arg;
  pthread_mutex_lock(&s->mu);
  if (s->calls < MAXREC) s->recs[s->calls] = *r;
  s->calls++;
  pthread_mutex_unlock(&s->mu);
}

/* A record's state is published before its observer call: waits (deadline)
 * for n calls; returns how many came. */
static int waitCalls(seen_t* s, int n) {
  gbDeadline_t until = gbDeadlineIn(10.0);
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int got = s->calls;
    pthread_mutex_unlock(&s->mu);
    if (got >= n || gbDeadlinePassed(until)) return got;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
}

/* A stream task that holds the stream until released (or 10 s pass). */
static int gate;
static gbResult_t holdStream(void* arg) {
  (void)arg;
  for (int i = 0; i < 10000 && !__atomic_load_n(&gate, __ATOMIC_ACQUIRE); i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return gbSuccess;
}
static gbResult_t failStream(void* arg) {
  (void)arg;
  return gbErrorSet(gbSystemError, "test: this stream task fails on purpose");
}

static gbComm_t initOne(seen_t* seen) {
  gbUniqueId id;
  gbComm_t comm = NULL;
  if (gbGetUniqueId(&id) != gbSuccess || gbCommInitRank(&comm, 1, id, 0) != gbSuccess) {
    fprintf(stderr, "FAIL: init: %s\n", gbGetLastError(NULL));
    exit(1);
  }
  memset(seen->recs, 0, sizeof(seen->recs));
  seen->calls = 0;
  CHECK(gbCommSetObserver(comm, observe, seen) == gbSuccess, "set observer: %s", gbGetLastError(comm));
  return comm;
}

static int allReduces(gbComm_t comm, void* stream, int n, float* buf) {
  for (int i = 0; i < n; i++)
    if (gbAllReduce(buf, buf, 4, gbFloat32, gbSum, comm, stream) != gbSuccess) return 0;
  return 1;
}

/* Waits (deadline) until comm has inFlight records in flight; returns how many. */
static int waitInFlight(gbComm_t comm, int inFlight) {
  gbCollRecord_t recs[MAXREC];
  int count = -1;
  gbDeadline_t until = gbDeadlineIn(10.0);
  while (gbCommGetInFlight(comm, recs, MAXREC, &count) == gbSuccess && count != inFlight && !gbDeadlinePassed(until)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return count;
}

static void teardownEnds(void* stream, float* buf) {
  seen_t seen = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};
  gbComm_t comm = initOne(&seen);
  const int n = 4;
  CHECK(allReduces(comm, stream, n, buf), "all-reduces: %s", gbGetLastError(comm));
  CHECK(gbCommDestroy(comm) == gbSuccess, "destroy: %s", gbGetLastError(NULL));
  CHECK(seen.calls == n, "teardown: observer called %d times, not %d", seen.calls, n);
  for (int i = 0; i < n && i < seen.calls; i++) {
    const gbCollRecord_t* r = &seen.recs[i];
    CHECK(r->seq == (uint64_t)i + 1 && r->state == gbRecordDone && r->result == gbSuccess &&
              (r->flags & GB_RECORD_DEVICE_DONE) && r->t[gbPhaseDone] >= r->t[gbPhaseEnqueued],
          "teardown: observer call %d: seq %llu state %d result %d flags %d", i, (unsigned long long)r->seq, r->state,
          r->result, r->flags);
  }
}

static void droppedWrites(void* stream, float* buf) {
  const gbDeviceOps* dev = NULL;
  CHECK(gbDeviceGet(&dev) == gbSuccess && dev->launchHostFn, "host device");
  if (!dev || !dev->launchHostFn) return;
  seen_t seen = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};
  gbComm_t comm = initOne(&seen); /* cap 8 */
  CHECK(dev->launchHostFn(stream, failStream, NULL, NULL) == gbSuccess, "queue a failing task");
  CHECK(allReduces(comm, stream, 2, buf), "all-reduces: %s", gbGetLastError(comm));
  CHECK(gbStreamSynchronize(stream) == gbSystemError, "synchronize returns the stream's error");
  CHECK(waitInFlight(comm, 0) == 0, "dropped: records still in flight after 10 s");
  CHECK(allReduces(comm, stream, 6, buf) && gbStreamSynchronize(stream) == gbSuccess, "all-reduces: %s",
        gbGetLastError(comm));
  CHECK(waitInFlight(comm, 0) == 0, "records 3..8 still in flight after 10 s");
  /* Id 9 reuses the entry of id 1, whose flag held the drop's error: with the
   * stream held, the watcher looks at it about 50 times and must leave it in
   * flight (a stale error would end it failed). */
  __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
  CHECK(dev->launchHostFn(stream, holdStream, NULL, NULL) == gbSuccess, "hold the stream");
  CHECK(allReduces(comm, stream, 1, buf), "all-reduce: %s", gbGetLastError(comm));
  struct timespec looks = {0, 50 * 1000 * 1000};
  nanosleep(&looks, NULL);
  gbCollRecord_t rec;
  int count = -1;
  CHECK(gbCommGetInFlight(comm, &rec, 1, &count) == gbSuccess && count == 1 && rec.seq == 9,
        "record 9 in flight while the stream is held: count %d seq %llu", count, (unsigned long long)rec.seq);
  __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  CHECK(gbStreamSynchronize(stream) == gbSuccess, "synchronize: %s", gbGetLastError(comm));
  CHECK(waitInFlight(comm, 0) == 0, "records still in flight after 10 s");
  int calls = waitCalls(&seen, 9);
  CHECK(calls == 9, "observer called %d times, not 9", calls);
  for (int i = 0; i < calls && i < 9; i++) {
    const gbCollRecord_t* r = &seen.recs[i];
    int dropped = i < 2;
    CHECK(r->seq == (uint64_t)i + 1 && r->state == (dropped ? gbRecordFailed : gbRecordDone) &&
              r->result == (dropped ? gbRemoteError : gbSuccess) && (r->flags & GB_RECORD_DEVICE_DONE),
          "call %d (%s): seq %llu state %d result %d flags %d", i + 1, dropped ? "dropped" : "done",
          (unsigned long long)r->seq, r->state, r->result, r->flags);
  }
  gbCommCounters_t k;
  CHECK(gbCommGetCounters(comm, &k) == gbSuccess && k.completed == 7 && k.failed == 2,
        "counters: completed %llu (not 7) failed %llu (not 2)", (unsigned long long)k.completed,
        (unsigned long long)k.failed);
  CHECK(gbCommDestroy(comm) == gbSuccess, "destroy: %s", gbGetLastError(NULL));
}

static int countIn(const char* path, const char* what) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  static char text[1 << 16];
  size_t got = fread(text, 1, sizeof(text) - 1, f);
  text[got] = '\0';
  fclose(f);
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static void failedComm(void* stream, float* buf) {
  const gbDeviceOps* dev = NULL;
  CHECK(gbDeviceGet(&dev) == gbSuccess && dev->launchHostFn, "host device");
  if (!dev || !dev->launchHostFn) return;
  char dir[] = "/tmp/gb-test-trace-done-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  setenv("GPUBRIDGE_TRACE_DIR", dir, 1);
  gbParamReset();
  seen_t seen = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};
  gbComm_t comm = initOne(&seen);
  __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
  CHECK(dev->launchHostFn(stream, holdStream, NULL, NULL) == gbSuccess, "hold the stream");
  const int n = 3;
  CHECK(allReduces(comm, stream, n, buf), "all-reduces: %s", gbGetLastError(comm));
  gbCommFail(comm, gbRemoteError); /* writes the dump before it returns */

  char path[4096];
  snprintf(path, sizeof(path), "%s/gpubridge-trace-%016llx-r0.json", dir, (unsigned long long)gbBootIdHash(&comm->id));
  int inFlight = countIn(path, "\"state\":\"in-flight\"");
  CHECK(inFlight == n, "the dump at the failure shows %d calls in flight, not %d (%s)", inFlight, n, path);
  CHECK(waitInFlight(comm, 0) == 0, "failed: records still in flight 10 s after the failure");
  int calls = waitCalls(&seen, n);
  CHECK(calls == n, "observer called %d times, not %d, while the stream is stuck", calls, n);
  for (int i = 0; i < calls && i < n; i++) {
    const gbCollRecord_t* r = &seen.recs[i];
    CHECK(r->seq == (uint64_t)i + 1 && r->state == gbRecordFailed && r->result == gbRemoteError &&
              !(r->flags & GB_RECORD_DEVICE_DONE) && r->t[gbPhaseDone] > 0,
          "failed %d: seq %llu state %d result %d flags %d", i, (unsigned long long)r->seq, r->state, r->result,
          r->flags);
  }
  __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  (void)gbStreamSynchronize(stream); /* the stream goes on; its result is not the point */
  CHECK(gbCommAbort(comm) == gbSuccess, "abort: %s", gbGetLastError(NULL));
  CHECK(seen.calls == n, "observer called %d times after the stream went on and teardown, not %d", seen.calls, n);
  unlink(path);
  CHECK(rmdir(dir) == 0, "%s holds only the dump", dir);
  unsetenv("GPUBRIDGE_TRACE_DIR");
  gbParamReset();
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  unsetenv("GPUBRIDGE_TRACE_DIR");
  setenv("GPUBRIDGE_TRACE_BUFFER", "8", 1);
  setenv("GPUBRIDGE_TRACE_DONE", "flag", 1);
  void* stream = NULL;
  if (gbStreamCreate(&stream) != gbSuccess) return printf("FAIL: gbStreamCreate: %s\n", gbGetLastError(NULL)), 1;
  static float buf[4];
  teardownEnds(stream, buf);
  droppedWrites(stream, buf);
  failedComm(stream, buf);
  gbStreamDestroy(stream);
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
