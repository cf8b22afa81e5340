/* plan/: the staging half of each call's schedule (gbPlanBuild), on island
 * layouts given as sizes. The expected values are the rules written out
 * here, apart from plan/:
 * - depth: GPUBRIDGE_STAGING_SLOTS, at most 64;
 * - shared slots: taken when the host step's group has them, except by a
 *   world step whose proxy scales a PreMulSum contribution;
 * - all-reduce on host memory without shared slots works in recv (direct);
 *   with no island step either, its chunks of chunkBytes go to the proxy as
 *   one step: chunkCount = count, one chunk, the proxy's step chunkBytes;
 * - block collectives run flat with m = slotBytes / (esize * nranks) elements
 *   of each block per chunk, half that (rounded down) for all-to-all, whose
 *   slot holds what goes out and what comes in; m = 0 is an error;
 * - the GPU default (chunkBySize, 16 MiB configured): a message below
 *   64 MiB goes in 8 MiB chunks, a larger one in 16 MiB chunks; without
 *   chunkBySize, the configured chunk whatever the size. */
#include <stdio.h>
#include <string.h>

#include "base/dtype.h"
#include "plan/plan.h"

#include "unit/check.h"
#include "unit/plan_layout.h"

#define KIB ((size_t)1 << 10)

/* A float32 sum of count elements under policy, 4 KiB chunks, 1 MiB slots,
 * 4 staging slots, device memory that is not host memory, no shared slots. */
static gbPlanInput_t input(const layout_t* l, gbColl_t coll, int policy, size_t count) {
  gbPlanInput_t in;
  memset(&in, 0, sizeof(in));
  in.coll = coll;
  in.dtype = gbFloat32;
  in.op = gbSum;
  in.count = count;
  in.root = coll == GB_COLL_BROADCAST || coll == GB_COLL_REDUCE ? 0 : -1;
  in.policy = policy;
  in.chunkBytes = 4 * KIB;
  in.rails = gbPlanRails(&l->topo, 0);
  in.topo = &l->topo;
  in.slotBytes = 1024 * KIB;
  in.stagingSlots = 4;
  return in;
}

static gbPlan_t build(const gbPlanInput_t* in) {
  gbPlan_t p;
  gbResult_t res = gbPlanBuild(in, &p);
  CHECK(res == gbSuccess, "gbPlanBuild %s: %s", gbPlanCollName(in->coll), gbGetLastError(NULL));
  return p;
}

static size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

static int checked;

static void checkDepth(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1}, 2, 0);
  static const int slots[] = {1, 4, 63, 64, 65, 1000};
  for (size_t k = 0; k < sizeof(slots) / sizeof(slots[0]); k++) {
    int want = slots[k] > 64 ? 64 : slots[k];
    gbPlanInput_t in = input(&l, GB_COLL_ALLREDUCE, gbPolicyFlat, 100000);
    in.stagingSlots = slots[k];
    gbPlan_t p = build(&in);
    CHECK(p.depth == want, "all-reduce, %d staging slots: depth %d, expected %d", slots[k], p.depth, want);
    in = input(&l, GB_COLL_ALLGATHER, gbPolicyFlat, 100000);
    in.stagingSlots = slots[k];
    p = build(&in);
    CHECK(p.depth == want, "all-gather, %d staging slots: depth %d, expected %d", slots[k], p.depth, want);
    checked += 2;
  }
}

/* All-reduce on host memory, flat on islands of one rank: no island step. */
static void checkHostMemoryFold(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1, 1}, 3, 1);
  size_t per = 4 * KIB / 4; /* elements of a 4 KiB chunk of float32 */
  size_t count = 10 * per + 3;
  gbPlanInput_t in = input(&l, GB_COLL_ALLREDUCE, gbPolicyFlat, count);
  in.hostMemory = 1;
  gbPlan_t p = build(&in);
  CHECK(p.host == GB_HOST_WORLD && p.before == GB_ISLAND_NONE && p.after == GB_ISLAND_NONE,
        "flat all-reduce: one world step, no island step");
  CHECK(p.direct == 1, "host memory, no shared slots: direct (got %d)", p.direct);
  CHECK(p.nchunks == 1 && p.chunkCount == count, "folded: 1 chunk of %zu, got %zu of %zu", count, p.nchunks,
        p.chunkCount);
  CHECK(p.hostChunk == per, "folded: the proxy's step %zu elements, got %zu", per, p.hostChunk);
  CHECK(p.hostSteps == 1, "folded: one host step, got %zu", p.hostSteps);
  CHECK(p.stage == GB_STAGE_PRIVATE, "no shared slots");

  /* One chunk only: nothing to fold. */
  in.count = per;
  p = build(&in);
  CHECK(p.direct == 1 && p.hostChunk == 0 && p.nchunks == 1 && p.chunkCount == per,
        "one chunk: direct, not folded (hostChunk %zu)", p.hostChunk);

  /* Device memory that is not host memory: staged through slots, chunk by chunk. */
  in = input(&l, GB_COLL_ALLREDUCE, gbPolicyFlat, count);
  p = build(&in);
  CHECK(p.direct == 0 && p.hostChunk == 0, "device memory: not direct, not folded");
  CHECK(p.nchunks == ceilDiv(count, per) && p.chunkCount == per && p.hostSteps == p.nchunks,
        "device memory: %zu chunks of %zu, got %zu of %zu (%zu host steps)", ceilDiv(count, per), per, p.nchunks,
        p.chunkCount, p.hostSteps);

  /* Broadcast and reduce keep their slots on host memory. */
  in = input(&l, GB_COLL_REDUCE, gbPolicyFlat, count);
  in.hostMemory = 1;
  p = build(&in);
  CHECK(p.direct == 0 && p.hostChunk == 0 && p.nchunks == ceilDiv(count, per), "reduce on host memory: not direct");

  /* Island steps between chunks (hierarchical on 2+2, the leader): direct, never folded. */
  layout_t h;
  makeLayout(&h, (const int[]){2, 2}, 2, 2);
  in = input(&h, GB_COLL_ALLREDUCE, gbPolicyHierarchical, count);
  in.hostMemory = 1;
  p = build(&in);
  CHECK(p.host == GB_HOST_BRIDGE && p.before == GB_ISLAND_REDUCE, "hierarchical leader: bridge step after a reduce");
  CHECK(p.direct == 1 && p.hostChunk == 0 && p.nchunks == ceilDiv(count, per) && p.chunkCount == per,
        "hierarchical on host memory: direct, %zu chunks of %zu, got %zu of %zu (hostChunk %zu)",
        ceilDiv(count, per), per, p.nchunks, p.chunkCount, p.hostChunk);
  checked += 11;
}

/* Shared slots on: the host step goes through them; no direct, no fold. */
static void checkSharedSlots(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1, 1}, 3, 0);
  size_t per = 4 * KIB / 4, count = 10 * per + 3;
  gbPlanInput_t in = input(&l, GB_COLL_ALLREDUCE, gbPolicyFlat, count);
  in.hostMemory = 1;
  in.slots[GB_HOST_WORLD] = GB_STAGE_SHARED;
  gbPlan_t p = build(&in);
  CHECK(p.stage == GB_STAGE_SHARED, "flat, world has shared slots: taken");
  CHECK(p.direct == 0 && p.hostChunk == 0, "shared slots: not direct (%d), not folded (%zu)", p.direct,
        p.hostChunk);
  CHECK(p.nchunks == ceilDiv(count, per) && p.chunkCount == per && p.hostSteps == p.nchunks,
        "shared slots: %zu chunks of %zu, got %zu of %zu", ceilDiv(count, per), per, p.nchunks, p.chunkCount);

  /* Only the host step's own group counts. */
  in.slots[GB_HOST_WORLD] = GB_STAGE_PRIVATE;
  in.slots[GB_HOST_BRIDGE] = in.slots[GB_HOST_RAIL] = GB_STAGE_SHARED;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_PRIVATE && p.direct == 1, "flat: the bridge's and rail's slots do not count");

  layout_t h;
  makeLayout(&h, (const int[]){2, 2}, 2, 2); /* leader of island 1 */
  in = input(&h, GB_COLL_ALLREDUCE, gbPolicyHierarchical, count);
  in.slots[GB_HOST_BRIDGE] = GB_STAGE_SHARED;
  p = build(&in);
  CHECK(p.host == GB_HOST_BRIDGE && p.stage == GB_STAGE_SHARED, "hierarchical leader: the bridge's shared slots");
  makeLayout(&h, (const int[]){2, 2}, 2, 3); /* not a leader: no host step */
  in.topo = &h.topo;
  p = build(&in);
  CHECK(p.host == GB_HOST_NONE && p.stage == GB_STAGE_PRIVATE && p.hostSteps == 0, "no host step: no shared slots");

  makeLayout(&h, (const int[]){2, 2}, 2, 1); /* rail 1 */
  in = input(&h, GB_COLL_ALLREDUCE, gbPolicySplitRail, count);
  in.slots[GB_HOST_RAIL] = GB_STAGE_SHARED;
  p = build(&in);
  CHECK(p.host == GB_HOST_RAIL && p.myRail == 1 && p.stage == GB_STAGE_SHARED, "split-rail: my rail's shared slots");
  in.slots[GB_HOST_RAIL] = GB_STAGE_REMOTE;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_REMOTE && p.direct == 0, "split-rail across hosts: my rail's remote slots, not direct");
  CHECK(!gbPlanOnSideStreams(GB_PLAN_SIDE_STREAM_BYTES - 1) && gbPlanOnSideStreams(GB_PLAN_SIDE_STREAM_BYTES),
        "parts from %zu bytes go on the side streams", GB_PLAN_SIDE_STREAM_BYTES);
  CHECK(gbPlanSharedSlots(2) == 4 && gbPlanChunkBytes(1 << 20, 0, 1) == GB_PLAN_GPU_CHUNK_BYTES &&
            gbPlanChunkBytes(1 << 20, 1, 1) == (1 << 20) && gbPlanChunkBytes(1 << 20, 0, 0) == (1 << 20),
        "size rules: slots, chunk defaults");
  checked += 10;
}

/* The exchange: an all-reduce of at most the host group's exchange bytes
 * over its shared slots, chunked as planned; nothing else. Its blocks: 8 KiB
 * each up to 64 KiB, then bytes / 16 KiB, 1 to 32. */
static void checkExchange(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1}, 2, 0);
  size_t per = 4 * KIB / 4;
  gbPlanInput_t in = input(&l, GB_COLL_ALLREDUCE, gbPolicyFlat, 1000 * per / 4);
  in.slots[GB_HOST_WORLD] = GB_STAGE_SHARED;
  in.exchangeBytes[GB_HOST_WORLD] = 1000 * KIB;
  gbPlan_t p = build(&in);
  CHECK(p.stage == GB_STAGE_EXCHANGE && p.chunkCount == per && p.nchunks == 250,
        "all-reduce of 1000 KiB, exchange of 1000 KiB: the exchange in 4 KiB chunks (%d, %zu x %zu)", (int)p.stage,
        p.nchunks, p.chunkCount);
  in.count = 1000 * per / 4 + 1;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_SHARED, "4 bytes past the exchange: the shared slots (%d)", (int)p.stage);
  in.count = 10;
  in.exchangeBytes[GB_HOST_WORLD] = 0;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_SHARED, "no exchange: the shared slots (%d)", (int)p.stage);
  in.exchangeBytes[GB_HOST_WORLD] = 1000 * KIB;
  in.slots[GB_HOST_WORLD] = GB_STAGE_REMOTE;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_REMOTE, "remote slots: no exchange (%d)", (int)p.stage);
  in.slots[GB_HOST_WORLD] = GB_STAGE_SHARED;
  in.preMulScale = 1;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_PRIVATE, "a PreMulSum world step: the private stage (%d)", (int)p.stage);
  in = input(&l, GB_COLL_BROADCAST, gbPolicyFlat, 10);
  in.slots[GB_HOST_WORLD] = GB_STAGE_SHARED;
  in.exchangeBytes[GB_HOST_WORLD] = 1000 * KIB;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_SHARED, "broadcast: the shared slots (%d)", (int)p.stage);
  static const struct {
    size_t bytes;
    int blocks;
  } b[] = {{1, 1}, {8 * KIB, 1}, {8 * KIB + 1, 2}, {64 * KIB, 8}, {128 * KIB, 8}, {256 * KIB, 16}, {256 * KIB + 1, 4},
           {512 * KIB, 8}, {1024 * KIB, 16}, {4096 * KIB, 32}};
  for (size_t k = 0; k < sizeof(b) / sizeof(b[0]); k++)
    CHECK(gbPlanExchangeBlocks(b[k].bytes) == b[k].blocks, "%zu bytes: %d exchange blocks, got %d", b[k].bytes,
          b[k].blocks, gbPlanExchangeBlocks(b[k].bytes));
  checked += 6 + (int)(sizeof(b) / sizeof(b[0]));
}

/* PreMulSum: a world step's proxy scales each contribution, so it cannot use shared slots. */
static void checkPreMulSum(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1}, 2, 1);
  size_t per = 4 * KIB / 4, count = 3 * per;
  gbPlanInput_t in = input(&l, GB_COLL_ALLREDUCE, gbPolicyFlat, count);
  in.slots[GB_HOST_WORLD] = GB_STAGE_SHARED;
  in.preMulScale = 1;
  gbPlan_t p = build(&in);
  CHECK(p.host == GB_HOST_WORLD && p.stage == GB_STAGE_PRIVATE, "PreMulSum, flat: no shared slots (got %d)",
        (int)p.stage);
  in.hostMemory = 1;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_PRIVATE && p.direct == 1 && p.nchunks == 1 && p.hostChunk == per,
        "PreMulSum, flat, host memory: direct and folded");

  /* On the bridge the island step scaled: the slots are taken. */
  layout_t h;
  makeLayout(&h, (const int[]){2, 2}, 2, 0);
  in = input(&h, GB_COLL_ALLREDUCE, gbPolicyHierarchical, count);
  in.slots[GB_HOST_BRIDGE] = GB_STAGE_SHARED;
  in.preMulScale = 1;
  p = build(&in);
  CHECK(p.host == GB_HOST_BRIDGE && p.stage == GB_STAGE_SHARED, "PreMulSum, hierarchical: the bridge's slots taken");

  /* Block collectives cross in a world step too. */
  in = input(&h, GB_COLL_REDUCESCATTER, gbPolicyAuto, count);
  in.slots[GB_HOST_WORLD] = GB_STAGE_SHARED;
  p = build(&in);
  CHECK(p.host == GB_HOST_WORLD && p.stage == GB_STAGE_SHARED, "reduce-scatter: the world's slots taken");
  in.preMulScale = 1;
  p = build(&in);
  CHECK(p.stage == GB_STAGE_PRIVATE, "reduce-scatter with PreMulSum: no shared slots");
  checked += 5;
}

static void checkBlocks(void) {
  layout_t l;
  makeLayout(&l, (const int[]){2, 1}, 2, 1);
  size_t nranks = 3, slotBytes = 1024 * KIB, es = 4;
  size_t mGather = slotBytes / (es * nranks);       /* 87381 */
  size_t mAllToAll = slotBytes / (es * nranks * 2); /* 43690 */
  size_t count = 200000;
  static const gbColl_t colls[] = {GB_COLL_ALLGATHER, GB_COLL_REDUCESCATTER, GB_COLL_ALLTOALL};
  for (int k = 0; k < 3; k++) {
    size_t m = colls[k] == GB_COLL_ALLTOALL ? mAllToAll : mGather;
    gbPlanInput_t in = input(&l, colls[k], gbPolicyAuto, count);
    gbPlan_t p = build(&in);
    CHECK(p.policy == gbPolicyFlat, "%s across islands: flat", gbPlanCollName(colls[k]));
    CHECK(p.chunkCount == m && p.nchunks == ceilDiv(count, m), "%s: chunks of %zu per block, %zu of them; got %zu, %zu",
          gbPlanCollName(colls[k]), m, ceilDiv(count, m), p.chunkCount, p.nchunks);
    CHECK(p.host == GB_HOST_WORLD && p.stageOut && p.stageIn && p.hostSteps == p.nchunks && p.depth == 4,
          "%s: a world step per chunk", gbPlanCollName(colls[k]));
    CHECK(gbPlanChunkLen(&p, p.nchunks - 1) == count - (p.nchunks - 1) * m, "%s: the last chunk's length",
          gbPlanCollName(colls[k]));
    checked += 4;
  }
  CHECK(mAllToAll == mGather / 2, "all-to-all: half the elements per chunk (%zu of %zu)", mAllToAll, mGather);

  /* One element per rank does not fit: 3 ranks of float64 need 24 bytes (48 for all-to-all). */
  gbPlanInput_t in = input(&l, GB_COLL_ALLTOALL, gbPolicyAuto, 10);
  in.dtype = gbFloat64;
  in.slotBytes = 40;
  gbPlan_t p;
  CHECK(gbPlanBuild(&in, &p) == gbInvalidUsage, "all-to-all, 40-byte slot: invalid usage");
  const char* want = "alltoall: one element per rank (3 ranks, 8 bytes) does not fit a 40-byte staging slot; "
                     "raise GPUBRIDGE_CHUNK_BYTES";
  CHECK(strstr(gbGetLastError(NULL), want) != NULL, "the error says \"%s\", not \"%s\"", want,
        gbGetLastError(NULL));
  in.coll = GB_COLL_ALLGATHER;
  p = build(&in);
  CHECK(p.chunkCount == 40 / 24 && p.nchunks == 10, "all-gather, 40-byte slot: one element of each block per chunk");
  in.slotBytes = 23;
  CHECK(gbPlanBuild(&in, &p) == gbInvalidUsage, "all-gather, 23-byte slot: invalid usage");

  /* One island: the island's own call, whole, and no host step (the slot's size does not matter). */
  layout_t one;
  makeLayout(&one, (const int[]){3}, 1, 2);
  in = input(&one, GB_COLL_ALLTOALL, gbPolicyAuto, count);
  in.slotBytes = 1;
  p = build(&in);
  CHECK(p.policy == gbPolicyNative && p.nchunks == 1 && p.chunkCount == count && p.host == GB_HOST_NONE &&
            p.hostSteps == 0,
        "all-to-all in one island: native, one chunk, no host step");
  checked += 6;
}

/* split-rail: rail r stages [r*n/k, (r+1)*n/k) of each chunk; a chunk whose slice is empty posts nothing. */
static void checkRailSlices(void) {
  layout_t l;
  size_t per = 4 * KIB / 4, count = per + 1; /* a full chunk, then one of 1 element */
  for (int me = 0; me < 2; me++) {
    makeLayout(&l, (const int[]){2, 2}, 2, me);
    gbPlanInput_t in = input(&l, GB_COLL_ALLREDUCE, gbPolicySplitRail, count);
    gbPlan_t p = build(&in);
    size_t want = 0;
    size_t lens[2] = {per, 1};
    for (int i = 0; i < 2; i++) {
      size_t b = (size_t)me * lens[i] / 2, e = (size_t)(me + 1) * lens[i] / 2;
      size_t off, n;
      gbPlanStagedPart(&p, (size_t)i, &off, &n);
      CHECK(off == (size_t)i * per + b && n == e - b, "rail %d, chunk %d: [%zu, +%zu), got [%zu, +%zu)", me, i,
            (size_t)i * per + b, e - b, off, n);
      want += e > b;
    }
    CHECK(p.hostSteps == want, "rail %d: %zu host steps, got %zu", me, want, p.hostSteps);
    checked += 3;
  }
}

/* Chunks by message size: all-reduce and broadcast, float32. */
static void checkChunkBySize(void) {
  layout_t l;
  makeLayout(&l, (const int[]){1, 1}, 2, 0);
  const size_t MIB = 1024 * KIB;
  static const struct {
    size_t bytes;
    int bySize;
    size_t chunk, nchunks;
  } cases[] = {{4 * MIB, 1, 8 * MIB, 1},   {16 * MIB, 1, 8 * MIB, 2},   {40 * MIB, 1, 8 * MIB, 5},
               {64 * MIB, 1, 16 * MIB, 4}, {256 * MIB, 1, 16 * MIB, 16}, {16 * MIB, 0, 16 * MIB, 1},
               {4 * MIB, 0, 16 * MIB, 1}};
  static const gbColl_t colls[] = {GB_COLL_ALLREDUCE, GB_COLL_BROADCAST};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
    for (int c = 0; c < 2; c++) {
      gbPlanInput_t in = input(&l, colls[c], gbPolicyFlat, cases[k].bytes / 4);
      in.chunkBytes = 16 * MIB;
      in.slotBytes = 16 * MIB;
      in.chunkBySize = cases[k].bySize;
      gbPlan_t p = build(&in);
      CHECK(p.chunkCount * 4 == cases[k].chunk && p.nchunks == cases[k].nchunks,
            "%s of %zu MiB, by size %d: chunks of %zu bytes, %zu of them; expected %zu, %zu",
            gbPlanCollName(colls[c]), cases[k].bytes / MIB, cases[k].bySize, p.chunkCount * 4, p.nchunks,
            cases[k].chunk, cases[k].nchunks);
      checked++;
    }
}

int main(void) {
  checkDepth();
  checkChunkBySize();
  checkExchange();
  checkHostMemoryFold();
  checkSharedSlots();
  checkPreMulSum();
  checkBlocks();
  checkRailSlices();
  if (failures) {
    fprintf(stderr, "%d of %d checks failed\n", failures, checked);
    return 1;
  }
  printf("%d checks passed\n", checked);
  return 0;
}
