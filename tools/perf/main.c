/* gpubridge-perf: started once per rank (gpubridge-run, torchrun, srun);
 * rank 0 prints the table. Exit status: 0 when every result was right and no
 * guard byte changed, 1 otherwise or on an error, 2 for a bad command line. */
#include <stdio.h>
#include <stdlib.h>
#include "perf.h"

/* Rank 0 opens the JSON file; every rank learns whether it could, so all stop
 * alike when it could not. */
static FILE* openJson(perfCtx_t* ctx, const perfOptions_t* opts) {
  if (!opts->jsonPath) return NULL;
  FILE* f = NULL;
  uint64_t failed = 0;
  if (ctx->topo.rank == 0) {
    f = fopen(opts->jsonPath, "w");
    if (!f) {
      perror("gpubridge-perf: -J");
      failed = 1;
    }
  }
  perfRanksSumU64(ctx, &failed, 1);
  if (failed) {
    if (ctx->topo.rank == 0)
      fprintf(stderr, "gpubridge-perf: cannot write the -J file '%s'\n", opts->jsonPath);
    perfCheck(gbCommDestroy(ctx->comm), "gbCommDestroy");
    exit(PERF_EXIT_USAGE);
  }
  return f;
}

static void runAll(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* st, perfTable_t* table) {
  for (int t = 0; t < opts->nTypes; t++) {
    if (opts->coll == PERF_BROADCAST) {
      perfBenchSweep(ctx, opts, st, table, opts->types[t], gbSum, opts->root);
      continue;
    }
    for (int o = 0; o < opts->nOps; o++) {
      if (!perfOpValid(opts->ops[o], opts->types[t])) continue; /* avg on an integer type */
      perfBenchSweep(ctx, opts, st, table, opts->types[t], opts->ops[o], -1);
    }
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  perfOptions_t opts;
  int rc = perfOptionsParse(argc, argv, &opts);
  if (rc == 1) return 0;
  if (rc != 0) return rc;

  gbConfig_t config = GB_CONFIG_INITIALIZER;
  if (opts.timeoutSeconds > 0) config.timeoutSeconds = opts.timeoutSeconds;
  perfCtx_t ctx = {0};
  perfCheck(gbCommInitFromEnv(&ctx.comm, &config), "gbCommInitFromEnv");
  perfCheckUseComm(ctx.comm);
  perfCheck(gbCommGetTopology(ctx.comm, &ctx.topo), "gbCommGetTopology");

  if (opts.coll == PERF_BROADCAST && opts.root >= ctx.topo.nranks) {
    /* Every rank sees the same world size, so every rank stops here. */
    fprintf(stderr, "gpubridge-perf: -r %d: the root must be a rank below %d\n", opts.root, ctx.topo.nranks);
    perfCheck(gbCommDestroy(ctx.comm), "gbCommDestroy");
    return PERF_EXIT_USAGE;
  }

  perfCheck(gbStreamCreate(&ctx.stream), "gbStreamCreate");
  ctx.scratchBytes = (size_t)ctx.topo.nranks * sizeof(perfRankInfo_t);
  if (ctx.scratchBytes < 64) ctx.scratchBytes = 64;
  perfCheck(gbMemAlloc(&ctx.scratch, ctx.scratchBytes), "gbMemAlloc");

  perfRankInfo_t* ranks = perfRanksGather(&ctx);
  perfTable_t table = {.json = openJson(&ctx, &opts), .check = opts.check,
                       .simulated = ctx.topo.runKind == gbRunSimulated,
                       .splitTest = ctx.topo.splitTest != 0,
                       .emulatedAmd = perfHasEmulatedIsland(&ctx.topo)};
  if (ctx.topo.rank == 0) perfTableHeader(&opts, &ctx, ranks);
  free(ranks);

  perfState_t st = {0};
  size_t capacity = perfOptionsMaxBytes(&opts);
  perfBufferAlloc(&st.send, capacity);
  perfBufferAlloc(&st.recv, capacity);
  runAll(&ctx, &opts, &st, &table);
  if (ctx.topo.rank == 0) perfTableFooter(&table, st.outOfBounds);

  if (table.json && fclose(table.json) != 0) perror("gpubridge-perf: -J");
  perfBufferFree(&st.send);
  perfBufferFree(&st.recv);
  free(st.host.host);
  perfCheck(gbMemFree(ctx.scratch), "gbMemFree");
  /* The communicator first: destroying it waits on the streams it used. */
  perfCheckUseComm(NULL);
  perfCheck(gbCommDestroy(ctx.comm), "gbCommDestroy");
  perfCheck(gbStreamDestroy(ctx.stream), "gbStreamDestroy");
  return st.wrong == 0 && st.outOfBounds == 0 ? 0 : 1;
}
