/* One rank of the split-rail traffic suite (tests/mp/test_rails.py).
 *
 * Runs one float32 sum all-reduce of --count elements and checks it (the
 * inputs are small integers, so the sum is exact in any order), then
 * destroys the communicator: with GPUBRIDGE_DEBUG=INFO the library logs its
 * "traffic: <group> sent <N> bytes" lines there, which the driver reads.
 *
 * Usage: rank_rails --count N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"
#include "rank_die.h"

static float val(int rank, size_t i) { return (float)((int)((i * 7 + (size_t)rank * 13) % 201) - 100); }

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t count = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) count = (size_t)strtoull(argv[++i], NULL, 10);
    else DIE("bad argument '%s'", argv[i]);
  }
  if (count == 0) DIE("usage: rank_rails --count N (N > 0)");
  gbComm_t comm;
  gbResult_t res = gbCommInitFromEnv(&comm, NULL);
  if (res != gbSuccess) DIE("gbCommInitFromEnv returned %d: %s", (int)res, gbGetLastError(NULL));
  int n;
  CHECK_GB(gbCommUserRank(comm, &gRank));
  CHECK_GB(gbCommCount(comm, &n));
  gbTopology_t t;
  CHECK_GB(gbCommGetTopology(comm, &t));
  size_t bytes = count * sizeof(float);
  float* h = malloc(bytes);
  if (!h) DIE("out of memory");
  void *dSend, *dRecv, *stream;
  CHECK_GB(gbStreamCreate(&stream));
  CHECK_GB(gbMemAlloc(&dSend, bytes));
  CHECK_GB(gbMemAlloc(&dRecv, bytes));
  for (size_t i = 0; i < count; i++) h[i] = val(gRank, i);
  CHECK_GB(gbMemcpyToDevice(dSend, h, bytes));
  CHECK_GB(gbAllReduce(dSend, dRecv, count, gbFloat32, gbSum, comm, stream));
  CHECK_GB(gbStreamSynchronize(stream));
  gbResult_t async = gbSuccess;
  CHECK_GB(gbCommGetAsyncError(comm, &async));
  if (async != gbSuccess) DIE("async error %d: %s", (int)async, gbGetLastError(comm));
  CHECK_GB(gbMemcpyToHost(h, dRecv, bytes));
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int r = 0; r < n; r++) want += val(r, i);
    if (h[i] != want) DIE("all-reduce of %zu float32: element %zu is %g, expected %g", count, i, h[i], want);
  }
  CHECK_GB(gbStreamDestroy(stream));
  CHECK_GB(gbMemFree(dSend));
  CHECK_GB(gbMemFree(dRecv));
  printf("topology: rank %d of %d, island %d of %d, policy %d\n", gRank, n, t.island, t.nislands, t.policy);
  CHECK_GB(gbCommDestroy(comm));
  printf("ok: rank %d of %d, one all-reduce of %zu float32 checked\n", gRank, n, count);
  free(h);
  return 0;
}
