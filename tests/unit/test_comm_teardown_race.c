/* Teardown while other threads use the communicator (host device, one
 * rank; the address and thread sanitizer builds run this test too):
 * - gbCommAbort of rank 0 of a world of 2 (threads) while rank 0's thread
 *   issues all-reduces: the abort returns, and every call of the ranks
 *   returns gbSuccess, an abort's or a peer's error, or "not a live
 *   communicator" (never a freed proxy or stage: teardown waits for calls
 *   inside to leave);
 * - gbCommDestroy and gbCommAbort at once: both return, one tears down
 *   (no double free), and the handle is dead after both;
 * - gbCommAbort while another thread polls the queries (async error, count,
 *   rank, memory, topology, the flight recorder's records, in-flight calls,
 *   counters and observer, the comm's last error), as a watchdog does: every
 *   query returns gbSuccess or "not a live communicator", never reads a
 *   freed recorder or a destroyed lock.
 * Each 20 times, starting the two threads at a barrier. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "unit/one_rank.h"
#include "gpubridge/gpubridge.h"

#define ROUNDS 20

static pthread_barrier_t start;

typedef struct {
  gbUniqueId id;
  int rank;
  gbComm_t comm;
  void* stream;
  int calls;
  gbResult_t bad; /* a result that is none of the expected ones */
  char badText[512];
} caller_t;

static void note(caller_t* c, gbResult_t r) {
  if (r == gbSuccess || r == gbInvalidArgument || r == gbRemoteError || r == gbTimeout) return;
  c->bad = r;
  snprintf(c->badText, sizeof(c->badText), "%s", gbGetLastError(NULL));
}

/* One rank of a world of 2 (threads of this process): all-reduces until
 * one fails (its comm aborted, or its peer's), then it aborts its own. */
static void* callerMain(void* arg) {
  caller_t* c = arg;
  float buf[64] = {1};
  gbResult_t r = gbCommInitRank(&c->comm, 2, c->id, c->rank);
  pthread_barrier_wait(&start); /* both made (or not): the aborter may go */
  if (r != gbSuccess) {
    note(c, gbInternalError);
    return NULL;
  }
  pthread_barrier_wait(&start);
  for (;;) {
    r = gbAllReduce(buf, buf, 64, gbFloat32, gbSum, c->comm, c->stream);
    c->calls++;
    if (r != gbSuccess) break; /* the comm failed or is gone */
    if (c->calls % 64 == 0) (void)gbStreamSynchronize(c->stream);
  }
  note(c, r);
  (void)gbStreamSynchronize(c->stream);
  r = gbCommAbort(c->comm); /* rank 0's may be gone already: then it is no live communicator */
  note(c, r);
  return NULL;
}

static void abortWhileCalling(void) {
  int calls = 0;
  for (int round = 0; round < ROUNDS; round++) {
    caller_t c[2];
    gbUniqueId id;
    if (gbGetUniqueId(&id) != gbSuccess) {
      fprintf(stderr, "FAIL: gbGetUniqueId: %s\n", gbGetLastError(NULL));
      exit(1);
    }
    pthread_t t[2];
    for (int k = 0; k < 2; k++) {
      c[k] = (caller_t){.id = id, .rank = k, .bad = gbSuccess};
      CHECK(gbStreamCreate(&c[k].stream) == gbSuccess, "stream: %s", gbGetLastError(NULL));
      pthread_create(&t[k], NULL, callerMain, &c[k]);
    }
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&start);
    /* Rank 0's thread is inside its calls now, or about to be. */
    gbResult_t r = c[0].comm ? gbCommAbort(c[0].comm) : gbInvalidArgument;
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    CHECK(r == gbSuccess || r == gbInvalidArgument, "round %d: gbCommAbort returned %d: %s", round, (int)r,
          gbGetLastError(NULL));
    for (int k = 0; k < 2; k++) {
      calls += c[k].calls;
      CHECK(c[k].bad == gbSuccess, "round %d: rank %d: a call returned %d: %s", round, k, (int)c[k].bad,
            c[k].badText);
      int n = -1;
      CHECK(gbCommCount(c[k].comm, &n) == gbInvalidArgument, "round %d: rank %d's handle lives on", round, k);
      (void)gbStreamSynchronize(c[k].stream);
      (void)gbStreamDestroy(c[k].stream);
    }
  }
  printf("abort while calling: %d all-reduces in %d rounds\n", calls, ROUNDS);
}

typedef struct {
  gbComm_t comm;
  int destroy;
  gbResult_t res;
} ender_t;

static void* enderMain(void* arg) {
  ender_t* e = arg;
  pthread_barrier_wait(&start);
  e->res = e->destroy ? gbCommDestroy(e->comm) : gbCommAbort(e->comm);
  return NULL;
}

static void destroyAndAbort(void) {
  for (int round = 0; round < ROUNDS; round++) {
    gbComm_t comm = initOne();
    ender_t d = {comm, 1, gbInternalError}, a = {comm, 0, gbInternalError};
    pthread_t t;
    pthread_create(&t, NULL, enderMain, &d);
    enderMain(&a); /* waits at the barrier with t */
    pthread_join(t, NULL);
    CHECK((d.res == gbSuccess || d.res == gbInvalidArgument) && (a.res == gbSuccess || a.res == gbInvalidArgument),
          "round %d: destroy returned %d, abort %d", round, (int)d.res, (int)a.res);
    int n = -1;
    CHECK(gbCommCount(comm, &n) == gbInvalidArgument, "round %d: the handle lives on after both", round);
  }
}

typedef struct {
  gbComm_t comm;
  int polls;
  gbResult_t bad;
  char badText[512];
} poller_t;

/* Polls every query until one says the comm is gone; records a result that
 * is neither success nor that. */
static void* pollerMain(void* arg) {
  poller_t* p = arg;
  gbCollRecord_t records[8];
  pthread_barrier_wait(&start);
  for (;;) {
    gbResult_t async = gbSuccess;
    gbCommCounters_t counters;
    gbCommMemory_t memory;
    gbTopology_t topology;
    int n = 0;
    gbResult_t r[] = {gbCommGetAsyncError(p->comm, &async), gbCommCount(p->comm, &n), gbCommUserRank(p->comm, &n),
                      gbCommGetMemory(p->comm, &memory), gbCommGetTopology(p->comm, &topology),
                      gbCommGetRecords(p->comm, records, 8, &n), gbCommGetInFlight(p->comm, records, 8, &n),
                      gbCommGetCounters(p->comm, &counters), gbCommSetObserver(p->comm, NULL, NULL)};
    /* The comm's own text (if it failed) or the thread's: a string either way. */
    const char* text = gbGetLastError(p->comm);
    if (!text && p->bad == gbSuccess) {
      p->bad = gbInternalError;
      snprintf(p->badText, sizeof(p->badText), "gbGetLastError(comm) returned NULL");
    }
    p->polls++;
    int gone = 0;
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
      if (r[i] == gbInvalidArgument) gone = 1;
      else if (r[i] != gbSuccess && p->bad == gbSuccess) {
        p->bad = r[i];
        snprintf(p->badText, sizeof(p->badText), "query %zu: %s", i, gbGetLastError(NULL));
      }
    }
    if (gone) return NULL;
  }
}

static void abortWhilePolling(void) {
  int polls = 0;
  for (int round = 0; round < ROUNDS; round++) {
    poller_t p = {.comm = initOne(), .bad = gbSuccess};
    pthread_t t;
    pthread_create(&t, NULL, pollerMain, &p);
    pthread_barrier_wait(&start);
    gbResult_t r = gbCommAbort(p.comm);
    pthread_join(t, NULL);
    polls += p.polls;
    CHECK(r == gbSuccess, "round %d: gbCommAbort returned %d: %s", round, (int)r, gbGetLastError(NULL));
    CHECK(p.bad == gbSuccess, "round %d: a query returned %d: %s", round, (int)p.bad, p.badText);
  }
  printf("abort while polling: %d rounds of the queries in %d rounds\n", polls, ROUNDS);
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  setenv("GPUBRIDGE_DEBUG", "NONE", 1); /* the refusals of calls on a dead handle are expected */
  pthread_barrier_init(&start, NULL, 3);
  setenv("GPUBRIDGE_TIMEOUT", "20", 1);
  abortWhileCalling();
  pthread_barrier_destroy(&start);
  pthread_barrier_init(&start, NULL, 2);
  destroyAndAbort();
  abortWhilePolling();
  pthread_barrier_destroy(&start);
  if (failures) {
    fprintf(stderr, "test_comm_teardown_race: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_comm_teardown_race: PASS (%d rounds of each)\n", ROUNDS);
  return 0;
}
