/* PreMulSum ops created and destroyed over and over keep memory flat, and
 * an op's scalar stays its own while work queued with it is pending.
 *
 * Memory is the heap in use: the sanitizer allocator's count in sanitizer
 * builds, else malloc's (mallinfo2), so it is what the process allocated
 * and did not free, not pages the allocator or a sanitizer keeps.
 *
 * 1. Churn: 200,000 create/destroy pairs on one communicator, half with a
 *    host-immediate scalar and half with a device scalar. The heap after the
 *    first 20,000 pairs is the baseline; the remaining 180,000 may add at
 *    most CHURN_BOUND_KB. Each op's host copy of its scalar takes 16 bytes
 *    (more with malloc's rounding and alignment), so ops that leak it grow
 *    the heap by 2.8 MB or more over those pairs.
 * 2. Ops used by queued work: two ranks (threads) with the flat policy, so
 *    the proxy scales every contribution by the op's host copy of the
 *    scalar. Per batch, each rank queues BATCH all-reduces, each with an op
 *    of its own scalar that is destroyed right after the call is queued (as
 *    NCCL allows, and as FSDP does for each reduce-scatter), then
 *    synchronizes and checks every result against sum over ranks of
 *    scalar * input. ROUNDS batches, with memory checked flat again. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpubridge/gpubridge.h"

#define CHURN_PAIRS 200000
#define CHURN_WARMUP 20000
#define CHURN_BOUND_KB 512
#define RANKS 2
#define BATCH 16
#define ROUNDS 150
#define COUNT 64
#define QUEUED_BOUND_KB 512

/* Defined by the sanitizer runtimes only. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

static long heapKb(void) {
  if (__sanitizer_get_current_allocated_bytes) return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
  struct mallinfo2 m = mallinfo2();
  return (long)((m.uordblks + m.hblkhd) / 1024);
}

static void churn(void) {
  gbUniqueId id;
  gbComm_t comm = NULL;
  if (gbGetUniqueId(&id) != gbSuccess || gbCommInitRank(&comm, 1, id, 0) != gbSuccess) {
    CHECK(0, "init: %s", gbGetLastError(NULL));
    return;
  }
  float host = 0.5f;
  float* dev = NULL;
  CHECK(gbMemAlloc((void**)&dev, sizeof(float)) == gbSuccess, "gbMemAlloc: %s", gbGetLastError(NULL));
  long base = heapKb();
  for (int i = 0; i < CHURN_PAIRS; i++) {
    if (i == CHURN_WARMUP) base = heapKb();
    gbRedOp_t op;
    int onDevice = i % 2;
    gbResult_t r = gbRedOpCreatePreMulSum(&op, onDevice ? (void*)dev : (void*)&host, gbFloat32,
                                          onDevice ? gbScalarDevice : gbScalarHostImmediate, comm);
    if (r == gbSuccess) r = gbRedOpDestroy(op, comm);
    if (r != gbSuccess) {
      CHECK(0, "pair %d: %s", i, gbGetLastError(NULL));
      break;
    }
  }
  long grown = heapKb() - base;
  printf("churn: %d create/destroy pairs; the heap grew %ld KB after the first %d (bound %d KB)\n",
         CHURN_PAIRS, grown, CHURN_WARMUP, CHURN_BOUND_KB);
  CHECK(grown <= CHURN_BOUND_KB, "the heap grew %ld KB over %d PreMulSum create/destroy pairs: ops leak", grown,
        CHURN_PAIRS - CHURN_WARMUP);
  gbMemFree(dev);
  CHECK(gbCommDestroy(comm) == gbSuccess, "destroy: %s", gbGetLastError(NULL));
}

/* ------------------------------------------------ ops used by queued work */

static gbUniqueId queuedId;
static long queuedGrownKb;

/* Exact in float32: small integers times powers of two. */
static float scalarOf(int round, int k) { return (float)(1 + (round + k) % 5) * ((k % 2) ? 0.5f : 2.0f); }
static float inputOf(int rank, int k, int i) { return (float)(rank * 3 + k + i % 7); }

static void* queuedRank(void* arg) {
  int rank = (int)(long)arg;
  gbConfig_t config = GB_CONFIG_INITIALIZER;
  config.policy = gbPolicyFlat;
  config.timeoutSeconds = 60;
  gbComm_t comm = NULL;
  if (gbCommInitRankConfig(&comm, RANKS, queuedId, rank, &config) != gbSuccess) {
    CHECK(0, "rank %d: init: %s", rank, gbGetLastError(NULL));
    return NULL;
  }
  void* stream = NULL;
  gbStreamCreate(&stream);
  static __thread float buf[BATCH][COUNT];
  float* devScalars = NULL; /* device scalars: read when the call runs, so each call has its own */
  gbMemAlloc((void**)&devScalars, sizeof(float) * BATCH);
  long base = heapKb();
  for (int round = 0; round < ROUNDS; round++) {
    if (round == ROUNDS / 5 && rank == 0) base = heapKb();
    for (int k = 0; k < BATCH; k++) {
      float s = scalarOf(round, k);
      int onDevice = (round + k) % 2;
      if (onDevice) gbMemcpyToDevice(&devScalars[k], &s, sizeof(s));
      for (int i = 0; i < COUNT; i++) buf[k][i] = inputOf(rank, k, i);
      gbRedOp_t op;
      gbResult_t r = gbRedOpCreatePreMulSum(&op, onDevice ? (void*)&devScalars[k] : (void*)&s, gbFloat32,
                                            onDevice ? gbScalarDevice : gbScalarHostImmediate, comm);
      if (r == gbSuccess) r = gbAllReduce(buf[k], buf[k], COUNT, gbFloat32, op, comm, stream);
      if (r == gbSuccess) r = gbRedOpDestroy(op, comm); /* the call is queued, not done */
      if (r != gbSuccess) {
        CHECK(0, "rank %d round %d op %d: %s", rank, round, k, gbGetLastError(comm));
        round = ROUNDS;
        break;
      }
    }
    if (gbStreamSynchronize(stream) != gbSuccess) {
      CHECK(0, "rank %d round %d: sync: %s", rank, round, gbGetLastError(comm));
      break;
    }
    for (int k = 0; k < BATCH; k++)
      for (int i = 0; i < COUNT; i++) {
        float want = 0;
        for (int p = 0; p < RANKS; p++) want += scalarOf(round, k) * inputOf(p, k, i);
        if (buf[k][i] != want) {
          CHECK(0, "rank %d round %d op %d element %d: %g, not %g (scalar %g): an op's scalar changed under "
                "work queued with it", rank, round, k, i, buf[k][i], want, scalarOf(round, k));
          k = BATCH;
          round = ROUNDS;
          break;
        }
      }
  }
  if (rank == 0) queuedGrownKb = heapKb() - base;
  gbMemFree(devScalars);
  gbStreamDestroy(stream);
  CHECK(gbCommDestroy(comm) == gbSuccess, "rank %d: destroy: %s", rank, gbGetLastError(NULL));
  return NULL;
}

static void queued(void) {
  if (gbGetUniqueId(&queuedId) != gbSuccess) {
    CHECK(0, "gbGetUniqueId: %s", gbGetLastError(NULL));
    return;
  }
  pthread_t t[RANKS];
  for (long r = 0; r < RANKS; r++) pthread_create(&t[r], NULL, queuedRank, (void*)r);
  for (int r = 0; r < RANKS; r++) pthread_join(t[r], NULL);
  printf("queued: %d all-reduces per rank, each with its own op; the heap grew %ld KB after the first "
         "%d (bound %d KB)\n", ROUNDS * BATCH, queuedGrownKb, ROUNDS / 5 * BATCH, QUEUED_BOUND_KB);
  CHECK(queuedGrownKb <= QUEUED_BOUND_KB, "the heap grew %ld KB over %d PreMulSum all-reduces", queuedGrownKb,
        (ROUNDS - ROUNDS / 5) * BATCH);
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  churn();
  queued();
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
