/* One rank of the flight-recorder dump tests (tests/mp/test_trace_dump.py).
 *
 * Usage: rank_trace_dump --mode api|timeout|kill [--victim R] [--calls N]
 *
 * Every rank prints "pid P" first. Calls are float32 sum all-reduces, call i
 * with count 1000+i, except in mode api (below).
 *   api      calls 1..N-3 all-reduces, N-2 a 5000-element all-reduce (several
 *            chunks at GPUBRIDGE_CHUNK_BYTES=4K), N-1 a broadcast of 500 from
 *            rank 2, N an all-gather of 64; then one send/recv group (64
 *            floats to rank+1, from rank-1). It synchronizes, waits until no
 *            record is in flight (where records end by flag, the watcher
 *            ends them within a poll of the stream's write), writes its dump
 *            with gbCommDumpTrace(comm, GPUBRIDGE_TRACE_DIR) and prints
 *            "dump PATH", then destroys the communicator.
 *   timeout  the victim makes calls 1..N-1 only, synchronizes, prints
 *            "victim idle", and waits (communicator alive) until its dump
 *            appears (the driver sends GPUBRIDGE_TRACE_SIGNAL), then
 *            destroys it; the others make all N and fail when the deadline
 *            passes.
 *   kill     after N-1 synchronized calls every rank enqueues call N of 1M
 *            elements; the victim then SIGKILLs itself while the others are
 *            inside it.
 * A rank that fails as the mode expects prints "error: <text>", aborts the
 * communicator (which waits for the dump in progress) and exits 0; anything
 * unexpected exits 1 with "FAIL". Public API only. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_die.h"

static int launcherRank(void) {
  const char* v = getenv("RANK");
  return v ? atoi(v) : -1;
}

static gbResult_t finish(gbComm_t comm, void* stream) {
  gbResult_t r = gbStreamSynchronize(stream);
  gbResult_t async = gbSuccess;
  if (r == gbSuccess && gbCommGetAsyncError(comm, &async) == gbSuccess) r = async;
  return r;
}

static void failedAsExpected(gbComm_t comm) {
  char line[2048];
  snprintf(line, sizeof(line), "%s", gbGetLastError(comm));
  for (char* p = line; *p; p++)
    if (*p == '\n') *p = ' ';
  printf("error: %s\n", line);
  fflush(stdout);
  gbCommAbort(comm); /* waits for the dump in progress */
  exit(0);
}

static int haveDump(const char* dir, int rank) {
  char tail[32];
  snprintf(tail, sizeof(tail), "-r%d.json", rank);
  DIR* d = opendir(dir);
  int found = 0;
  for (struct dirent* e; d && !found && (e = readdir(d));) {
    size_t n = strlen(e->d_name), t = strlen(tail);
    found = strncmp(e->d_name, "gpubridge-trace-", 16) == 0 && n > t && strcmp(e->d_name + n - t, tail) == 0;
  }
  if (d) closedir(d);
  return found;
}

/* Records end by flag a poll after the stream's write (GPUBRIDGE_TRACE_DONE=flag). */
static void waitRecordsEnded(gbComm_t comm) {
  gbCollRecord_t recs[16];
  int count = -1;
  double end = nowS() + 10;
  while (gbCommGetInFlight(comm, recs, 16, &count) == gbSuccess && count > 0) {
    if (nowS() > end) DIE("%d records still in flight 10 s after the stream synchronized", count);
    struct timespec ts = {0, 1000 * 1000}; /* polling interval of a deadline-bounded wait */
    nanosleep(&ts, NULL);
  }
  if (count != 0) DIE("gbCommGetInFlight: %s", gbGetLastError(comm));
}

static void apiMode(gbComm_t comm, void* stream, float* buf, int calls, int rank, int n) {
  for (int i = 1; i <= calls - 3; i++) CHECK_GB(gbAllReduce(buf, buf, 1000 + (size_t)i, gbFloat32, gbSum, comm, stream));
  CHECK_GB(gbAllReduce(buf, buf, 5000, gbFloat32, gbSum, comm, stream));
  CHECK_GB(gbBroadcast(buf, buf, 500, gbFloat32, 2 % n, comm, stream));
  CHECK_GB(gbAllGather(buf + rank * 64, buf, 64, gbFloat32, comm, stream));
  CHECK_GB(gbGroupStart());
  CHECK_GB(gbSend(buf + 8192, 64, gbFloat32, (rank + 1) % n, comm, stream));
  CHECK_GB(gbRecv(buf + 16384, 64, gbFloat32, (rank + n - 1) % n, comm, stream));
  CHECK_GB(gbGroupEnd());
  CHECK_GB(finish(comm, stream));
  waitRecordsEnded(comm);
  char path[4096];
  CHECK_GB(gbCommDumpTrace(comm, NULL, path, sizeof(path)));
  printf("dump %s\n", path);
  CHECK_GB(gbCommDestroy(comm));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = "";
  int victim = 3, calls = 6;
  for (int i = 1; i < argc; i++) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--mode") == 0 && v) mode = v, i++;
    else if (strcmp(argv[i], "--victim") == 0 && v) victim = atoi(v), i++;
    else if (strcmp(argv[i], "--calls") == 0 && v) calls = atoi(v), i++;
    else DIE("bad argument '%s'", argv[i]);
  }
  if (calls < 4 || calls > 100) DIE("--calls %d: need 4..100", calls);
  gRank = launcherRank();
  printf("pid %d\n", (int)getpid());
  gbComm_t comm = NULL;
  CHECK_GB(gbCommInitFromEnv(&comm, NULL));
  int n = 0;
  CHECK_GB(gbCommCount(comm, &n));
  void* stream = NULL;
  CHECK_GB(gbStreamCreate(&stream));
  float* buf = NULL;
  size_t elems = 1u << 20;
  CHECK_GB(gbMemAlloc((void**)&buf, elems * sizeof(float)));
  static float zeros[1u << 20];
  CHECK_GB(gbMemcpyToDevice(buf, zeros, sizeof(zeros)));

  if (strcmp(mode, "api") == 0) {
    apiMode(comm, stream, buf, calls, gRank, n);
    CHECK_GB(gbStreamDestroy(stream));
    CHECK_GB(gbMemFree(buf));
    printf("done\n");
    return 0;
  }
  int isVictim = gRank == victim;
  if (strcmp(mode, "timeout") == 0) {
    int mine = isVictim ? calls - 1 : calls;
    for (int i = 1; i <= mine; i++)
      if (gbAllReduce(buf, buf, 1000 + (size_t)i, gbFloat32, gbSum, comm, stream) != gbSuccess) failedAsExpected(comm);
    if (finish(comm, stream) != gbSuccess) {
      if (isVictim) DIE("the idle victim failed: %s", gbGetLastError(comm));
      failedAsExpected(comm);
    }
    if (!isVictim) DIE("all %d calls finished although rank %d made only %d", calls, victim, calls - 1);
    printf("victim idle\n");
    const char* dir = getenv("GPUBRIDGE_TRACE_DIR");
    double end = nowS() + 60;
    while (!(dir && haveDump(dir, gRank))) {
      if (nowS() > end) DIE("no dump of mine in GPUBRIDGE_TRACE_DIR=%s within 60 s", dir ? dir : "(unset)");
      struct timespec ts = {0, 20 * 1000 * 1000}; /* polling interval of a deadline-bounded wait */
      nanosleep(&ts, NULL);
    }
    printf("dumped on the signal\n");
    CHECK_GB(gbCommDestroy(comm)); /* nothing failed here: no dump of its own, the signal's stays */
    CHECK_GB(gbStreamDestroy(stream));
    CHECK_GB(gbMemFree(buf));
    return 0;
  }
  if (strcmp(mode, "kill") == 0) {
    for (int i = 1; i < calls; i++) CHECK_GB(gbAllReduce(buf, buf, 1000 + (size_t)i, gbFloat32, gbSum, comm, stream));
    CHECK_GB(finish(comm, stream));
    if (gbAllReduce(buf, buf, elems, gbFloat32, gbSum, comm, stream) != gbSuccess) failedAsExpected(comm);
    if (isVictim) {
      printf("victim raises SIGKILL inside call #%d\n", calls);
      raise(SIGKILL);
    }
    if (finish(comm, stream) != gbSuccess) failedAsExpected(comm);
    DIE("call #%d finished although rank %d was killed inside it", calls, victim);
  }
  DIE("--mode %s: need api, timeout or kill", mode);
}
