/* One rank of the fault tests (tests/mp/test_faults.py).
 *
 * Usage: rank_faults --victim R --phase startup|island|bridge|p2p|loop --signal KILL|STOP [--count N] [--cycles N]
 *        rank_faults --abort-test --victim R --aborter A [--count N]
 *
 * Fault mode: the victim prints "victim pid P" and raises the signal on
 * itself: before init (startup), or after init right after enqueueing a
 * large all-reduce (island, bridge: the phase only names which rank the
 * driver chose), or a large send/recv group around the ring (p2p: send to
 * rank + 1, receive from rank - 1). Every survivor times its init (startup) or its all-reduce
 * (or send/recv group)
 * (enqueue + gbStreamSynchronize + gbCommGetAsyncError) and prints
 * "error after X.XX s: <gbGetLastError text>" and exits 1 when it sees an
 * error, or "no error after X.XX s" and exits 2 when it does not. Before an
 * error line it prints "began at T" (T: when the timing began, seconds of
 * CLOCK_MONOTONIC, which every process of the machine shares), so a driver
 * can tell a survivor that began late from one that took long.
 *
 * Loop (start-up over and over): every rank inits from the environment,
 * splits the communicator (one color, the same order, so the child's rank
 * numbers are the job's), destroys the child, then the parent,
 * up to --cycles N times (default 100000); the driver signals a rank from
 * outside at a moment of its choosing. A rank whose init, split or destroy
 * fails prints "error after X.XX s: <text>" (X from the start of that
 * cycle) and exits 1; "no error after X.XX s: N cycles" (exit 2) if none did.
 *
 * Abort mode: every rank inits; the victim stops itself; the aborter enqueues
 * an all-reduce (which waits on the stopped peer), checks for half a second
 * that it does not finish, then calls gbCommAbort from a second thread and
 * prints "abort returned after A s; synchronize returned after S s ...". It
 * exits 0 when both came back within 2 s, else 1. The other ranks behave as
 * survivors above. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpubridge/gpubridge.h"

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int launcherRank(void) {
  const char* names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
  for (int i = 0; i < 3; i++)
    if (getenv(names[i])) return atoi(getenv(names[i]));
  return -1;
}

/* Leaves without running library destructors: a failed job must not be
 * held up by its own teardown. */
static void leave(int code) {
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

static void oneLine(const char* in, char* out, size_t len) {
  snprintf(out, len, "%s", in && *in ? in : "(empty error text)");
  for (char* p = out; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
}

static void reportError(double t0, const char* text) {
  char line[8192];
  oneLine(text, line, sizeof(line));
  printf("began at %.3f\n", t0);
  printf("error after %.2f s: %s\n", nowS() - t0, line);
  leave(1);
}

static void becomeVictim(int sig) {
  printf("victim pid %d raises %s\n", (int)getpid(), sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
  fflush(stdout);
  raise(sig);
  if (sig == SIGKILL) leave(3); /* not reached */
}

static void* dev(size_t bytes) {
  void* p = NULL;
  gbResult_t r = gbMemAlloc(&p, bytes);
  if (r != gbSuccess) {
    printf("setup: gbMemAlloc(%zu) returned %d: %s\n", bytes, (int)r, gbGetLastError(NULL));
    leave(4);
  }
  return p;
}

/* The operation the job runs after init: an all-reduce in place on buf, or
 * (p2p) a send of buf to the next rank and a receive from the previous one
 * into the buffer's second half. */
static gbResult_t enqueueOp(gbComm_t comm, void* stream, void* buf, size_t count, int p2p) {
  if (!p2p) return gbAllReduce(buf, buf, count, gbFloat32, gbSum, comm, stream);
  int me = 0, n = 0;
  gbResult_t r = gbCommUserRank(comm, &me);
  if (r == gbSuccess) r = gbCommCount(comm, &n);
  if (r == gbSuccess) r = gbGroupStart();
  if (r != gbSuccess) return r;
  gbResult_t s = gbSend(buf, count, gbFloat32, (me + 1) % n, comm, stream);
  if (s == gbSuccess) s = gbRecv((float*)buf + count, count, gbFloat32, (me + n - 1) % n, comm, stream);
  r = gbGroupEnd();
  return s != gbSuccess ? s : r;
}

/* enqueue + synchronize + async error; returns the first failure or gbSuccess. */
static gbResult_t timedOp(gbComm_t comm, void* stream, void* buf, size_t count, int p2p, const char** text) {
  gbResult_t r = enqueueOp(comm, stream, buf, count, p2p);
  if (r == gbSuccess) r = gbStreamSynchronize(stream);
  if (r == gbSuccess) {
    gbResult_t async = gbSuccess;
    r = gbCommGetAsyncError(comm, &async);
    if (r == gbSuccess) r = async;
  }
  *text = gbGetLastError(comm);
  return r;
}

/* ------------------------------------------------------------ abort mode */

typedef struct {
  gbComm_t comm;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int syncReturned;
  double abortStart, abortEnd;
  gbResult_t abortResult;
  int finishedEarly;
} aborter_t;

static void* abortThread(void* arg) {
  aborter_t* a = arg;
  /* The collective must still be waiting on the stopped peer: give it half a
   * second to (wrongly) finish, then abort. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += 500 * 1000 * 1000;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&a->mu);
  while (!a->syncReturned)
    if (pthread_cond_timedwait(&a->cv, &a->mu, &until) != 0) break;
  a->finishedEarly = a->syncReturned;
  pthread_mutex_unlock(&a->mu);
  a->abortStart = nowS();
  a->abortResult = gbCommAbort(a->comm);
  a->abortEnd = nowS();
  return NULL;
}

static int runAborter(gbComm_t comm, void* stream, void* buf, size_t count) {
  aborter_t a;
  memset(&a, 0, sizeof(a));
  a.comm = comm;
  pthread_mutex_init(&a.mu, NULL);
  pthread_cond_init(&a.cv, NULL);
  gbResult_t r = gbAllReduce(buf, buf, count, gbFloat32, gbSum, comm, stream);
  if (r != gbSuccess) {
    printf("abort test: gbAllReduce returned %d before the abort: %s\n", (int)r, gbGetLastError(comm));
    leave(1);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, abortThread, &a) != 0) {
    printf("abort test: cannot start the abort thread\n");
    leave(4);
  }
  gbResult_t s = gbStreamSynchronize(stream);
  double syncEnd = nowS();
  pthread_mutex_lock(&a.mu);
  a.syncReturned = 1;
  pthread_cond_signal(&a.cv);
  pthread_mutex_unlock(&a.mu);
  pthread_join(t, NULL);
  if (a.finishedEarly) {
    printf("abort test: the all-reduce finished (result %d) although rank peer was stopped\n", (int)s);
    leave(1);
  }
  double abortS = a.abortEnd - a.abortStart, syncS = syncEnd - a.abortStart;
  char line[8192];
  oneLine(gbGetLastError(NULL), line, sizeof(line));
  printf("abort returned after %.2f s (result %d); synchronize returned after %.2f s (result %d): %s\n", abortS,
         (int)a.abortResult, syncS, (int)s, line);
  leave(abortS <= 2.0 && syncS <= 2.0 ? 0 : 1);
  return 0;
}

/* One cycle of the loop phase; gbSuccess or the failing call's result, its
 * text in *text. */
static gbResult_t startupCycle(int me, const char** text) {
  gbComm_t comm = NULL, child = NULL;
  gbResult_t r = gbCommInitFromEnv(&comm, NULL);
  if (r != gbSuccess) {
    *text = gbGetLastError(NULL);
    return r;
  }
  r = gbCommSplit(comm, 0, me, &child, NULL); /* one color, same order: a text's rank numbers are the job's */
  if (r == gbSuccess && child) r = gbCommDestroy(child);
  *text = gbGetLastError(r == gbSuccess ? NULL : comm);
  gbResult_t d = gbCommDestroy(comm);
  if (r == gbSuccess && d != gbSuccess) *text = gbGetLastError(NULL);
  return r != gbSuccess ? r : d;
}

static int runLoop(int me, size_t cycles) {
  double t0 = nowS();
  for (size_t i = 0; i < cycles; i++) {
    const char* text = "";
    t0 = nowS();
    if (startupCycle(me, &text) != gbSuccess) reportError(t0, text);
  }
  printf("no error after %.2f s: %zu cycles\n", nowS() - t0, cycles);
  leave(2);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int victim = -1, aborter = -1, abortMode = 0, sig = 0;
  const char* phase = NULL;
  size_t count = (size_t)8 << 20; /* 32 MiB of float32 */
  size_t cycles = 100000;         /* loop phase */
  for (int i = 1; i < argc; i++) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--abort-test") == 0) abortMode = 1;
    else if (strcmp(argv[i], "--victim") == 0 && v) victim = atoi(v), i++;
    else if (strcmp(argv[i], "--aborter") == 0 && v) aborter = atoi(v), i++;
    else if (strcmp(argv[i], "--phase") == 0 && v) phase = v, i++;
    else if (strcmp(argv[i], "--count") == 0 && v) count = (size_t)strtoull(v, NULL, 10), i++;
    else if (strcmp(argv[i], "--cycles") == 0 && v) cycles = (size_t)strtoull(v, NULL, 10), i++;
    else if (strcmp(argv[i], "--signal") == 0 && v) {
      sig = strcmp(v, "KILL") == 0 ? SIGKILL : strcmp(v, "STOP") == 0 ? SIGSTOP : 0;
      i++;
    } else {
      printf("rank_faults: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (abortMode) sig = SIGSTOP;
  if (victim < 0 || !sig || (!abortMode && !phase) || (abortMode && aborter < 0)) {
    printf("rank_faults: need --victim, --signal and --phase (or --abort-test --victim --aborter)\n");
    return 2;
  }
  int me = launcherRank();
  if (!abortMode && strcmp(phase, "loop") == 0) return runLoop(me, cycles);
  int startup = !abortMode && strcmp(phase, "startup") == 0;
  if (startup && me == victim) becomeVictim(sig);

  gbComm_t comm = NULL;
  double t0 = nowS();
  gbResult_t r = gbCommInitFromEnv(&comm, NULL);
  if (startup) {
    if (r != gbSuccess) reportError(t0, gbGetLastError(NULL));
    printf("no error after %.2f s: init succeeded without rank %d\n", nowS() - t0, victim);
    leave(2);
  }
  if (r != gbSuccess) {
    printf("setup: init failed (%d) before the fault: %s\n", (int)r, gbGetLastError(NULL));
    leave(4);
  }
  void* stream = NULL;
  if (gbStreamCreate(&stream) != gbSuccess) {
    printf("setup: gbStreamCreate failed: %s\n", gbGetLastError(NULL));
    leave(4);
  }
  int p2p = !abortMode && strcmp(phase, "p2p") == 0;
  void* buf = dev(2 * count * sizeof(float));
  if (abortMode) {
    if (me == victim) becomeVictim(SIGSTOP);
    if (me == aborter) return runAborter(comm, stream, buf, count);
  } else if (me == victim) {
    r = enqueueOp(comm, stream, buf, count, p2p);
    if (r != gbSuccess) printf("victim: enqueueing returned %d: %s\n", (int)r, gbGetLastError(comm));
    becomeVictim(sig);
  }
  const char* text = "";
  t0 = nowS();
  r = timedOp(comm, stream, buf, count, p2p, &text);
  if (r != gbSuccess) reportError(t0, text);
  printf("no error after %.2f s: the %s succeeded without rank %d\n", nowS() - t0, p2p ? "send/recv" : "all-reduce",
         victim);
  leave(2);
  return 0;
}
