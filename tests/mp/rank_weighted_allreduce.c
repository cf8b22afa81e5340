/* One rank of tests/mp/test_weighted_allreduce.py: the weighted average of
 * docs/REDUCTION_ORDER.md ("Weighted average"), as a C program writes it.
 * Rank r's weight is kWeights[r] (its local batch); the total W is one
 * float64 sum all-reduce of the weights, and each gradient buffer is one
 * all-reduce with a PreMulSum op whose host-immediate scalar is w_r / W
 * rounded once to the type: the rank's own scalar, different on every rank.
 *
 * Checks: W is the exact sum; each result equals, bit for bit, the documented
 * order with every rank's contribution (w_k / W) * x_k (computed here for
 * every rank, rank_common.h); for float32 and float64 it is within
 * (n + 2) * u * sum_k |w_k x_k| / W of the exact weighted mean.
 *
 * Usage: rank_weighted_allreduce --layout V0,V1,...   (GPUBRIDGE_CHUNK_BYTES and
 * GPUBRIDGE_RING_MIN_BYTES set by the driver) */
#include <math.h>

#include "rank_common.h"

static const double kWeights[] = {5, 11, 16, 3, 7, 2, 29, 1};
static const size_t kCounts[] = {1, 1000, 33000};
static const int kTypes[] = {gbFloat32, gbFloat64, gbFloat16, gbBfloat16};

/* The total weight: each rank's weight summed in float64 (exact for integers below 2^53). */
static double totalWeight(gbComm_t comm, void* stream, double mine) {
  void* d;
  double w = mine;
  CHECK_GB(gbMemAlloc(&d, sizeof(double)));
  CHECK_GB(gbMemcpyToDevice(d, &w, sizeof(w)));
  CHECK_GB(gbAllReduce(d, d, 1, gbFloat64, gbSum, comm, stream));
  CHECK_GB(gbStreamSynchronize(stream));
  CHECK_GB(gbMemcpyToHost(&w, d, sizeof(w)));
  CHECK_GB(gbMemFree(d));
  return w;
}

/* The weighted average of buf (count elements of dt) over the ranks, in place. */
static void weightedAllReduce(gbComm_t comm, void* stream, void* buf, size_t count, int dt, double weight,
                              double total) {
  unsigned char scalar[8];
  encodeScalar(weight / total, dt, scalar);
  gbRedOp_t op;
  CHECK_GB(gbRedOpCreatePreMulSum(&op, scalar, dt, gbScalarHostImmediate, comm));
  CHECK_GB(gbAllReduce(buf, buf, count, dt, op, comm, stream));
  CHECK_GB(gbRedOpDestroy(op, comm)); /* allowed once the call is enqueued */
  CHECK_GB(gbStreamSynchronize(stream));
}

/* float32/float64 only: got against the exact weighted mean (long double). */
static void checkBound(const char* what, const void* got, size_t count, int dt, int caseIdx, double total) {
  long double u = dt == gbFloat32 ? ldexpl(1, -24) : ldexpl(1, -53);
  char in[8];
  for (size_t i = 0; i < count; i++) {
    long double exact = 0, mag = 0;
    for (int k = 0; k < gN; k++) {
      genInput(inputKey(k, caseIdx), i, 1, dt, in);
      long double v = dt == gbFloat32 ? *(float*)in : *(double*)in;
      exact += kWeights[k] * v;
      mag += kWeights[k] * fabsl(v);
    }
    exact /= total;
    mag /= total;
    long double g = dt == gbFloat32 ? ((const float*)got)[i] : ((const double*)got)[i];
    if (fabsl(g - exact) > (gN + 2) * u * mag)
      DIE("%s: element %zu is %.17Lg, the exact weighted mean %.17Lg: off by %.3Lg, more than (n + 2) u "
          "sum|w x| / W = %.3Lg", what, i, g, exact, fabsl(g - exact), (gN + 2) * u * mag);
  }
}

int main(int argc, char** argv) {
  const char* layout = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) layout = argv[++i];
    else DIE("bad argument '%s'", argv[i]);
  }
  if (!layout) DIE("--layout V0,V1,... is required");
  parseLayout(layout);
  if (gN > (int)(sizeof(kWeights) / sizeof(kWeights[0]))) DIE("at most %zu ranks", sizeof(kWeights) / sizeof(kWeights[0]));
  int policy = resolvedPolicy();
  gChunkBytes = envSize("GPUBRIDGE_CHUNK_BYTES");
  gCall.ringMin = envSize("GPUBRIDGE_RING_MIN_BYTES");

  gbComm_t comm;
  CHECK_GB(gbCommInitFromEnv(&comm, NULL));
  CHECK_GB(gbCommUserRank(comm, &gRank));
  checkTopology(comm, gRank, policy);
  void* stream;
  CHECK_GB(gbStreamCreate(&stream));

  double total = totalWeight(comm, stream, kWeights[gRank]), want = 0;
  for (int k = 0; k < gN; k++) want += kWeights[k];
  if (total != want) DIE("the all-reduced weights sum to %.17g, expected %.17g", total, want);

  size_t cap = kCounts[sizeof(kCounts) / sizeof(kCounts[0]) - 1] * 8;
  void *dev, *got = malloc(cap), *expect = malloc(cap);
  if (!got || !expect) DIE("out of memory");
  CHECK_GB(gbMemAlloc(&dev, cap));
  int caseIdx = 0, cases = 0;
  for (size_t t = 0; t < sizeof(kTypes) / sizeof(kTypes[0]); t++)
    for (size_t c = 0; c < sizeof(kCounts) / sizeof(kCounts[0]); c++, caseIdx++) {
      int dt = kTypes[t];
      size_t count = kCounts[c], es = dtSizes[dt];
      char what[160];
      snprintf(what, sizeof(what), "case %d: weighted all-reduce %s count %zu (policy %s)", caseIdx, dtNames[dt],
               count, policyNames[policy]);
      genInput(inputKey(gRank, caseIdx), 0, count, dt, got);
      CHECK_GB(gbMemcpyToDevice(dev, got, count * es));
      weightedAllReduce(comm, stream, dev, count, dt, kWeights[gRank], total);
      CHECK_GB(gbMemcpyToHost(got, dev, count * es));

      unsigned char scalars[MAX_RANKS][8];
      for (int k = 0; k < gN; k++) encodeScalar(kWeights[k] / want, dt, scalars[k]);
      gCall = (call_t){.dt = dt, .op = gbSum, .es = es, .ringMin = gCall.ringMin, .preMul = 1,
                       .rankScalar = (const unsigned char(*)[8])scalars};
      expectedAllReduce(policy, caseIdx, count, expect);
      compare(what, got, expect, count, dt);
      if (dt == gbFloat32 || dt == gbFloat64) checkBound(what, got, count, dt, caseIdx, want);
      cases++;
    }
  CHECK_GB(gbMemFree(dev));
  CHECK_GB(gbStreamDestroy(stream));
  CHECK_GB(gbCommDestroy(comm));
  free(got);
  free(expect);
  printf("ok: rank %d of %d, %d islands, policy %s, total weight %g, %d weighted all-reduce cases\n", gRank, gN,
         gNislands, policyNames[policy], total, cases);
  return 0;
}
