/* A send/receive group whose send overlaps its receive, on one rank: the
 * island must send the data the buffer held when the group was enqueued
 * (the copy island/vendor/stage.c takes on a GPU), not bytes the receive
 * already overwrote. Sends 2^k floats from buf to itself, received at
 * buf + shift, for several shifts on both sides of 0, then an in-place
 * all-to-all; each result is checked against the input, computed here.
 * Usage (one rank, one island): gpubridge-run -n 1 -- rank_p2p_overlap [MiB] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpubridge/gpubridge.h"

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    gbResult_t r_ = (call);                                                                         \
    if (r_ != gbSuccess) {                                                                          \
      fprintf(stderr, "%s failed: %s: %s\n", #call, gbGetErrorString(r_), gbGetLastError(NULL));    \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

static float pattern(size_t i) { return (float)(i % 8191) + 0.5f; }

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  size_t count = mib * 1024 * 1024 / sizeof(float);
  size_t span = 2 * count; /* room for every shift below */
  gbComm_t comm;
  CHECK(gbCommInitFromEnv(&comm, NULL));
  int nranks;
  CHECK(gbCommCount(comm, &nranks));
  if (nranks != 1) {
    fprintf(stderr, "rank_p2p_overlap runs on one rank (got %d)\n", nranks);
    return 2;
  }
  float* host = malloc(span * sizeof(float));
  float* out = malloc(span * sizeof(float));
  void *buf, *stream;
  CHECK(gbMemAlloc(&buf, span * sizeof(float)));
  CHECK(gbStreamCreate(&stream));
  size_t base = count / 2;
  long shifts[] = {1, 7, 4096, (long)count / 3, -1, -4099, -(long)count / 3};
  int failed = 0;
  for (size_t s = 0; s < sizeof(shifts) / sizeof(shifts[0]); s++) {
    for (size_t i = 0; i < span; i++) host[i] = pattern(i);
    CHECK(gbMemcpyToDevice(buf, host, span * sizeof(float)));
    float* send = (float*)buf + base;
    float* recv = send + shifts[s];
    CHECK(gbGroupStart());
    CHECK(gbSend(send, count, gbFloat32, 0, comm, stream));
    CHECK(gbRecv(recv, count, gbFloat32, 0, comm, stream));
    CHECK(gbGroupEnd());
    CHECK(gbStreamSynchronize(stream));
    CHECK(gbMemcpyToHost(out, buf, span * sizeof(float)));
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < count; i++) {
      size_t at = base + (size_t)((long)i + shifts[s]);
      if (out[at] != pattern(base + i) && wrong++ == 0) first = i;
    }
    printf("send/recv to itself, %zu MiB, receive shifted %ld elements: %zu wrong%s\n", mib, shifts[s], wrong,
           wrong ? "" : " (ok)");
    if (wrong) fprintf(stderr, "  first wrong element %zu: %g, expected %g\n", first,
                       out[base + (size_t)((long)first + shifts[s])], pattern(base + first));
    failed |= wrong != 0;
  }
  /* In-place all-to-all (NCCL 2.28 allows sendbuff == recvbuff): one rank's
   * only block goes to itself, so the buffer must be unchanged. */
  for (size_t i = 0; i < count; i++) host[i] = pattern(i);
  CHECK(gbMemcpyToDevice(buf, host, count * sizeof(float)));
  CHECK(gbAllToAll(buf, buf, count, gbFloat32, comm, stream));
  CHECK(gbStreamSynchronize(stream));
  CHECK(gbMemcpyToHost(out, buf, count * sizeof(float)));
  int a2a = memcmp(out, host, count * sizeof(float)) != 0;
  printf("in-place all-to-all, %zu MiB: %s\n", mib, a2a ? "WRONG" : "ok");
  failed |= a2a;
  gbResult_t async;
  CHECK(gbCommGetAsyncError(comm, &async));
  CHECK(async);
  CHECK(gbStreamDestroy(stream));
  CHECK(gbMemFree(buf));
  CHECK(gbCommDestroy(comm));
  free(host);
  free(out);
  return failed;
}
