/* plan/: the policy each call runs (gbPlanCallPolicy) under auto, tuned and
 * fixed policies, on island layouts given as sizes. Expected policies come
 * from the rules as docs/PERFORMANCE.md writes them down ("How auto
 * chooses"), restated here: one island native; islands of one rank flat;
 * all-reduce with k >= 2 rails split-rail from 2 MiB (k = 2) or 32 MiB
 * (k >= 3), else hierarchical; split-rail only for all-reduce, hierarchical
 * only for all-reduce and broadcast, the rest flat. fp8 reductions on real
 * GPUs run flat under every policy (gbPlanFp8OffIsland); elsewhere fp8 gets
 * float32's policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/plan.h"
#include "plan/thresholds.h"

#include "unit/check.h"

#define MIB ((size_t)1 << 20)

typedef struct {
  gbTopo_t topo;
  int sizes[8];
} layout_t;

static void makeLayout(layout_t* l, const int* sizes, int nislands) {
  memset(l, 0, sizeof(*l));
  for (int i = 0; i < nislands; i++) {
    l->sizes[i] = sizes[i];
    l->topo.nranks += sizes[i];
  }
  l->topo.nislands = nislands;
  l->topo.islandSize = l->sizes;
}

static int callPolicy(const layout_t* l, int configured, gbColl_t coll, size_t bytes, int railsCap,
                      const gbThresholds_t* th) {
  gbPlanInput_t in;
  memset(&in, 0, sizeof(in));
  in.coll = coll;
  in.dtype = gbFloat32;
  in.op = gbSum;
  in.count = bytes / 4;
  in.policy = configured;
  in.rails = gbPlanRails(&l->topo, railsCap);
  in.topo = &l->topo;
  in.thresholds = th;
  return gbPlanCallPolicy(&in, bytes);
}

/* The rules, written out independently of plan.c. */
static int expectedAuto(const int* sizes, int nislands, gbColl_t coll, size_t bytes, int railsCap) {
  int nranks = 0, k = 1 << 30;
  for (int i = 0; i < nislands; i++) {
    nranks += sizes[i];
    if (sizes[i] < k) k = sizes[i];
  }
  if (railsCap > 0 && k > railsCap) k = railsCap;
  if (nislands == 1) return gbPolicyNative;
  if (nranks == nislands) return gbPolicyFlat;
  if (coll == GB_COLL_ALLREDUCE) {
    if (k == 2 && bytes >= 2 * MIB) return gbPolicySplitRail;
    if (k >= 3 && bytes >= 32 * MIB) return gbPolicySplitRail;
    return gbPolicyHierarchical;
  }
  return coll == GB_COLL_BROADCAST ? gbPolicyHierarchical : gbPolicyFlat;
}

int main(void) {
  static const int shapes[][4] = {{4, 0}, {1, 1}, {1, 1, 1}, {2, 2}, {2, 1}, {3, 3}, {4, 3, 5}, {2, 2, 2, 2}};
  static const int nshape[] = {1, 2, 3, 2, 2, 2, 3, 4};
  static const size_t sizes[] = {8, 4096, 2 * MIB - 4, 2 * MIB, 8 * MIB, 32 * MIB - 4, 32 * MIB, 256 * MIB};
  int checked = 0;
  for (size_t s = 0; s < sizeof(nshape) / sizeof(nshape[0]); s++) {
    layout_t l;
    makeLayout(&l, shapes[s], nshape[s]);
    for (int coll = 0; coll < GB_NUM_COLLS; coll++)
      for (size_t b = 0; b < sizeof(sizes) / sizeof(sizes[0]); b++)
        for (int cap = 0; cap <= 2; cap += 2) {
          int want = expectedAuto(shapes[s], nshape[s], (gbColl_t)coll, sizes[b], cap);
          int got = callPolicy(&l, gbPolicyAuto, (gbColl_t)coll, sizes[b], cap, NULL);
          CHECK(got == want, "auto, layout %zu, %s, %zu bytes, rails cap %d: policy %d, expected %d", s,
                gbPlanCollName(coll), sizes[b], cap, got, want);
          /* tuned without a file, or with a file that has no rule for this size: auto's choice */
          got = callPolicy(&l, gbPolicyTuned, (gbColl_t)coll, sizes[b], cap, NULL);
          CHECK(got == want, "tuned without rules, layout %zu, %s, %zu bytes: policy %d, expected %d", s,
                gbPlanCollName(coll), sizes[b], got, want);
          checked += 2;
        }
  }

  /* tuned: a rule wins inside its range; outside it auto decides; a rule a
   * collective cannot run is replaced as a fixed policy would be. */
  gbThresholds_t th;
  const char* text = "all_reduce 0 1023 flat\nall_reduce 1024 - split-rail\nall_gather 0 - hierarchical\n";
  CHECK(gbPlanThresholdsParse(text, "test", &th) == gbSuccess, "thresholds parse: %s", gbGetLastError(NULL));
  layout_t l22;
  makeLayout(&l22, (const int[]){2, 2}, 2);
  CHECK(callPolicy(&l22, gbPolicyTuned, GB_COLL_ALLREDUCE, 8, 0, &th) == gbPolicyFlat, "tuned 8 B: flat");
  CHECK(callPolicy(&l22, gbPolicyTuned, GB_COLL_ALLREDUCE, 4096, 0, &th) == gbPolicySplitRail,
        "tuned 4 KiB: split-rail (auto would say hierarchical)");
  CHECK(callPolicy(&l22, gbPolicyTuned, GB_COLL_ALLGATHER, 4096, 0, &th) == gbPolicyFlat,
        "tuned all_gather hierarchical runs flat");
  CHECK(callPolicy(&l22, gbPolicyTuned, GB_COLL_BROADCAST, 4096, 0, &th) == gbPolicyHierarchical,
        "tuned broadcast without a rule: auto's hierarchical");
  /* fixed policies */
  CHECK(callPolicy(&l22, gbPolicySplitRail, GB_COLL_BROADCAST, 4096, 0, NULL) == gbPolicyHierarchical,
        "split-rail broadcast runs hierarchical");
  CHECK(callPolicy(&l22, gbPolicyHierarchical, GB_COLL_REDUCE, 4096, 0, NULL) == gbPolicyFlat,
        "hierarchical reduce runs flat");
  CHECK(callPolicy(&l22, gbPolicyNative, GB_COLL_ALLREDUCE, 4096, 0, NULL) == gbPolicyHierarchical,
        "native across islands runs hierarchical");
  CHECK(gbPlanResolvePolicy(gbPolicyAuto, &l22.topo) == gbPolicyHierarchical, "resolve auto 2+2");
  layout_t l11;
  makeLayout(&l11, (const int[]){1, 1}, 2);
  CHECK(gbPlanResolvePolicy(gbPolicyAuto, &l11.topo) == gbPolicyFlat, "resolve auto 1+1");
  checked += 9;

  /* fp8 on real GPUs: reductions run flat whatever the policy and layout
   * (gpubridge reduces fp8, never the island's library); moves keep theirs.
   * On simulated or CPU ranks (host islands) fp8 is like any type. */
  static const gbColl_t reducing[] = {GB_COLL_ALLREDUCE, GB_COLL_REDUCE, GB_COLL_REDUCESCATTER};
  static const int policies[] = {gbPolicyAuto, gbPolicyNative, gbPolicyHierarchical, gbPolicySplitRail};
  layout_t l4;
  makeLayout(&l4, (const int[]){4}, 1);
  layout_t* layouts[] = {&l4, &l22};
  for (int li = 0; li < 2; li++)
    for (int dt = gbFloat8e4m3; dt <= gbFloat8e5m2; dt++)
      for (int pi = 0; pi < 4; pi++) {
        gbPlanInput_t in;
        memset(&in, 0, sizeof(in));
        in.dtype = (gbDataType_t)dt;
        in.op = gbSum;
        in.policy = policies[pi];
        in.topo = &layouts[li]->topo;
        for (int k = 0; k < 3; k++) {
          in.coll = reducing[k];
          layouts[li]->topo.runKind = gbRunReal;
          CHECK(gbPlanCallPolicy(&in, 4096) == gbPolicyFlat, "real, %s of %s under policy %d: flat",
                gbPlanCollName(in.coll), dt == gbFloat8e4m3 ? "e4m3" : "e5m2", policies[pi]);
          layouts[li]->topo.runKind = gbRunSimulated;
          in.dtype = gbFloat32;
          int asFloat = gbPlanCallPolicy(&in, 4096);
          in.dtype = (gbDataType_t)dt;
          CHECK(gbPlanCallPolicy(&in, 4096) == asFloat, "simulated, %s of fp8: float32's policy %d",
                gbPlanCollName(in.coll), asFloat);
          checked += 2;
        }
        layouts[li]->topo.runKind = gbRunReal;
        in.coll = GB_COLL_BROADCAST;
        CHECK(gbPlanCallPolicy(&in, 4096) != gbPolicyFlat,
              "real, broadcast of fp8 keeps policy %d", policies[pi]);
        CHECK(gbPlanFp8OffIsland(&l4.topo, (gbDataType_t)dt) && !gbPlanFp8OffIsland(&l4.topo, gbBfloat16),
              "gbPlanFp8OffIsland on real");
        checked += 2;
      }
  l4.topo.runKind = l22.topo.runKind = gbRunCpu;
  CHECK(!gbPlanFp8OffIsland(&l4.topo, gbFloat8e4m3), "cpu ranks: fp8 stays on the host island");
  l4.topo.runKind = l22.topo.runKind = gbRunReal;
  checked++;

  /* The file: read and hashed; a directory, a missing file and a file past
   * 16 KiB are refused with their own reasons. */
  char dir[] = "/tmp/gb-thresholds-XXXXXX", file[64], big[64];
  uint64_t hash = 0;
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(file, sizeof(file), "%s/t.txt", dir);
  snprintf(big, sizeof(big), "%s/big.txt", dir);
  FILE* f = fopen(file, "w");
  if (f) fputs(text, f), fclose(f);
  f = fopen(big, "w");
  for (int k = 0; f && k < 2000; k++) fputs("# padding\n", f);
  if (f) fclose(f);
  CHECK(gbPlanThresholdsLoad(file, &th, &hash) == gbSuccess && th.n == 3 && hash != 0, "load: %s",
        gbGetLastError(NULL));
  CHECK(gbPlanThresholdsLoad(dir, &th, &hash) == gbInvalidArgument && strstr(gbGetLastError(NULL), "Is a directory"),
        "a directory: %s", gbGetLastError(NULL));
  CHECK(gbPlanThresholdsLoad(big, &th, &hash) == gbInvalidArgument && strstr(gbGetLastError(NULL), "16 KiB"),
        "past 16 KiB: %s", gbGetLastError(NULL));
  remove(file);
  remove(big);
  CHECK(gbPlanThresholdsLoad(file, &th, &hash) == gbInvalidArgument && strstr(gbGetLastError(NULL), "cannot be read"),
        "missing: %s", gbGetLastError(NULL));
  rmdir(dir);
  checked += 5;

  if (failures) {
    fprintf(stderr, "%d of %d checks failed\n", failures, checked);
    return 1;
  }
  printf("%d checks passed\n", checked);
  return 0;
}
