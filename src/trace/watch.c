/* The flight recorder's watcher: one thread per process, alive while a
 * ring is, that writes every ring's dump when GPUBRIDGE_TRACE_SIGNAL
 * arrives (rings whose owner finished its start-up). The signal handler only writes a
 * byte to a pipe (async-signal-safe); the thread does the work. The dump is
 * never left to the proxy: in a hang, the proxy is the thread that is stuck.
 *
 * It also ends the records of rings with done flags (done.c): while
 * one has records pending, it looks every 1 ms; with none, it sleeps in
 * poll() until a caller hands one over and wakes it through the pipe (only
 * when it announced it went idle: no system call per collective).
 *
 * The pipe is made once and kept for the life of the process: an installed
 * handler may run at any time, and must never write to a closed (or reused)
 * descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "trace/trace.h"

/* GPUBRIDGE_TRACE_SIGNAL's values, in the order of its choices. */
static const int signalOf[] = {0, SIGUSR1, SIGUSR2};
static const char* const signalName[] = {"off", "USR1", "USR2"};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int pipeFd[2] = {-1, -1}; /* written before the handler is installed; never closed */
static int users;                /* rings (lock) */
static int running;              /* the thread runs (lock) */
static atomic_int quit;          /* the thread should leave (atomic) */
static pthread_t thread;
static int handlerSet;           /* the signal handler was considered (lock) */
static atomic_int pending;       /* a signal arrived (atomic: the handler may run on any thread) */
static pthread_mutex_t ringsLock = PTHREAD_MUTEX_INITIALIZER; /* the list below, and a poll or dump of it */
static gbTrace_t* rings;         /* every ring counted in users (ringsLock) */
static atomic_int idle;          /* the thread sleeps without a deadline (seq_cst) */
#define POLL_MS 1

static void onSignal(int sig) {
  (void)sig;
  int saved = errno;
  atomic_store_explicit(&pending, 1, memory_order_release);
  ssize_t n = write(pipeFd[1], "x", 1); /* a full pipe already holds a wake-up */
  (void)n;
  errno = saved;
}

/* Every ring whose owner is ready; a ring stays while it is dumped (its
 * gbTraceWatchStop waits). */
static void dumpAll(void) {
  pthread_mutex_lock(&ringsLock);
  for (gbTrace_t* t = rings; t; t = t->watchedNext)
    if (t->setup.owner.ready(t->setup.owner.ctx))
      gbTraceDump(t, NULL, "signal", NULL, 0); /* a failure is logged where it is found */
  pthread_mutex_unlock(&ringsLock);
}

/* Polls every ring with pending records (only rings with done flags have
 * any); returns how many are pending. */
static uint64_t pollRings(void) {
  uint64_t left = 0;
  pthread_mutex_lock(&ringsLock);
  for (gbTrace_t* t = rings; t; t = t->watchedNext)
    if (atomic_load_explicit(&t->flagsPending, memory_order_seq_cst) > 0) left += gbTraceDonePoll(t, 0);
  pthread_mutex_unlock(&ringsLock);
  return left;
}

static int anyPending(void) {
  int any = 0;
  pthread_mutex_lock(&ringsLock);
  for (gbTrace_t* t = rings; t && !any; t = t->watchedNext)
    any = atomic_load_explicit(&t->flagsPending, memory_order_seq_cst) > 0;
  pthread_mutex_unlock(&ringsLock);
  return any;
}

void gbTraceWatchWake(void) {
  if (atomic_load_explicit(&idle, memory_order_seq_cst) && atomic_exchange_explicit(&idle, 0, memory_order_seq_cst)) {
    ssize_t n = write(pipeFd[1], "w", 1); /* a full pipe already holds a wake-up */
    (void)n;
  }
}

static void* watchMain(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "gb-trace"); /* for top -H and debuggers */
  struct pollfd p = {pipeFd[0], POLLIN, 0};
  while (!atomic_load_explicit(&quit, memory_order_acquire)) {
    int timeout = POLL_MS;
    if (pollRings() == 0) {
      /* Idle, then look again: a caller raises its count before it looks
       * at idle (both seq_cst), so either it wakes this thread or this look
       * sees its record. */
      atomic_store_explicit(&idle, 1, memory_order_seq_cst);
      if (!anyPending()) timeout = -1;
    }
    int n = poll(&p, 1, timeout);
    atomic_store_explicit(&idle, 0, memory_order_seq_cst);
    if (n < 0 && errno != EINTR) break;
    char drain[64];
    while (read(pipeFd[0], drain, sizeof(drain)) > 0) {
    }
    if (atomic_exchange_explicit(&pending, 0, memory_order_acq_rel)) {
      if (*gbParamString(GB_PARAM_TRACE_DIR)) dumpAll();
      else GB_WARN("GPUBRIDGE_TRACE_SIGNAL arrived, but GPUBRIDGE_TRACE_DIR is not set: no dump written");
    }
  }
  return NULL;
}

static gbResult_t makePipe(void) {
  if (pipeFd[0] >= 0) return gbSuccess;
  if (pipe2(pipeFd, O_CLOEXEC | O_NONBLOCK) != 0) {
    pipeFd[0] = pipeFd[1] = -1;
    return gbErrorSet(gbSystemError, "flight recorder: cannot make its wake-up pipe: %s (too many open files?)",
                      strerror(errno));
  }
  return gbSuccess;
}

/* Installs the handler once per process, only where nobody else handles the signal. */
static void installHandler(void) {
  if (handlerSet) return;
  handlerSet = 1;
  int which = (int)gbParamInt(GB_PARAM_TRACE_SIGNAL);
  if (which <= 0 || which >= (int)(sizeof(signalOf) / sizeof(signalOf[0]))) return;
  struct sigaction now;
  if (sigaction(signalOf[which], NULL, &now) != 0) return;
  if (now.sa_handler != SIG_DFL || (now.sa_flags & SA_SIGINFO)) {
    GB_WARN("GPUBRIDGE_TRACE_SIGNAL=%s: this process already handles SIG%s; no dump on that signal (call "
            "gbCommDumpTrace instead)", signalName[which], signalName[which]);
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signalOf[which], &sa, NULL) != 0)
    GB_WARN("GPUBRIDGE_TRACE_SIGNAL=%s: cannot install a handler: %s", signalName[which], strerror(errno));
  else
    GB_INFO(GB_LOG_INIT, "flight recorder: SIG%s writes every communicator's dump to GPUBRIDGE_TRACE_DIR",
            signalName[which]);
}

gbResult_t gbTraceWatchStart(gbTrace_t* t) {
  pthread_mutex_lock(&lock);
  gbResult_t res = makePipe();
  if (res == gbSuccess && !running) {
    atomic_store_explicit(&quit, 0, memory_order_release);
    int err = pthread_create(&thread, NULL, watchMain, NULL);
    if (err) res = gbErrorSet(gbSystemError, "flight recorder: cannot start its thread: %s", strerror(err));
    else running = 1;
  }
  if (res == gbSuccess) {
    installHandler();
    users++;
    t->watching = 1;
    pthread_mutex_lock(&ringsLock);
    t->watchedNext = rings;
    rings = t;
    pthread_mutex_unlock(&ringsLock);
  }
  pthread_mutex_unlock(&lock);
  return res;
}

void gbTraceWatchStop(gbTrace_t* t) {
  if (!t || !t->watching) return;
  t->watching = 0;
  /* Out of the list under ringsLock: a poll or dump in progress ends first. */
  pthread_mutex_lock(&ringsLock);
  for (gbTrace_t** p = &rings; *p; p = &(*p)->watchedNext)
    if (*p == t) {
      *p = t->watchedNext;
      break;
    }
  t->watchedNext = NULL;
  pthread_mutex_unlock(&ringsLock);
  pthread_mutex_lock(&lock);
  if (--users == 0 && running) {
    atomic_store_explicit(&quit, 1, memory_order_release);
    ssize_t n = write(pipeFd[1], "q", 1);
    (void)n;
    pthread_join(thread, NULL); /* it holds no lock of ours while it waits */
    running = 0;
  }
  pthread_mutex_unlock(&lock);
}
