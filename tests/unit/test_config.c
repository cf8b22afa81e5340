/* gbConfig_t errors follow one rule (NCCL's): a malformed struct or a field
 * out of range is gbInvalidArgument from gbCommInitRankConfig and gbCommSplit
 * at once, with a text naming the field. Every field is tried out of range on
 * both sides, and in range (a one-rank communicator must then come up); a
 * field past the caller's size is never read. Public API only. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gpubridge/gpubridge.h"

static gbUniqueId id;

/* Init of one rank with config must fail with gbInvalidArgument naming text. */
static void refused(gbConfig_t* config, const char* what, const char* text) {
  gbComm_t comm = (gbComm_t)0x1;
  CHECK(gbGetUniqueId(&id) == gbSuccess, "%s: gbGetUniqueId: %s", what, gbGetLastError(NULL));
  gbResult_t r = gbCommInitRankConfig(&comm, 1, id, 0, config);
  const char* last = gbGetLastError(NULL);
  CHECK(r == gbInvalidArgument, "%s: init returned %d (%s), want gbInvalidArgument: %s", what, (int)r,
        gbGetErrorString(r), last);
  CHECK(strstr(last, text) != NULL, "%s: the error does not name '%s': %s", what, text, last);
  CHECK(comm == NULL, "%s: *comm is not NULL after a refused init", what);
  if (r == gbSuccess && comm) gbCommDestroy(comm);
}

static double nowSec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Init of one rank with config must succeed (and the communicator work). */
static void accepted(gbConfig_t* config, const char* what) {
  gbComm_t comm = NULL;
  CHECK(gbGetUniqueId(&id) == gbSuccess, "%s: gbGetUniqueId: %s", what, gbGetLastError(NULL));
  gbResult_t r = gbCommInitRankConfig(&comm, 1, id, 0, config);
  if (r == gbInProgress) {
    /* A deadline, not a count of polls: a loaded machine finishes init later. */
    gbResult_t state = gbInProgress;
    double deadline = nowSec() + 30;
    while (state == gbInProgress && nowSec() < deadline)
      if (gbCommGetAsyncError(comm, &state) != gbSuccess) break;
    r = state;
  }
  CHECK(r == gbSuccess, "%s: init returned %d (%s): %s", what, (int)r, gbGetErrorString(r),
        r == gbInProgress ? "still in progress after 30 s" : gbGetLastError(NULL));
  if (comm) CHECK(gbCommDestroy(comm) == gbSuccess, "%s: destroy failed: %s", what, gbGetLastError(NULL));
}

static gbConfig_t fresh(void) {
  gbConfig_t c = GB_CONFIG_INITIALIZER;
  return c;
}

int main(void) {
  setenv("GPUBRIDGE_DEVICE_BACKEND", "host", 1);
  unsetenv("GPUBRIDGE_VENDOR");
  unsetenv("GPUBRIDGE_POLICY");
  setenv("GPUBRIDGE_TIMEOUT", "10", 1); /* a config that gets through waits no longer */
  if (gbGetUniqueId(&id) != gbSuccess) {
    printf("FAIL: gbGetUniqueId: %s\n", gbGetLastError(NULL));
    return 1;
  }
  gbConfig_t c;

  /* The struct itself. */
  c = fresh(), c.magic = 0;
  refused(&c, "magic 0", "magic");
  c = fresh(), c.size = offsetof(gbConfig_t, blocking);
  refused(&c, "size without blocking", "size");
  c = fresh(), c.size = 1u << 20;
  refused(&c, "size 1 MiB", "size");

  /* Every field, below and above its range. */
  struct {
    const char* name;
    int* field;
    int bad[2];
    int good;
  } f[] = {
      {"config.blocking", &c.blocking, {-1, 2}, 1},
      {"config.policy", &c.policy, {-1, gbNumPolicies}, gbPolicyFlat},
      {"config.transport", &c.transport, {-1, gbNumTransports}, gbTransportTcp},
      {"config.timeoutSeconds", &c.timeoutSeconds, {0, -5}, 30},
      {"config.chunkBytes", &c.chunkBytes, {4095, -1}, 4096},
      {"config.bridgeCompression", &c.bridgeCompression, {-1, gbNumCompressions}, gbCompressionFp8},
  };
  for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
    for (int k = 0; k < 2; k++) {
      char what[96];
      c = fresh();
      *f[i].field = f[i].bad[k];
      snprintf(what, sizeof(what), "%s=%d", f[i].name, f[i].bad[k]);
      refused(&c, what, f[i].name);
    }
    c = fresh();
    *f[i].field = f[i].good;
    accepted(&c, f[i].name);
  }
  c = fresh(), c.blocking = 0;
  accepted(&c, "config.blocking=0");

  /* A field past the caller's size (an older, shorter struct) is not read. */
  c = fresh(), c.size = offsetof(gbConfig_t, policy), c.policy = 12345;
  accepted(&c, "policy past the caller's size");
  accepted(NULL, "no config");

  /* gbCommSplit checks its config by the same rule. */
  gbComm_t world = NULL, child = (gbComm_t)0x1;
  CHECK(gbGetUniqueId(&id) == gbSuccess, "split: gbGetUniqueId: %s", gbGetLastError(NULL));
  CHECK(gbCommInitRankConfig(&world, 1, id, 0, NULL) == gbSuccess, "world init: %s", gbGetLastError(NULL));
  if (world) {
    c = fresh(), c.timeoutSeconds = 0;
    gbResult_t r = gbCommSplit(world, 0, 0, &child, &c);
    CHECK(r == gbInvalidArgument, "gbCommSplit with config.timeoutSeconds=0 returned %d, want gbInvalidArgument: %s",
          (int)r, gbGetLastError(NULL));
    CHECK(strstr(gbGetLastError(NULL), "config.timeoutSeconds") != NULL, "split error does not name the field: %s",
          gbGetLastError(NULL));
    if (r == gbSuccess && child) gbCommDestroy(child);
    CHECK(gbCommDestroy(world) == gbSuccess, "world destroy: %s", gbGetLastError(NULL));
  }

  if (failures) {
    printf("test_config: %d checks failed\n", failures);
    return 1;
  }
  printf("test_config: all checks passed\n");
  return 0;
}
