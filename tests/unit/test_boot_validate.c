/* The one validation function: each rule on hand-made probes; every field
 * of a probe out of range (as a stranger holding the secret could send). */
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/topology.h"
#include "boot/ranks.h"
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
    struct sockaddr_in* a = (struct sockaddr_in*)&p[r].listenAddr.sa;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)(40000 + r));
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p[r].listenAddr.len = sizeof(*a);
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

/* One field of rank 2's probe broken; the verdict must name rank 2 and the
 * field, never crash (the sanitizer builds watch for reads past a string). */
typedef void (*breakFn_t)(gbProbe_t* p);
static void bNegWorld(gbProbe_t* p) { p->nranks = -1; }
static void bHugeWorld(gbProbe_t* p) { p->nranks = INT_MAX; }
static void bZeroWorld(gbProbe_t* p) { p->nranks = 0; }
static void bHugeRank(gbProbe_t* p) { p->rank = INT_MAX; }
static void bMinRank(gbProbe_t* p) { p->rank = INT_MIN; }
static void bHost(gbProbe_t* p) { memset(p->host, 'h', sizeof(p->host)); }
static void bVendor(gbProbe_t* p) { memset(p->vendor, 'v', sizeof(p->vendor)); }
static void bUuid(gbProbe_t* p) { memset(p->gpuUuid, 'u', sizeof(p->gpuUuid)); }
static void bPci(gbProbe_t* p) { memset(p->gpuPci, 'p', sizeof(p->gpuPci)); }
static void bProblems(gbProbe_t* p) { memset(p->problems, 'x', sizeof(p->problems)); }
static void bKind(gbProbe_t* p) { p->kind = 7; }
static void bRunKind(gbProbe_t* p) { p->runKind = -3; }
static void bLocal(gbProbe_t* p) { p->localRank = -1; }
static void bGpu(gbProbe_t* p) { p->gpuIndex = -2; }
static void bNoVendor(gbProbe_t* p) { p->vendor[0] = '\0'; }
static void bPolicy(gbProbe_t* p) { p->settings.policy = 99; }
static void bTransport(gbProbe_t* p) { p->settings.transport = -1; }
static void bSplit(gbProbe_t* p) { p->settings.splitTest = 1000; }
static void bCheck(gbProbe_t* p) { p->settings.checkCalls = -7; }
static void bTimeout(gbProbe_t* p) { p->settings.timeoutSec = -30; }
static void bNsocks(gbProbe_t* p) { p->settings.nsocks = 100000; }
static void bNoSocks(gbProbe_t* p) { p->settings.nsocks = 0; }
static void bSlots(gbProbe_t* p) { p->settings.stagingSlots = 0; }
static void bChunk(gbProbe_t* p) { p->settings.chunkBytes = -1; }
static void bRing(gbProbe_t* p) { p->settings.ringMinBytes = INT64_MIN; }
static void bRails(gbProbe_t* p) { p->settings.rails = -1; }
static void bFamily(gbProbe_t* p) { p->listenAddr.sa.ss_family = 77; }
static void bAddrLen(gbProbe_t* p) { p->listenAddr.len = 0xffffffffu; }
static void bMagic(gbProbe_t* p) { p->magic = 0xdeadbeef; }
static void bVersion(gbProbe_t* p) { p->version = 999; }

static void malformedProbes(void) {
  static const struct {
    breakFn_t fn;
    const char* words; /* in the verdict */
  } cases[] = {
      {bNegWorld, "world size -1 is not in [1, 4096]"}, {bHugeWorld, "world size 2147483647"},
      {bZeroWorld, "world size 0"}, {bHugeRank, "rank 2147483647 is far out of range"},
      {bMinRank, "is far out of range"}, {bHost, "host name is not terminated"},
      {bVendor, "vendor is not terminated"}, {bUuid, "GPU UUID is not terminated"},
      {bPci, "PCI id is not terminated"}, {bProblems, "problem text is not terminated"},
      {bKind, "kind 7"}, {bRunKind, "run kind -3"}, {bLocal, "local rank -1"}, {bGpu, "GPU index -2"},
      {bNoVendor, "vendor is empty"}, {bPolicy, "policy 99"}, {bTransport, "transport -1"},
      {bSplit, "split-test mode 1000"}, {bCheck, "call-check mode -7"}, {bTimeout, "timeout -30 s"},
      {bNsocks, "100000 sockets"}, {bNoSocks, "0 sockets"}, {bSlots, "0 staging slots"},
      {bChunk, "chunk of -1 bytes"}, {bRing, "ring threshold of"}, {bRails, "-1 rails"},
      {bFamily, "family 77"}, {bAddrLen, "length 4294967295"}, {bMagic, "magic deadbeef"},
      {bVersion, "version 999"},
  };
  gbProbe_t p[4];
  char text[4096], why[160];
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    job(p, 4, two);
    cases[k].fn(&p[2]);
    EXPECT(!gbBootProbeCheck(&p[2], why, sizeof(why)), "case %zu: gbBootProbeCheck accepts it", k);
    gbResult_t res = check(p, 4, 0, text);
    EXPECT(res == gbInvalidUsage, "case %zu (%s): result %d, want gbInvalidUsage: %s", k, cases[k].words, res, text);
    EXPECT(strstr(text, "malformed probe") && strstr(text, cases[k].words), "case %zu: want \"%s\" in: %s", k,
           cases[k].words, text);
    /* Named by rank where the rank field is sane, by pid otherwise. */
    EXPECT(strstr(text, "pid 1002 on "), "case %zu: the sender is not named: %s", k, text);
    /* The same break on every probe: nothing left to trust, still no crash. */
    job(p, 4, two);
    for (int r = 0; r < 4; r++) cases[k].fn(&p[r]);
    EXPECT(check(p, 4, 1, text) == gbInvalidUsage && strstr(text, "(4 problems)"), "case %zu on every rank: %s", k,
           text);
  }
  job(p, 4, two);
  EXPECT(gbBootProbeCheck(&p[1], why, sizeof(why)), "a good probe passes: %s", why);
  /* A rank that could not listen says so and sends no address: not malformed. */
  memset(&p[1].listenAddr, 0, sizeof(p[1].listenAddr));
  snprintf(p[1].problems, sizeof(p[1].problems), "cannot listen for peers: bind: Address in use");
  EXPECT(gbBootProbeCheck(&p[1], why, sizeof(why)), "no address with a problem text: %s", why);
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage && !strstr(text, "malformed") && strstr(text, "cannot listen"),
         "the problem is named, not the address: %s", text);
}

/* Reports: a process that cannot join says why; the verdict names it. */
static void reports(void) {
  gbProbe_t p[4];
  char text[4096];
  job(p, 4, two);
  memset(&p[3], 0, sizeof(p[3]));
  p[3].magic = GB_PROBE_MAGIC;
  p[3].version = GB_PROBE_VERSION;
  p[3].kind = GB_PROBE_REPORT;
  p[3].rank = 3;
  p[3].pid = 77;
  p[3].localRank = 3;
  p[3].settings.timeoutSec = 30;
  snprintf(p[3].host, sizeof(p[3].host), "node9");
  snprintf(p[3].problems, sizeof(p[3].problems), "WORLD_SIZE=abc is not a non-negative integer");
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "a report fails the job");
  EXPECT(strstr(text, "(1 problem)") && strstr(text, "rank 3 (pid 77 on node9) cannot join: WORLD_SIZE=abc"),
         "report: %s", text);
  EXPECT(!strstr(text, "did not reach"), "a rank that reported is not missing: %s", text);
  /* Unknown rank (RANK unreadable): named as the one rank missing. */
  p[3].rank = -1;
  snprintf(p[3].problems, sizeof(p[3].problems), "RANK=x is not a non-negative integer");
  gbProbe_t order[4] = {p[3], p[0], p[1], p[2]}; /* the report, then ranks 0-2 */
  EXPECT(check(order, 4, 0, text) == gbInvalidUsage &&
             strstr(text, "a process (pid 77 on node9, local rank 3), presumably rank 3 (the one rank missing), cannot "
                          "join: RANK=x"),
         "unknown rank: %s", text);
  /* A report alone (no rank arrived): still a verdict. */
  EXPECT(check(&p[3], 1, 0, text) == gbInvalidUsage && strstr(text, "cannot join: RANK=x"), "report alone: %s", text);
  /* A report of a rank out of range is malformed, not trusted. */
  p[3].rank = 1 << 30;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage && strstr(text, "malformed probe") && strstr(text, "report for rank"),
         "report rank out of range: %s", text);
}

/* One GPU, as CUDA and HIP name it: by UUID (hex digits, whatever the
 * dashes and case), else by PCI bus id; MIG slices and other hosts differ. */
static void sameGpu(void) {
  gbProbe_t a, b;
  memset(&a, 0, sizeof a);
  a.runKind = gbRunReal;
  a.hostId = 7;
  b = a;
  snprintf(a.gpuUuid, sizeof a.gpuUuid, "GPU-0123abcd-4567-89ef-0123-456789abcdef");
  snprintf(b.gpuUuid, sizeof b.gpuUuid, "GPU-0123ABCD456789ef0123456789abcdef");
  EXPECT(gbBootSameGpu(&a, &b), "CUDA's and HIP's spellings of one UUID: one GPU");
  b.gpuUuid[5] = '9';
  snprintf(a.gpuPci, sizeof a.gpuPci, "0000:00:06.0");
  snprintf(b.gpuPci, sizeof b.gpuPci, "0000:00:06.0");
  EXPECT(!gbBootSameGpu(&a, &b), "different UUIDs on one PCI id (MIG): two GPUs");
  snprintf(b.gpuUuid, sizeof b.gpuUuid, "MIG-0123abcd-4567-89ef-0123-456789abcdef");
  EXPECT(!gbBootSameGpu(&a, &b), "a MIG slice and its GPU: two");
  b.gpuUuid[0] = '\0';
  EXPECT(gbBootSameGpu(&a, &b), "one UUID unknown: the same PCI id is one GPU");
  snprintf(b.gpuPci, sizeof b.gpuPci, "0000:00:07.0");
  EXPECT(!gbBootSameGpu(&a, &b), "one UUID unknown, other PCI id: two GPUs");
  b = a;
  b.hostId = 8;
  EXPECT(!gbBootSameGpu(&a, &b), "another host: another GPU");
  b = a;
  b.runKind = gbRunSimulated;
  EXPECT(!gbBootSameGpu(&a, &b), "a simulated rank has no GPU");
}

int main(void) {
  gbProbe_t p[8];
  char text[4096];

  sameGpu();

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

  /* The same chunk set on some ranks and left to the GPU default on others:
   * the chunks would differ by message size. */
  job(p, 4, two);
  for (int r = 0; r < 4; r++) p[r].settings.chunkBySize = r != 1;
  EXPECT(check(p, 4, 0, text) == gbInvalidUsage, "chunk set on one rank only refused");
  EXPECT(strstr(text, "whether GPUBRIDGE_CHUNK_BYTES") && strstr(text, "rank 1 uses set") &&
             strstr(text, "set it on every rank or on none"),
         "chunk by size: %s", text);

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

  malformedProbes();
  reports();

  char list[64];
  int ranks[] = {5, 0, 1, 2, 7, 8};
  EXPECT(strcmp(gbBootRankList(ranks, 6, list, sizeof(list)), "0-2,5,7,8") == 0, "rank list: %s", list);

  if (failures) return 1;
  printf("test_boot_validate: all checks passed\n");
  return 0;
}
