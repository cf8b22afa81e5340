/* One rank of the flight-recorder fault tests (tests/mp/test_trace_faults.py).
 *
 * Usage: rank_trace --scenario stop|kill|skip|skip-last|count --victim R
 *                   [--calls 8] [--at 5] [--idle-seconds 60]
 *
 * Every rank makes `calls` float32 sum all-reduces, call i with count 1000+i,
 * each on its own buffer, and enqueues them all before it synchronizes (a
 * failed communicator refuses new calls, and the analyzer aligns the calls
 * after a skipped one). The victim departs from that at call `at`:
 *   stop, kill   it synchronizes calls 1..at-1, then raises SIGSTOP or SIGKILL
 *                on itself ("victim pid P raises SIGSTOP before call #at")
 *   skip         it leaves out call `at` and makes the others
 *   skip-last    it leaves out the last call
 *   count        it calls `at` with half the count
 * Then each rank synchronizes and reads the communicator's asynchronous
 * error. On an error it prints "error after X.XX s: <text>", aborts the
 * communicator (so the flight recorder's dump is complete before the process
 * ends) and exits 1. Without one it prints "no error after X.XX s: N calls
 * finished" and idles, the communicator alive, until its dump appears in
 * GPUBRIDGE_TRACE_DIR (the driver sends GPUBRIDGE_TRACE_SIGNAL) or
 * --idle-seconds pass; then it aborts and exits 2 ("dumped on the signal")
 * or 5 ("no dump within S s"). Public API only. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rank_die.h"

static void leave(int code) {
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

static int launcherRank(void) {
  const char* names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (int i = 0; i < 3; i++)
    if (getenv(names[i])) return atoi(getenv(names[i]));
  return -1;
}

static void oneLine(const char* in, char* out, size_t len) {
  snprintf(out, len, "%s", in && *in ? in : "(empty error text)");
  for (char* p = out; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
}

/* Synchronizes and returns the first failure (synchronize or asynchronous error). */
static gbResult_t finish(gbComm_t comm, void* stream) {
  gbResult_t r = gbStreamSynchronize(stream);
  if (r == gbSuccess) {
    gbResult_t async = gbSuccess;
    r = gbCommGetAsyncError(comm, &async);
    if (r == gbSuccess) r = async;
  }
  return r;
}

/* Whether DIR holds gpubridge-trace-*-r<rank>.json. */
static int haveDump(const char* dir, int rank) {
  char tail[32];
  snprintf(tail, sizeof(tail), "-r%d.json", rank);
  DIR* d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent* e;
  while (!found && (e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name), t = strlen(tail);
    found = strncmp(e->d_name, "gpubridge-trace-", 16) == 0 && n > t && strcmp(e->d_name + n - t, tail) == 0;
  }
  closedir(d);
  return found;
}

/* Idles with the communicator alive until this rank's dump appears. */
static void idleUntilDumped(gbComm_t comm, int rank, double seconds) {
  const char* dir = getenv("GPUBRIDGE_TRACE_DIR");
  double end = nowS() + seconds;
  int dumped = 0;
  while (!(dumped = dir && *dir && haveDump(dir, rank)) && nowS() < end) {
    struct timespec ts = {0, 20 * 1000 * 1000}; /* polling interval of a deadline-bounded wait */
    nanosleep(&ts, NULL);
  }
  if (dumped) printf("dumped on the signal\n");
  else printf("no dump within %.0f s in GPUBRIDGE_TRACE_DIR=%s\n", seconds, dir ? dir : "(unset)");
  gbCommAbort(comm);
  leave(dumped ? 2 : 5);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* scenario = NULL;
  int victim = -1, calls = 8, at = 5;
  double idleSeconds = 60;
  for (int i = 1; i < argc; i++) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--scenario") == 0 && v) scenario = v, i++;
    else if (strcmp(argv[i], "--victim") == 0 && v) victim = atoi(v), i++;
    else if (strcmp(argv[i], "--calls") == 0 && v) calls = atoi(v), i++;
    else if (strcmp(argv[i], "--at") == 0 && v) at = atoi(v), i++;
    else if (strcmp(argv[i], "--idle-seconds") == 0 && v) idleSeconds = atof(v), i++;
    else {
      printf("rank_trace: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  static const char* const known[] = {"stop", "kill", "skip", "skip-last", "count"};
  int kind = -1;
  for (int k = 0; scenario && k < 5; k++)
    if (strcmp(scenario, known[k]) == 0) kind = k;
  if (kind < 0 || victim < 0 || calls < 2 || calls > 1000 || at < 1 || at > calls) {
    printf("rank_trace: need --scenario stop|kill|skip|skip-last|count, --victim R, 2 <= --calls <= 1000, "
           "1 <= --at <= calls\n");
    return 2;
  }
  if (kind == 3) at = calls; /* skip-last */
  gRank = launcherRank();
  int me = gRank == victim;

  gbComm_t comm = NULL;
  CHECK_GB(gbCommInitFromEnv(&comm, NULL));
  void* stream = NULL;
  CHECK_GB(gbStreamCreate(&stream));
  size_t maxCount = 1000 + (size_t)calls;
  char* buf = NULL;
  CHECK_GB(gbMemAlloc((void**)&buf, (size_t)calls * maxCount * sizeof(float)));

  double t0 = nowS();
  gbResult_t r = gbSuccess;
  int made = 0;
  for (int i = 1; i <= calls && r == gbSuccess; i++) {
    size_t count = 1000 + (size_t)i;
    if (me && i == at) {
      if (kind == 0 || kind == 1) { /* stop, kill: everything before `at` finished first */
        r = finish(comm, stream);
        if (r != gbSuccess) break;
        printf("victim pid %d raises %s before call #%d\n", (int)getpid(), kind == 0 ? "SIGSTOP" : "SIGKILL", at);
        fflush(stdout);
        raise(kind == 0 ? SIGSTOP : SIGKILL);
        leave(3); /* not reached for SIGKILL; a stopped victim is killed by the driver */
      }
      if (kind == 2 || kind == 3) continue; /* skip, skip-last */
      count /= 2;                           /* count */
    }
    void* p = buf + (size_t)(i - 1) * maxCount * sizeof(float);
    r = gbAllReduce(p, p, count, gbFloat32, gbSum, comm, stream);
    if (r != gbSuccess) printf("call #%d refused (%d): %s\n", i, (int)r, gbGetLastError(comm));
    else made++;
  }
  if (r == gbSuccess) r = finish(comm, stream);
  if (r != gbSuccess) {
    char line[8192];
    oneLine(gbGetLastError(comm), line, sizeof(line));
    printf("error after %.2f s: %s\n", nowS() - t0, line);
    gbCommAbort(comm); /* waits for a dump in progress: abort before exit */
    leave(1);
  }
  printf("no error after %.2f s: %d calls finished\n", nowS() - t0, made);
  idleUntilDumped(comm, gRank, idleSeconds);
  return 0;
}
