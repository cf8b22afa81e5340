/* One rank of tests/mp/test_torchrun.py, started by a real torchrun
 * (torchrun --nproc-per-node N --no-python rank_torchrun), or by any launcher.
 *
 * Initialises from the environment (gbCommInitFromEnv), prints its topology
 * as "topology: rank R of N, islands V0:S0,V1:S1,..., policy P", then runs
 * int32 and float32 sum all-reduces of a small and a chunked count, each
 * element checked against the sum computed here from the inputs every rank
 * makes (small integers, so float sums are exact in any order). Prints
 * "all-reduce ok" and exits 0, or "rank R: FAIL: ..." and exits 1. With
 * --expect-fail it prints "init-error: <text>" and exits 0 when init fails
 * (and 1 when it succeeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"
#include "rank_die.h"

static const char* policyName(int p) {
  static const char* const names[] = {"auto", "hierarchical", "native", "flat", "split-rail", "tuned"};
  return p >= 0 && p < 6 ? names[p] : "?";
}

/* Rank r's element i: at most 1000 * 65 + 96, so a sum over 64 ranks fits a
 * float's 24-bit mantissa exactly. */
static int32_t input(int r, size_t i) { return (int32_t)((r + 1) * 1000 + (int)(i % 97)); }

static void allReduce(gbComm_t comm, void* stream, int rank, int nranks, size_t count, int asFloat) {
  size_t bytes = count * 4;
  void *hSend = malloc(bytes), *hRecv = malloc(bytes), *dSend = NULL, *dRecv = NULL;
  if (!hSend || !hRecv) DIE("out of memory for %zu elements", count);
  for (size_t i = 0; i < count; i++) {
    if (asFloat) ((float*)hSend)[i] = (float)input(rank, i);
    else ((int32_t*)hSend)[i] = input(rank, i);
  }
  CHECK_GB(gbMemAlloc(&dSend, bytes));
  CHECK_GB(gbMemAlloc(&dRecv, bytes));
  CHECK_GB(gbMemcpyToDevice(dSend, hSend, bytes));
  CHECK_GB(gbAllReduce(dSend, dRecv, count, asFloat ? gbFloat32 : gbInt32, gbSum, comm, stream));
  CHECK_GB(gbStreamSynchronize(stream));
  CHECK_GB(gbMemcpyToHost(hRecv, dRecv, bytes));
  for (size_t i = 0; i < count; i++) {
    int64_t want = 0;
    for (int r = 0; r < nranks; r++) want += input(r, i);
    double got = asFloat ? (double)((float*)hRecv)[i] : (double)((int32_t*)hRecv)[i];
    if (got != (double)want)
      DIE("%s all-reduce of %zu elements: element %zu is %.1f, want %lld", asFloat ? "float32" : "int32", count, i,
          got, (long long)want);
  }
  CHECK_GB(gbMemFree(dSend));
  CHECK_GB(gbMemFree(dRecv));
  free(hSend);
  free(hRecv);
}

int main(int argc, char** argv) {
  int expectFail = argc > 1 && strcmp(argv[1], "--expect-fail") == 0;
  gbComm_t comm = NULL;
  gbResult_t res = gbCommInitFromEnv(&comm, NULL);
  if (expectFail) {
    if (res == gbSuccess) {
      printf("init-ok (a failure was expected)\n");
      return 1;
    }
    char text[8192];
    snprintf(text, sizeof(text), "%s", gbGetLastError(NULL));
    for (char* p = text; *p; p++)
      if (*p == '\n') *p = ' ';
    printf("init-error: %s\n", text);
    return 0;
  }
  if (res != gbSuccess) DIE("gbCommInitFromEnv returned %d: %s", (int)res, gbGetLastError(NULL));
  int rank = -1, nranks = 0;
  CHECK_GB(gbCommUserRank(comm, &rank));
  CHECK_GB(gbCommCount(comm, &nranks));
  gRank = rank;
  gbTopology_t t;
  CHECK_GB(gbCommGetTopology(comm, &t));
  char islands[512] = "";
  size_t used = 0;
  for (int k = 0; k < t.nislands && used < sizeof(islands); k++) {
    int w = snprintf(islands + used, sizeof(islands) - used, "%s%s:%d", k ? "," : "", t.islandVendor[k],
                     t.islandSize[k]);
    if (w > 0) used += (size_t)w;
  }
  printf("topology: rank %d of %d, islands %s, policy %s\n", rank, nranks, islands, policyName(t.policy));
  void* stream = NULL;
  CHECK_GB(gbStreamCreate(&stream));
  allReduce(comm, stream, rank, nranks, 1001, 0);
  allReduce(comm, stream, rank, nranks, 1001, 1);
  allReduce(comm, stream, rank, nranks, 300007, 0); /* past one 1 MiB chunk */
  allReduce(comm, stream, rank, nranks, 300007, 1);
  CHECK_GB(gbStreamDestroy(stream));
  CHECK_GB(gbCommDestroy(comm));
  printf("all-reduce ok\n");
  return 0;
}
