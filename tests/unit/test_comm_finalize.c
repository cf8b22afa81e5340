/* gbCommFinalize and gbCommDestroy on a communicator of one rank (host
 * device): healthy, both succeed; after a failure (gbCommFail, as a
 * watchdog or a dead peer would cause), gbCommFinalize returns that first
 * failure's code with its text, also when no call was left to drain, and
 * gbCommDestroy still destroys it and succeeds, as ncclCommDestroy does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "check.h"
#include "unit/one_rank.h"
#include "core/comm.h"
#include "gpubridge/gpubridge.h"

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  float buf[4] = {1, 2, 3, 4};
  void* stream = NULL;
  CHECK(gbStreamCreate(&stream) == gbSuccess, "stream: %s", gbGetLastError(NULL));

  gbComm_t comm = initOne();
  CHECK(gbAllReduce(buf, buf, 4, gbFloat32, gbSum, comm, stream) == gbSuccess, "all-reduce: %s",
        gbGetLastError(comm));
  gbResult_t r = gbCommFinalize(comm);
  CHECK(r == gbSuccess, "healthy: gbCommFinalize returned %d: %s", (int)r, gbGetLastError(comm));
  r = gbCommDestroy(comm);
  CHECK(r == gbSuccess, "healthy: gbCommDestroy returned %d: %s", (int)r, gbGetLastError(NULL));

  comm = initOne();
  CHECK(gbStreamSynchronize(stream) == gbSuccess, "stream: %s", gbGetLastError(NULL));
  gbErrorSet(gbSystemError, "test: a failure of this communicator on purpose");
  gbCommFail(comm, gbSystemError);
  r = gbCommFinalize(comm);
  const char* text = gbGetLastError(NULL);
  CHECK(r == gbSystemError, "failed: gbCommFinalize returned %d, not gbSystemError (%d): %s", (int)r,
        (int)gbSystemError, text);
  CHECK(strstr(text, "gbCommFinalize") && strstr(text, "a failure of this communicator on purpose"),
        "failed: the text names the call and the first failure: %s", text);
  r = gbCommDestroy(comm);
  CHECK(r == gbSuccess, "failed: gbCommDestroy returned %d: %s", (int)r, gbGetLastError(NULL));
  int n = -1;
  CHECK(gbCommCount(comm, &n) == gbInvalidArgument, "failed: the handle is gone after gbCommDestroy");

  CHECK(gbStreamDestroy(stream) == gbSuccess, "stream destroy");
  if (failures) {
    fprintf(stderr, "test_comm_finalize: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_comm_finalize: PASS\n");
  return 0;
}
