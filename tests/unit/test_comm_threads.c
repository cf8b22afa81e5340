/* Communicators made with gbGetUniqueId + gbCommInitRank(Config), one per
 * thread of this process (CPU ranks): blocking and non-blocking init, an
 * all-reduce and a broadcast checked against values computed here, config
 * errors, and gbCommAbort from another thread while a rank waits for a peer
 * that never calls the collective. Public API only. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/gpubridge.h"

#define N 4
#define COUNT 100003

static gbUniqueId id;
static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(int rank, const char* what, gbResult_t r) {
  pthread_mutex_lock(&lock);
  failures++;
  printf("FAIL rank %d: %s: %s: %s\n", rank, what, gbGetErrorString(r), gbGetLastError(NULL));
  pthread_mutex_unlock(&lock);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* rankMain(void* arg) {
  int rank = (int)(long)arg;
  gbConfig_t config = GB_CONFIG_INITIALIZER;
  config.blocking = rank % 2; /* odd ranks block, even ranks poll */
  config.timeoutSeconds = 20;
  gbComm_t comm = NULL;
  gbResult_t r = gbCommInitRankConfig(&comm, N, id, rank, &config);
  if (config.blocking == 0) {
    if (r != gbInProgress) return fail(rank, "non-blocking init did not return gbInProgress", r), NULL;
    double deadline = now() + 30;
    gbResult_t state = gbInProgress;
    while (state == gbInProgress && now() < deadline) {
      if ((r = gbCommGetAsyncError(comm, &state)) != gbSuccess) return fail(rank, "gbCommGetAsyncError", r), NULL;
    }
    r = state;
  }
  if (r != gbSuccess) return fail(rank, "init", r), NULL;
  int n = 0, me = -1;
  gbCommCount(comm, &n);
  gbCommUserRank(comm, &me);
  if (n != N || me != rank) return fail(rank, "count/rank", gbInternalError), NULL;

  double* buf = malloc(sizeof(double) * COUNT);
  /* A stream that is not one: the call fails alone, the communicator lives on. */
  char notAStream[64] = {0};
  if (gbAllReduce(buf, buf, COUNT, gbFloat64, gbSum, comm, notAStream) == gbSuccess) fail(rank, "bad stream accepted", r);
  gbResult_t still;
  if (gbCommGetAsyncError(comm, &still) != gbSuccess || still != gbSuccess)
    fail(rank, "a bad stream failed the communicator", still);
  for (int i = 0; i < COUNT; i++) buf[i] = rank * 1000.0 + i; /* integers: exact in any order */
  void* stream;
  gbStreamCreate(&stream);
  if ((r = gbAllReduce(buf, buf, COUNT, gbFloat64, gbSum, comm, stream)) != gbSuccess) fail(rank, "all-reduce", r);
  if ((r = gbStreamSynchronize(stream)) != gbSuccess) fail(rank, "sync", r);
  for (int i = 0; i < COUNT; i++)
    if (buf[i] != 6000.0 + 4.0 * i) {
      fail(rank, "all-reduce value", gbInternalError);
      break;
    }
  for (int i = 0; i < COUNT; i++) buf[i] = rank == 2 ? -i : 0;
  if ((r = gbBroadcast(buf, buf, COUNT, gbFloat64, 2, comm, stream)) != gbSuccess) fail(rank, "broadcast", r);
  if ((r = gbBarrier(comm, stream)) != gbSuccess) fail(rank, "barrier", r);
  if ((r = gbStreamSynchronize(stream)) != gbSuccess) fail(rank, "sync", r);
  for (int i = 0; i < COUNT; i++)
    if (buf[i] != -i) {
      fail(rank, "broadcast value", gbInternalError);
      break;
    }
  /* Two streams driving one communicator, no synchronisation between the
   * calls: each rank's island runs the calls in the order they were made, so
   * every result is right whichever stream's worker gets there first. */
  void* second;
  gbStreamCreate(&second);
  enum { CALLS = 8, SMALL = 5000 };
  static __thread double multi[CALLS][SMALL];
  for (int k = 0; k < CALLS; k++) {
    for (int i = 0; i < SMALL; i++) multi[k][i] = (k + 1) * (rank + 1) + i;
    if ((r = gbAllReduce(multi[k], multi[k], SMALL, gbFloat64, gbSum, comm, k % 2 ? second : stream)) != gbSuccess)
      fail(rank, "two-stream enqueue", r);
  }
  if ((r = gbStreamSynchronize(stream)) != gbSuccess || (r = gbStreamSynchronize(second)) != gbSuccess)
    fail(rank, "two-stream sync", r);
  for (int k = 0; k < CALLS; k++)
    for (int i = 0; i < SMALL; i++)
      if (multi[k][i] != (k + 1) * 10.0 + 4.0 * i) { /* sum over ranks of (k+1)(rank+1)+i */
        fail(rank, "two-stream value", gbInternalError);
        k = CALLS;
        break;
      }
  gbStreamDestroy(second);

  /* Bad arguments fail before anything is sent. */
  if (gbAllReduce(buf, buf, 1, gbInt32, gbAvg, comm, stream) != gbInvalidArgument) fail(rank, "avg on int32", r);
  if (gbBroadcast(buf, buf, 1, gbFloat32, N, comm, stream) != gbInvalidArgument) fail(rank, "root out of range", r);
  if (gbAllReduce(buf, buf, 1, (gbDataType_t)42, gbSum, comm, stream) != gbInvalidArgument) fail(rank, "dtype", r);

  /* Abort: rank 0 waits in an all-reduce nobody else joins; another thread
   * aborts it. */
  if (rank == 0) {
    if ((r = gbAllReduce(buf, buf, COUNT, gbFloat64, gbSum, comm, stream)) != gbSuccess) fail(rank, "enqueue", r);
    double t0 = now();
    if ((r = gbCommAbort(comm)) != gbSuccess) fail(rank, "abort", r);
    gbResult_t s = gbStreamSynchronize(stream);
    double took = now() - t0;
    if (s == gbSuccess || took > 2.0) fail(rank, "abort did not end the wait promptly with an error", s);
    printf("rank 0: abort ended the pending all-reduce in %.3f s with \"%s\"\n", took, gbGetErrorString(s));
  } else {
    /* The peers see rank 0's connections close: destroy returns. */
    if ((r = gbCommDestroy(comm)) != gbSuccess) fail(rank, "destroy", r);
  }
  gbStreamDestroy(stream);
  free(buf);
  return NULL;
}

int main(void) {
  /* Four ranks of one island in one process share one device: CPU ranks,
   * also on a machine with GPUs. */
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  gbConfig_t bad = GB_CONFIG_INITIALIZER;
  bad.magic = 0;
  gbComm_t c;
  gbUniqueId unused;
  memset(&unused, 0, sizeof(unused));
  if (gbCommInitRankConfig(&c, 2, unused, 0, NULL) != gbInvalidArgument) failures++, printf("FAIL: zero id accepted\n");
  if (gbGetUniqueId(&id) != gbSuccess) return printf("FAIL: gbGetUniqueId: %s\n", gbGetLastError(NULL)), 1;
  if (gbCommInitRankConfig(&c, 2, id, 0, &bad) != gbInvalidArgument) failures++, printf("FAIL: bad config accepted\n");
  if (gbCommInitRank(&c, 2, id, 2) != gbInvalidArgument) failures++, printf("FAIL: rank 2 of 2 accepted\n");
  pthread_t t[N];
  for (long r = 0; r < N; r++) pthread_create(&t[r], NULL, rankMain, (void*)r);
  for (int r = 0; r < N; r++) pthread_join(t[r], NULL);
  if (failures) return 1;
  printf("test_comm_threads: all checks passed\n");
  return 0;
}
