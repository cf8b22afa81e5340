/* What rank 0 prints: nccl-tests' header block, table and closing lines, with
 * every simulated result marked as such; and the same rows as JSON lines. */
#include <stdio.h>
#include <string.h>
#include "perf.h"

const char* perfRunKindName(int runKind) {
  switch (runKind) {
    case gbRunReal: return "real";
    case gbRunSimulated: return "simulated";
    case gbRunCpu: return "cpu";
    default: return "unknown";
  }
}

int perfHasEmulatedIsland(const gbTopology_t* t) {
  for (int k = 0; k < t->nislands; k++)
    if (strstr(t->islandVendor[k], "emulated")) return 1;
  return 0;
}

const char* perfPolicyName(int policy) {
  switch (policy) {
    case gbPolicyAuto: return "auto";
    case gbPolicyHierarchical: return "hierarchical";
    case gbPolicyNative: return "native";
    case gbPolicyFlat: return "flat";
    default: return "unknown";
  }
}

/* "rank 2", "ranks 0-1", "ranks 0,2,4-5": the members of one island. */
static void printIslandRanks(const gbTopology_t* t, int island) {
  int members = 0;
  for (int r = 0; r < t->nranks; r++) members += t->islandOfRank[r] == island;
  printf(members == 1 ? "rank " : "ranks ");
  int first = 1;
  for (int r = 0; r < t->nranks; r++) {
    if (t->islandOfRank[r] != island) continue;
    int end = r;
    while (end + 1 < t->nranks && t->islandOfRank[end + 1] == island) end++;
    printf(end > r ? "%s%d-%d" : "%s%d", first ? "" : ",", r, end);
    first = 0;
    r = end;
  }
}

static const char* vendorOfRank(const gbTopology_t* t, int r) {
  return t->islandVendor[t->islandOfRank[r]];
}

void perfTableHeader(const perfOptions_t* opts, const perfCtx_t* ctx, const perfRankInfo_t* ranks) {
  const gbTopology_t* t = &ctx->topo;
  const char* mode = perfRunKindName(t->runKind);
  printf("# gpubridge-perf %s: %d ranks, %d islands (", perfCollName(opts->coll), t->nranks, t->nislands);
  for (int k = 0; k < t->nislands; k++) {
    printf("%s%s: ", k ? ", " : "", t->islandVendor[k]);
    printIslandRanks(t, k);
  }
  printf("), policy %s, %s%s\n", perfPolicyName(t->policy), mode, t->splitTest ? ", split-test" : "");
  if (t->splitTest) printf("# split-test: one vendor's ranks relabelled into islands, for testing only\n");
  if (perfHasEmulatedIsland(t)) printf("# emulated AMD: an island runs HIP/RCCL on NVIDIA GPUs through the test rig\n");
  if (t->runKind == gbRunSimulated)
    printf("# simulated GPUs: timings are of the host simulation, not of GPUs\n");
  printf("# minBytes %zu maxBytes %zu step: ", opts->minBytes, opts->maxBytes);
  if (opts->stepBytes > 0) printf("%zu(bytes)", opts->stepBytes);
  else printf("%zu(factor)", opts->stepFactor);
  printf(" warmup iters: %d iters: %d validation: %d blocking: %d average: %d\n", opts->warmup,
         opts->iters, opts->check, opts->blocking, opts->average);
  printf("#\n# Using devices\n");
  for (int r = 0; r < t->nranks; r++) {
    printf("#  Rank %2d Group %2d Pid %5d on %10s device %s (%s)\n", r, t->islandOfRank[r],
           (int)ranks[r].pid, ranks[r].host, vendorOfRank(t, r), mode);
  }
  printf("#\n");
  printf("#                                                              out-of-place                       in-place\n");
  printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
  printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
  fflush(stdout);
}

/* nccl-tests' time format: fewer decimals as the time grows. */
static void printHalf(const perfTable_t* table, const perfHalf_t* h) {
  const char* fmt = h->timeUs >= 10000.0 ? "  %7.0f" : h->timeUs >= 100.0 ? "  %7.1f" : "  %7.2f";
  printf(fmt, h->timeUs);
  printf("  %6.2f  %6.2f", h->algBw, h->busBw);
  if (table->check) printf("  %5llu", (unsigned long long)h->wrong);
  else printf("  %5s", "N/A");
}

static void jsonHalf(FILE* f, const perfTable_t* table, const char* name, const perfHalf_t* h) {
  fprintf(f, "\"%s\": {\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": ", name,
          h->timeUs, h->algBw, h->busBw);
  if (table->check) fprintf(f, "%llu}", (unsigned long long)h->wrong);
  else fprintf(f, "null}");
}

static void jsonRow(perfTable_t* table, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRow_t* row) {
  FILE* f = table->json;
  const gbTopology_t* t = &ctx->topo;
  fprintf(f, "{\"collective\": \"%s\", \"size_bytes\": %zu, \"count\": %zu, \"type\": \"%s\", ",
          perfCollName(opts->coll), row->bytes, row->count, perfTypeName(row->dt));
  fprintf(f, "\"redop\": \"%s\", \"root\": %d, \"ranks\": %d, \"islands\": %d, \"policy\": \"%s\", ",
          row->root < 0 ? perfOpName(row->op) : "none", row->root, t->nranks, t->nislands,
          perfPolicyName(t->policy));
  fprintf(f, "\"mode\": \"%s\", \"simulated\": %s, \"split_test\": %s, \"emulated_amd\": %s, \"iters\": %d, \"warmup\": %d, \"blocking\": %d, ",
          perfRunKindName(t->runKind), table->simulated ? "true" : "false",
          table->splitTest ? "true" : "false", table->emulatedAmd ? "true" : "false", opts->iters, opts->warmup,
          opts->blocking);
  jsonHalf(f, table, "out_of_place", &row->outOfPlace);
  fprintf(f, ", ");
  jsonHalf(f, table, "in_place", &row->inPlace);
  fprintf(f, "}\n");
  fflush(f);
}

void perfTableRow(perfTable_t* table, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRow_t* row) {
  printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, perfTypeName(row->dt),
         row->root < 0 ? perfOpName(row->op) : "none", row->root);
  printHalf(table, &row->outOfPlace);
  printHalf(table, &row->inPlace);
  printf("%s%s%s\n", table->simulated ? " simulated" : "", table->splitTest ? " split-test" : "",
         table->emulatedAmd ? " emulated-AMD" : "");
  fflush(stdout);
  table->busBwSum += row->outOfPlace.busBw + row->inPlace.busBw;
  table->busBwCount += 2;
  if (table->json) jsonRow(table, opts, ctx, row);
}

void perfTableFooter(perfTable_t* table, uint64_t outOfBounds) {
  printf("# Out of bounds values : %llu %s\n", (unsigned long long)outOfBounds, outOfBounds ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g \n", table->busBwCount ? table->busBwSum / table->busBwCount : 0.0);
  printf("#\n");
  if (table->simulated) printf("# (simulated)\n");
  if (table->splitTest) printf("# (split-test)\n");
  if (table->emulatedAmd) printf("# (emulated AMD)\n");
  fflush(stdout);
}
