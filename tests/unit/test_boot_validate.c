/* The one validation function: each rule on hand-made probes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/topology.h"
#include "boot/validate.h"

static int failures;
#define EXPECT(cond, ...)                                        \
  do {                                                           \
    if (!(cond)) {                                               \
      failures++;                                                \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                \
      printf(__VA_ARGS__);                                       \
      printf("\n");                                              \
    }                                                            \
  } while (0)

static void job(gbProbe_t* p, int n, const char* const* vendors) {
  memset(p, 0, sizeof(gbProbe_t) * (size_t)n);
  for (int r = 0; r < n; r++) {
    p[r].magic = GB_PROBE_MAGIC;
    p[r].version = GB_PROBE_VERSION;
    p[r].rank = r;
    p[r].nranks = n;
    p[r].pid = 1000 + r;
    p[r].runKind = gbRunSimulated;
    p[r].libVersion = GB_VERSION_CODE;
    snprintf(p[r].host, sizeof(p[r].host), "node%d", r / 4);
    snprintf(p[r].vendor, sizeof(p[r].vendor), "%s", vendors[r]);
    p[r].settings = (gbSettings_t){.policy = gbPolicyAuto, .transport = gbTransportTcp, .timeoutSec = 30, .nsocks = 2,
                                   .stagingSlots = 4, .checkCalls = 2, .chunkBytes = 1 << 20, .ringMinBytes = 65536};
  }
}

static gbResult_t check(gbProbe_t* p, int n, int timedOut, char* text) {
  static gbProbe_t sorted[GB_MAX_RANKS];
  gbValidateInput_t in = {p, n, timedOut, 30};
  return gbBootValidate(&in, sorted, GB_MAX_RANKS, text, 4096);
}

static const char* const two[] = {"nvidia", "nvidia", "amd", "amd"};

int main(void) {
  gbProbe_t p[8];
  char text[4096];

  job(p, 4, two);
  EXPECT(check(p, 4, 0, text) == gbSuccess && text[0] == '\0', "a consistent job is accepted: %s", text);

  /* Arrival order must not matter. */
  gbProbe_t swapped[4] = {p[3], p[1], p[0], p[2]};
  EXPECT(check(swapped, 4, 0, text) == gbSuccess, "probes in any order: %s", text);

  job(p, 4, two);
  p[3].nranks = 5;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "world size mismatch refused");
  EXPECT(strstr(text, "ranks 0-2 use 4, rank 3 uses 5") && strstr(text, "WORLD_SIZE"), "names ranks: %s", text);

  job(p, 4, two);
  p[2].rank = 1;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "duplicate refused");
  EXPECT(strstr(text, "rank 1 is claimed by 2 processes (pid 1001 on node0, pid 1002 on node0)"), "dup: %s", text);

  job(p, 4, two);
  p[1].settings.policy = gbPolicyFlat;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "policy mismatch refused");
  EXPECT(strstr(text, "GPUBRIDGE_POLICY") && strstr(text, "ranks 0,2,3 use auto, rank 1 uses flat"), "policy: %s",
         text);

  job(p, 4, two);
  p[0].settings.chunkBytes = 4096;
  p[3].settings.timeoutSec = 7;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "settings mismatch refused");
  EXPECT(strstr(text, "2 problems") && strstr(text, "GPUBRIDGE_CHUNK_BYTES") && strstr(text, "rank 3 uses 7"),
         "settings: %s", text);

  job(p, 4, two);
  snprintf(p[2].problems, sizeof(p[2].problems), "GPUBRIDGE_POLICY=bogus is not one of auto, hierarchical");
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "invalid value refused");
  EXPECT(strstr(text, "rank 2 (pid 1002 on node0): GPUBRIDGE_POLICY=bogus"), "invalid value: %s", text);

  job(p, 4, two);
  for (int r = 0; r < 4; r++) p[r].settings.policy = gbPolicyNative;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "native with two islands refused");
  EXPECT(strstr(text, "nvidia: ranks 0,1; amd: ranks 2,3"), "native: %s", text);

  job(p, 4, two);
  EXPECT(check(p, 3, 1, text) == gbTimeout, "a missing rank at the deadline is a timeout");
  EXPECT(strstr(text, "rank 3 did not reach the rendezvous root within 30 s"), "missing: %s", text);

  job(p, 4, two);
  p[1].runKind = gbRunReal;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage && strstr(text, "rank 1 uses a real GPU"), "mixed kinds: %s", text);

  /* Two ranks of one island on one GPU of one host: refused; other islands,
   * other hosts and split-test mode may share. */
  job(p, 4, two);
  for (int r = 0; r < 4; r++) {
    p[r].runKind = gbRunReal;
    snprintf(p[r].gpuUuid, sizeof(p[r].gpuUuid), "GPU-0");
  }
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "shared GPU refused");
  EXPECT(strstr(text, "ranks 0 and 1 of island nvidia share GPU GPU-0 on node0") &&
             strstr(text, "ranks 2 and 3 of island amd share GPU GPU-0"),
         "shared: %s", text);
  snprintf(p[1].gpuUuid, sizeof(p[1].gpuUuid), "GPU-1");
  snprintf(p[3].gpuUuid, sizeof(p[3].gpuUuid), "GPU-1");
  EXPECT(check(p, 4, 0, text) == gbSuccess, "one GPU per rank of an island; islands share: %s", text);
  for (int r = 0; r < 4; r++) p[r].gpuUuid[0] = '\0', snprintf(p[r].gpuPci, sizeof(p[r].gpuPci), "0000:0%d", r % 2);
  EXPECT(check(p, 4, 0, text) == gbSuccess, "PCI ids distinct within islands: %s", text);
  snprintf(p[1].gpuPci, sizeof(p[1].gpuPci), "0000:00");
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage && strstr(text, "share GPU 0000:00"), "same PCI id: %s", text);
  for (int r = 0; r < 4; r++) p[r].settings.splitTest = 1;
  EXPECT(check(p, 4, 0, text) == gbSuccess, "split-test may share: %s", text);

  job(p, 4, two);
  p[1].runKind = gbRunReal;
  check(p, 4, 0, text);

  /* The same input gives the same bytes: the verdict is a pure function. */
  char again[4096];
  check(p, 4, 0, again);
  EXPECT(strcmp(text, again) == 0, "verdict is deterministic");

  /* The topology: islands in order of their lowest rank. */
  static const char* const mixed[] = {"amd", "nvidia", "amd", "intel", "nvidia"};
  job(p, 5, mixed);
  gbTopo_t t;
  EXPECT(gbTopoBuild(p, 5, 4, &t) == gbSuccess, "topology builds");
  EXPECT(t.nislands == 3 && strcmp(t.vendor[0], "amd") == 0 && strcmp(t.vendor[2], "intel") == 0, "island order");
  EXPECT(t.island == 1 && t.islandIndex == 1 && !t.isLeader && t.leaderOfIsland[1] == 1, "my island");
  EXPECT(t.members[0][0] == 0 && t.members[0][1] == 2 && t.islandSize[2] == 1, "members");
  gbTopoFree(&t);

  char list[64];
  int ranks[] = {5, 0, 1, 2, 7, 8};
  EXPECT(strcmp(gbBootRankList(ranks, 6, list, sizeof(list)), "0-2,5,7,8") == 0, "rank list: %s", list);

  if (failures) return 1;
  printf("test_boot_validate: all checks passed\n");
  return 0;
}
