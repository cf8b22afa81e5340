/* One rank of: how long gbAllReduce takes to return against how long the
 * stream takes to finish it. With a bridged policy the call must return once
 * enqueued (NCCL semantics), long before the bytes crossed the bridge.
 * Usage: rank_enqueue_time [MiB] [iterations]; prints one line per iteration
 * on rank 0 and exits nonzero on any error or a wrong result. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpubridge/gpubridge.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHECK(call)                                                                        \
  do {                                                                                     \
    gbResult_t r_ = (call);                                                                \
    if (r_ != gbSuccess) {                                                                 \
      fprintf(stderr, "%s failed: %s: %s\n", #call, gbGetErrorString(r_), gbGetLastError(NULL)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
  int iters = argc > 2 ? atoi(argv[2]) : 3;
  size_t count = mib * 1024 * 1024 / sizeof(float);
  gbComm_t comm;
  CHECK(gbCommInitFromEnv(&comm, NULL));
  int rank, nranks;
  CHECK(gbCommUserRank(comm, &rank));
  CHECK(gbCommCount(comm, &nranks));
  gbTopology_t topo;
  CHECK(gbCommGetTopology(comm, &topo));
  float* host = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; i++) host[i] = (float)((i + (size_t)rank) % 7);
  void *buf, *stream;
  CHECK(gbMemAlloc(&buf, count * sizeof(float)));
  CHECK(gbStreamCreate(&stream));
  for (int it = 0; it < iters; it++) {
    CHECK(gbMemcpyToDevice(buf, host, count * sizeof(float)));
    double t0 = now();
    CHECK(gbAllReduce(buf, buf, count, gbFloat32, gbSum, comm, stream));
    double t1 = now();
    CHECK(gbStreamSynchronize(stream));
    double t2 = now();
    if (rank == 0)
      printf("all_reduce %zu MiB, %d ranks, %d islands, policy %d%s: call returned after %.1f us, stream done after "
             "%.1f us (%.2f GB/s algbw)\n",
             mib, nranks, topo.nislands, topo.policy, topo.splitTest ? " split-test" : "", (t1 - t0) * 1e6,
             (t2 - t0) * 1e6, count * sizeof(float) / (t2 - t0) / 1e9);
  }
  gbResult_t async;
  CHECK(gbCommGetAsyncError(comm, &async));
  CHECK(async);
  /* Integer-valued floats: the sum is exact whatever the order. */
  float* out = malloc(count * sizeof(float));
  CHECK(gbMemcpyToHost(out, buf, count * sizeof(float)));
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    float expected = 0;
    for (int r = 0; r < nranks; r++) expected += (float)((i + (size_t)r) % 7);
    wrong += out[i] != expected;
  }
  if (wrong) fprintf(stderr, "rank %d: %zu wrong elements\n", rank, wrong);
  CHECK(gbCommDestroy(comm));
  return wrong ? 1 : 0;
}
