/* The members of a test group as threads of one process (test_algo,
 * test_algo_coll): their shared state, the first failure (which aborts the
 * others), a barrier with a deadline, and one run of n members that reports
 * the checks made or the failure. The includer defines MAX_N, TIMEOUT_SEC
 * and, before runGroup's call, its members' main function. */
#ifndef GB_TESTS_UNIT_MEMBER_THREADS_H
#define GB_TESTS_UNIT_MEMBER_THREADS_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "os/socket.h"

#if !defined(MAX_N) || !defined(TIMEOUT_SEC)
#error "define MAX_N (the most members) and TIMEOUT_SEC (a barrier's deadline) before member_threads.h"
#endif

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, arrived;
  unsigned long gen;
  gbSockAddr_t addrs[MAX_N];
  const void* results[MAX_N]; /* each member's output of the current case, where a test compares them */
  atomic_int abortFlag;
  char failure[1024];
} shared_t;

typedef struct {
  shared_t* sh;
  int me;
  long checks;
} member_t;

/* The first failure's text; every member's calls abort. */
static void fail(shared_t* sh, const char* fmt, ...) {
  pthread_mutex_lock(&sh->mu);
  if (sh->failure[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->failure, sizeof sh->failure, fmt, ap);
    va_end(ap);
  }
  atomic_store_explicit(&sh->abortFlag, 1, memory_order_seq_cst);
  pthread_cond_broadcast(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
}

/* A barrier that gives up on abort or after the deadline. */
static int barrier(shared_t* sh) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)TIMEOUT_SEC;
  pthread_mutex_lock(&sh->mu);
  unsigned long gen = sh->gen;
  if (++sh->arrived == sh->n) {
    sh->arrived = 0;
    sh->gen++;
    pthread_cond_broadcast(&sh->cv);
  }
  int rc = 0;
  while (sh->gen == gen && !sh->abortFlag && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&sh->cv, &sh->mu, &until);
  }
  int ok = sh->gen != gen;
  pthread_mutex_unlock(&sh->mu);
  if (!ok && !sh->abortFlag) fail(sh, "barrier timed out after %.0f s", TIMEOUT_SEC);
  return ok;
}

/* n members, each a thread running memberMain; 1 when none failed. */
static int runGroup(const char* test, int n, void* (*memberMain)(void*)) {
  shared_t sh;
  memset(&sh, 0, sizeof sh);
  pthread_mutex_init(&sh.mu, NULL);
  pthread_cond_init(&sh.cv, NULL);
  sh.n = n;
  member_t members[MAX_N];
  pthread_t threads[MAX_N];
  int64_t t0 = gbClockNowNs();
  for (int i = 0; i < n; i++) {
    members[i] = (member_t){&sh, i, 0};
    if (pthread_create(&threads[i], NULL, memberMain, &members[i]) != 0) {
      fprintf(stderr, "%s: cannot start thread %d\n", test, i);
      exit(2);
    }
  }
  long checks = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(threads[i], NULL);
    checks += members[i].checks;
  }
  pthread_mutex_destroy(&sh.mu);
  pthread_cond_destroy(&sh.cv);
  if (sh.failure[0] != '\0') {
    fprintf(stderr, "%s: FAIL (n=%d): %s\n", test, n, sh.failure);
    return 0;
  }
  printf("%s: n=%d ok, %ld checks, %.2f s\n", test, n, checks, (double)(gbClockNowNs() - t0) / 1e9);
  return 1;
}

#endif
