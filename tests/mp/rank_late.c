/* One rank of tests/mp/test_late_rank.py: a rank that comes late to an
 * all-reduce, against the communicator's own timeout.
 *
 * Usage: rank_late --timeout S --late L
 *
 * Every rank inits with config.timeoutSeconds = S (the environment's
 * GPUBRIDGE_TIMEOUT is set lower by the driver). The last rank then sleeps L
 * seconds (the late arrival under test, not a synchronisation) before a sum
 * all-reduce of 1 MiB of floats; the others enqueue it at once and wait for
 * it. Each rank checks the sum against the value computed here and prints
 * "ok after X s" (exit 0), or "error after X s: <text>" (exit 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_die.h"

#define COUNT (1u << 18)

int main(int argc, char** argv) {
  int timeoutSec = 0;
  double late = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--timeout") == 0) timeoutSec = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--late") == 0) late = atof(argv[i + 1]);
    else DIE("bad argument '%s'", argv[i]);
  }
  if (timeoutSec < 1) DIE("usage: rank_late --timeout S --late L");
  gbConfig_t config = GB_CONFIG_INITIALIZER;
  config.timeoutSeconds = timeoutSec;
  gbComm_t comm;
  CHECK_GB(gbCommInitFromEnv(&comm, &config));
  int n;
  CHECK_GB(gbCommUserRank(comm, &gRank));
  CHECK_GB(gbCommCount(comm, &n));
  void* stream;
  CHECK_GB(gbStreamCreate(&stream));
  float* host = malloc(COUNT * sizeof(float));
  void* buf;
  if (!host) DIE("out of memory");
  CHECK_GB(gbMemAlloc(&buf, COUNT * sizeof(float)));
  for (unsigned i = 0; i < COUNT; i++) host[i] = (float)(gRank + 1);
  CHECK_GB(gbMemcpyToDevice(buf, host, COUNT * sizeof(float)));

  if (gRank == n - 1 && late > 0) usleep((useconds_t)(late * 1e6));
  double t0 = nowS();
  gbResult_t res = gbAllReduce(buf, buf, COUNT, gbFloat32, gbSum, comm, stream);
  if (res == gbSuccess) res = gbStreamSynchronize(stream);
  gbResult_t async = gbSuccess;
  if (res == gbSuccess) res = gbCommGetAsyncError(comm, &async);
  if (res == gbSuccess) res = async;
  if (res != gbSuccess) {
    printf("error after %.2f s: %s\n", nowS() - t0, gbGetLastError(comm));
    fflush(stdout);
    _exit(1);
  }
  CHECK_GB(gbMemcpyToHost(host, buf, COUNT * sizeof(float)));
  float want = (float)n * (float)(n + 1) / 2.0f; /* 1 + 2 + ... + n, exact in float */
  for (unsigned i = 0; i < COUNT; i++)
    if (host[i] != want) DIE("element %u is %g, want %g", i, host[i], want);
  printf("ok after %.2f s\n", nowS() - t0);
  fflush(stdout);
  CHECK_GB(gbCommDestroy(comm));
  CHECK_GB(gbMemFree(buf));
  CHECK_GB(gbStreamDestroy(stream));
  free(host);
  return 0;
}
