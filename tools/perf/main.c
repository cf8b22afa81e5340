/* gpubridge-perf: started once per rank (gpubridge-run, torchrun, srun), or
 * alone as a job of one rank; rank 0 prints the table. Exit status: 0 when every result was right and no
 * guard byte changed, 1 otherwise or on an error, 2 for a bad command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"
#include "version.h"

/* Rank 0 opens an output file (-J, --tune) before anything runs; every rank
 * learns whether it could, so all stop alike when it could not. Collective
 * even without the flag: a launcher may give it to rank 0 alone. */
static FILE* openOutput(perfCtx_t* ctx, const char* path, const char* flag) {
  FILE* f = NULL;
  uint64_t failed = 0;
  if (ctx->topo.rank == 0 && path) {
    f = fopen(path, "w");
    if (!f) {
      fprintf(stderr, "gpubridge-perf: %s: cannot write '%s': %s\n", flag, path, strerror(errno));
      failed = 1;
    }
  }
  perfRanksSumU64(ctx, &failed, 1);
  if (failed) {
    perfCheckUseComm(NULL);
    perfCheck(gbCommDestroy(ctx->comm), "gbCommDestroy");
    exit(PERF_EXIT_USAGE);
  }
  return f;
}

static void runAll(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* st, perfTable_t* table,
                   perfVendor_t* baseline) {
  for (int t = 0; t < opts->nTypes; t++) {
    if (!perfCollReduces(opts->coll)) {
      perfBenchSweep(ctx, opts, st, table, baseline, opts->types[t], gbSum, opts->root);
      continue;
    }
    for (int o = 0; o < opts->nOps; o++) {
      if (!perfOpValid(opts->ops[o], opts->types[t])) continue; /* avg on an integer type */
      perfBenchSweep(ctx, opts, st, table, baseline, opts->types[t], opts->ops[o], opts->root);
    }
  }
}

/* Ends a job every rank agreed cannot run: rank 0 says why, all exit 2. */
static int refuse(perfCtx_t* ctx, const char* why) {
  if (ctx->topo.rank == 0) fprintf(stderr, "gpubridge-perf: %s\n", why);
  perfCheckUseComm(NULL);
  perfCheck(gbCommDestroy(ctx->comm), "gbCommDestroy");
  return PERF_EXIT_USAGE;
}

/* --baseline's library, or NULL with why: the vendor library alone must span
 * every rank, so the ranks must be real GPUs of one library. Decided from the
 * topology, which every rank shares, so every rank decides alike. */
static const char* baselineLibrary(const gbTopology_t* t, char* why, size_t len) {
  if (t->runKind != gbRunReal) {
    snprintf(why, len, "--baseline needs real GPUs: these ranks are %s, so there is no vendor library to "
             "compare with; run it on a GPU machine", perfRunKindName(t->runKind));
    return NULL;
  }
  const char* lib = perfVendorLibraryOf(t->islandVendor[0]);
  for (int k = 0; k < t->nislands; k++) {
    const char* other = perfVendorLibraryOf(t->islandVendor[k]);
    if (!lib || !other || strcmp(lib, other) != 0) {
      snprintf(why, len, "--baseline: the islands use different vendor libraries (%s and %s), which cannot "
               "share one communicator; run --baseline on a one-vendor job (GPUBRIDGE_SPLIT_TEST for two islands)",
               t->islandVendor[0], t->islandVendor[k]);
      return NULL;
    }
  }
  return lib;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  perfOptions_t opts;
  int rc = perfOptionsParse(argc, argv, &opts);
  if (rc == 1) return opts.version ? gbToolPrintVersion("gpubridge-perf") : 0;
  if (rc != 0) return rc;

  gbConfig_t config = GB_CONFIG_INITIALIZER;
  if (opts.timeoutSeconds > 0) config.timeoutSeconds = opts.timeoutSeconds;
  perfCtx_t ctx = {0};
  perfJoin(&ctx, &config);
  perfCheckUseComm(ctx.comm);
  perfCheck(gbCommGetTopology(ctx.comm, &ctx.topo), "gbCommGetTopology");

  /* Every rank sees the same topology, so every rank stops alike. */
  char why[400];
  if (perfCollRooted(opts.coll) && opts.root >= ctx.topo.nranks) {
    snprintf(why, sizeof(why), "-r %d: the root must be a rank below %d", opts.root, ctx.topo.nranks);
    return refuse(&ctx, why);
  }
  const char* baselineLib = opts.baseline ? baselineLibrary(&ctx.topo, why, sizeof(why)) : NULL;
  if (opts.baseline && !baselineLib) return refuse(&ctx, why);

  perfCheck(gbStreamCreate(&ctx.stream), "gbStreamCreate");
  /* Big enough for the rank records, a vendor unique id, the combined times. */
  ctx.scratchBytes = (size_t)ctx.topo.nranks * sizeof(perfRankInfo_t);
  if (ctx.scratchBytes < 512) ctx.scratchBytes = 512;
  perfCheck(gbMemAlloc(&ctx.scratch, ctx.scratchBytes), "gbMemAlloc");
  perfEventsSetup(&ctx, &opts);
  perfPhasesSetup(&ctx, &opts);

  perfRankInfo_t* ranks = perfRanksGather(&ctx);
  FILE* tuneFile = openOutput(&ctx, opts.tunePath, "--tune");
  perfTable_t table = {.json = openOutput(&ctx, opts.jsonPath, "-J"), .check = opts.check,
                       .simulated = ctx.topo.runKind == gbRunSimulated,
                       .splitTest = ctx.topo.splitTest != 0,
                       .emulatedAmd = perfHasEmulatedIsland(&ctx.topo), .phases = opts.phases};
  if (ctx.topo.rank == 0) {
    perfTableHeader(&opts, &ctx, ranks);
    if (table.json) perfMetaJson(table.json, &opts, &ctx, ranks);
  }
  free(ranks);

  perfState_t st = {0};
  size_t capacity = perfOptionsMaxBytes(&opts, ctx.topo.nranks);
  perfBufferAlloc(&st.send, capacity);
  perfBufferAlloc(&st.recv, capacity);
  perfVendor_t* baseline = baselineLib ? perfVendorCreate(&ctx, baselineLib) : NULL;
  if (opts.tunePath) perfTuneRun(&ctx, &opts, &st, tuneFile, table.json);
  else
    for (int cycle = 0; cycle < opts.cycles; cycle++) runAll(&ctx, &opts, &st, &table, baseline);
  perfVendorDestroy(baseline);
  if (ctx.topo.rank == 0) perfTableFooter(&table, st.outOfBounds);

  if (table.json && fclose(table.json) != 0) perror("gpubridge-perf: -J");
  perfBufferFree(&st.send);
  perfBufferFree(&st.recv);
  free(st.host.host);
  perfCheck(gbMemFree(ctx.scratch), "gbMemFree");
  perfEventsClose(ctx.events);
  /* The communicator first: destroying it waits on the streams it used. */
  perfCheckUseComm(NULL);
  perfCheck(gbCommDestroy(ctx.comm), "gbCommDestroy");
  perfCheck(gbStreamDestroy(ctx.stream), "gbStreamDestroy");
  return st.wrong == 0 && st.outOfBounds == 0 ? 0 : 1;
}
