/* What rank 0 prints: nccl-tests' header block, table and closing lines, with
 * every simulated result marked as such; and the same rows as JSON lines
 * (after the metadata line of meta.c). */
#include <stdio.h>
#include <string.h>
#include "perf.h"

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
  perfMetaPrint(ctx);
  if (t->splitTest) printf("# split-test: one vendor's ranks relabelled into islands, for testing only\n");
  if (perfHasEmulatedIsland(t)) printf("# emulated AMD: an island runs HIP/RCCL on NVIDIA GPUs through the test rig\n");
  if (t->runKind == gbRunSimulated)
    printf("# simulated GPUs: timings are of the host simulation, not of GPUs\n");
  if (ctx->alone)
    printf("# one rank: started without a launcher; for N ranks, gpubridge-run -n N -- gpubridge-perf ...\n");
  printf("# minBytes %zu maxBytes %zu step: ", opts->minBytes, opts->maxBytes);
  if (opts->stepBytes > 0) printf("%zu(bytes)", opts->stepBytes);
  else printf("%zu(factor)", opts->stepFactor);
  printf(" warmup iters: %d iters: %d validation: %d blocking: %d average: %d\n", opts->warmup,
         opts->iters, opts->check, opts->blocking, opts->average);
  printf("# timing: %s\n", ctx->timing);
  printf("#\n# Using devices\n");
  for (int r = 0; r < t->nranks; r++) {
    printf("#  Rank %2d Group %2d Pid %5d on %10s device %s (%s)", r, t->islandOfRank[r], (int)ranks[r].pid,
           ranks[r].host, vendorOfRank(t, r), mode);
    if (t->runKind == gbRunReal)
      printf(" %s, %s", ranks[r].device, ranks[r].library[0] ? ranks[r].library : "vendor library ?");
    printf("\n");
  }
  printf("#\n");
  if (opts->tunePath) return; /* tune.c prints its own table */
  int phases = opts->phases;
  printf("#                                                              out-of-place                       in-place");
  if (phases) printf("%17s%s%15s%s", "", "out-of-place phases, rank 0 (us)", "", "in-place phases, rank 0 (us)");
  printf("\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong");
  for (int half = 0; phases && half < 2; half++)
    for (int p = 0; p < PERF_NUM_PHASES; p++) printf("  %7s", perfPhaseName((perfPhase_t)p));
  printf("\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n");
  if (phases)
    printf("# phases: check = up to the call check's end, island = the island step up to the chunk staged, wait = "
           "until the proxy starts the bridge step, bridge, after = copy-back and island step; they add up to a "
           "call's time (-z 0: from the previous call's end)\n");
  fflush(stdout);
}

/* nccl-tests' time format: fewer decimals as the time grows. */
static void printTime(double us) {
  printf(us >= 10000.0 ? "  %7.0f" : us >= 100.0 ? "  %7.1f" : "  %7.2f", us);
}

static void printPhases(const perfHalf_t* h) {
  for (int p = 0; p < PERF_NUM_PHASES; p++) {
    if (h->ran && h->phases.records > 0) printTime(h->phases.us[p]);
    else printf("  %7s", "N/A");
  }
}

static void printHalf(const perfTable_t* table, const perfHalf_t* h) {
  if (!h->ran) {
    printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  printTime(h->timeUs);
  printf("  %6.2f  %6.2f", h->algBw, h->busBw);
  if (table->check) printf("  %5llu", (unsigned long long)h->wrong);
  else printf("  %5s", "N/A");
}

static void jsonHalf(FILE* f, const perfTable_t* table, const char* name, const perfHalf_t* h) {
  if (!h->ran) {
    fprintf(f, "\"%s\": null", name);
    return;
  }
  fprintf(f, "\"%s\": {\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": ", name,
          h->timeUs, h->algBw, h->busBw);
  if (table->check) fprintf(f, "%llu", (unsigned long long)h->wrong);
  else fprintf(f, "null");
  if (table->phases && h->phases.records > 0) {
    fprintf(f, ", \"phases\": {\"rank\": 0, \"records\": %d", h->phases.records);
    for (int p = 0; p < PERF_NUM_PHASES; p++)
      fprintf(f, ", \"%s_us\": %.3f", perfPhaseName((perfPhase_t)p), h->phases.us[p]);
    fprintf(f, "}");
  }
  fprintf(f, "}");
}

static void jsonRow(perfTable_t* table, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRow_t* row,
                    const perfRow_t* base, const char* baseLabel) {
  FILE* f = table->json;
  const gbTopology_t* t = &ctx->topo;
  fprintf(f, "{\"collective\": \"%s\", \"size_bytes\": %zu, \"count\": %zu, \"type\": \"%s\", ",
          perfCollName(opts->coll), row->bytes, row->count, perfTypeName(row->dt));
  fprintf(f, "\"redop\": \"%s\", \"root\": %d, \"ranks\": %d, \"islands\": %d, \"policy\": \"%s\", ",
          perfCollReduces(opts->coll) ? perfOpName(row->op) : "none", row->root, t->nranks, t->nislands,
          perfPolicyName(t->policy));
  fprintf(f, "\"mode\": \"%s\", \"simulated\": %s, \"split_test\": %s, \"emulated_amd\": %s, \"iters\": %d, \"warmup\": %d, \"blocking\": %d, ",
          perfRunKindName(t->runKind), table->simulated ? "true" : "false",
          table->splitTest ? "true" : "false", table->emulatedAmd ? "true" : "false", opts->iters, opts->warmup,
          opts->blocking);
  jsonHalf(f, table, "out_of_place", &row->outOfPlace);
  fprintf(f, ", ");
  jsonHalf(f, table, "in_place", &row->inPlace);
  if (base) {
    fprintf(f, ", \"baseline\": {\"library\": ");
    perfJsonString(f, baseLabel);
    fprintf(f, ", ");
    jsonHalf(f, table, "out_of_place", &base->outOfPlace);
    fprintf(f, ", ");
    jsonHalf(f, table, "in_place", &base->inPlace);
    fprintf(f, "}");
  }
  fprintf(f, "}\n");
  fflush(f);
}

static void printRow(const perfTable_t* table, const perfOptions_t* opts, const perfRow_t* row, const char* tag) {
  printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, perfTypeName(row->dt),
         perfCollReduces(opts->coll) ? perfOpName(row->op) : "none", row->root);
  printHalf(table, &row->outOfPlace);
  printHalf(table, &row->inPlace);
  if (table->phases) {
    printPhases(&row->outOfPlace);
    printPhases(&row->inPlace);
  }
  printf("%s%s%s%s\n", table->simulated ? " simulated" : "", table->splitTest ? " split-test" : "",
         table->emulatedAmd ? " emulated-AMD" : "", tag);
}

/* gpubridge's algbw over the baseline's, or N/A. */
static void ratioText(const perfHalf_t* a, const perfHalf_t* b, char* buf, size_t len) {
  if (a->ran && b->ran && b->algBw > 0) snprintf(buf, len, "%.3f", a->algBw / b->algBw);
  else snprintf(buf, len, "N/A");
}

void perfTableRow(perfTable_t* table, const perfOptions_t* opts, const perfCtx_t* ctx, const perfRow_t* row,
                  const perfRow_t* base, const char* baseLabel) {
  printRow(table, opts, row, "");
  if (base) {
    char tag[64];
    snprintf(tag, sizeof(tag), " baseline %s", baseLabel);
    printRow(table, opts, base, tag);
    char op[16], ip[16];
    ratioText(&row->outOfPlace, &base->outOfPlace, op, sizeof(op));
    ratioText(&row->inPlace, &base->inPlace, ip, sizeof(ip));
    printf("#  algbw ratio gpubridge/%s: out-of-place %s in-place %s\n", baseLabel, op, ip);
  }
  fflush(stdout);
  const perfHalf_t* halves[2] = {&row->outOfPlace, &row->inPlace};
  for (int k = 0; k < 2; k++) {
    if (!halves[k]->ran) continue;
    table->busBwSum += halves[k]->busBw;
    table->busBwCount++;
  }
  if (table->json) jsonRow(table, opts, ctx, row, base, baseLabel);
}

void perfTableFooter(perfTable_t* table, uint64_t outOfBounds) {
  printf("# Out of bounds values : %llu %s\n", (unsigned long long)outOfBounds, outOfBounds ? "FAILED" : "OK");
  if (table->busBwCount) printf("# Avg bus bandwidth    : %g \n", table->busBwSum / table->busBwCount);
  printf("#\n");
  if (table->simulated) printf("# (simulated)\n");
  if (table->splitTest) printf("# (split-test)\n");
  if (table->emulatedAmd) printf("# (emulated AMD)\n");
  fflush(stdout);
}
