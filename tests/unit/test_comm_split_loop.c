/* gbCommSplit in a loop, three ranks as threads of this process: each round
 * splits the world (colors and NOCOLOR vary), runs an all-reduce on the
 * child checked against values computed here, and destroys the child.
 *
 * Each split runs two exchanges on the parent's proxy, each released by a
 * flag that the splitting thread waits for and then frees: the set-then-free
 * pattern in which the setter used to read the freed flag (a read after
 * free that the sanitizer builds report within a few rounds). Public API. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpubridge/gpubridge.h"

#define N 3
#define ROUNDS 60
#define COUNT 1031

static gbUniqueId id;
static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(int rank, int round, const char* what, gbResult_t r) {
  pthread_mutex_lock(&lock);
  failures++;
  printf("FAIL rank %d round %d: %s: %s: %s\n", rank, round, what, gbGetErrorString(r), gbGetLastError(NULL));
  pthread_mutex_unlock(&lock);
}

/* Round r's color for a rank: alternating layouts, one with a NOCOLOR rank. */
static int colorOf(int round, int rank) {
  switch (round % 3) {
    case 0: return 0;                                     /* everyone */
    case 1: return rank % 2;                              /* {0,2} and {1} */
    default: return rank == 1 ? GB_SPLIT_NOCOLOR : 7;     /* {0,2}, rank 1 out */
  }
}

static void* rankMain(void* arg) {
  int rank = (int)(long)arg;
  gbConfig_t config = GB_CONFIG_INITIALIZER;
  config.timeoutSeconds = 60;
  gbComm_t world = NULL;
  gbResult_t r = gbCommInitRankConfig(&world, N, id, rank, &config);
  if (r != gbSuccess) return fail(rank, -1, "init", r), NULL;
  void* stream = NULL;
  gbStreamCreate(&stream);
  int* buf = malloc(sizeof(int) * COUNT);
  for (int round = 0; round < ROUNDS; round++) {
    int color = colorOf(round, rank);
    gbComm_t child = NULL;
    if ((r = gbCommSplit(world, color, rank, &child, NULL)) != gbSuccess) {
      fail(rank, round, "gbCommSplit", r);
      break;
    }
    if (color == GB_SPLIT_NOCOLOR) {
      if (child != NULL) fail(rank, round, "NOCOLOR gave a communicator", gbInternalError);
      continue;
    }
    /* Expected: the members are the ranks of my color, in rank order. */
    int members = 0, sumRanks = 0, myIndex = 0;
    for (int p = 0; p < N; p++)
      if (colorOf(round, p) == color) {
        if (p < rank) myIndex++;
        members++;
        sumRanks += p;
      }
    int n = 0, me = -1;
    if ((r = gbCommCount(child, &n)) != gbSuccess || n != members) fail(rank, round, "child count", r);
    if ((r = gbCommUserRank(child, &me)) != gbSuccess || me != myIndex) fail(rank, round, "child rank", r);
    for (int i = 0; i < COUNT; i++) buf[i] = rank * 1000 + i;
    if ((r = gbAllReduce(buf, buf, COUNT, gbInt32, gbSum, child, stream)) != gbSuccess ||
        (r = gbStreamSynchronize(stream)) != gbSuccess) {
      fail(rank, round, "child all-reduce", r);
    } else {
      for (int i = 0; i < COUNT; i++)
        if (buf[i] != sumRanks * 1000 + members * i) {
          fail(rank, round, "child all-reduce value", gbInternalError);
          break;
        }
    }
    if ((r = gbCommDestroy(child)) != gbSuccess) fail(rank, round, "child destroy", r);
  }
  free(buf);
  gbStreamDestroy(stream);
  if ((r = gbCommDestroy(world)) != gbSuccess) fail(rank, ROUNDS, "world destroy", r);
  return NULL;
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  if (gbGetUniqueId(&id) != gbSuccess) return printf("FAIL: gbGetUniqueId: %s\n", gbGetLastError(NULL)), 1;
  pthread_t t[N];
  for (long i = 0; i < N; i++) pthread_create(&t[i], NULL, rankMain, (void*)i);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  if (failures) {
    printf("%d failure(s)\n", failures);
    return 1;
  }
  printf("ok: %d rounds of split, all-reduce, destroy on %d ranks\n", ROUNDS, N);
  return 0;
}
