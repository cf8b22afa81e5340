/* --tune: times all_reduce under every candidate policy over the size sweep
 * and writes the fastest per size as a thresholds file (thresholds.c).
 * Each candidate runs on a child communicator of all ranks made with
 * gbCommSplit and config.policy set; sizes interleave the candidates, so a
 * drift of the machine touches them alike. A candidate's time is the max over
 * ranks (the collective ends when the last rank is done); rank 0 picks and
 * broadcasts the choice, so every rank agrees. Results are checked (-c) and a
 * candidate with a wrong result never wins. */
#include <stdlib.h>
#include <string.h>
#include "perf.h"

typedef struct {
  int policy;
  gbComm_t comm;
} candidate_t;

/* Makes one child per policy the job can run; a split that fails anywhere
 * drops the policy everywhere (the ranks agree through the parent). */
static int makeCandidates(perfCtx_t* ctx, const perfOptions_t* opts, candidate_t* c) {
  int policies[PERF_TUNE_MAX_POLICIES], n = 0;
  /* One island has no bridge to cross: the vendor library alone, or flat. */
  if (ctx->topo.nislands == 1) {
    policies[n++] = gbPolicyNative;
  } else {
    policies[n++] = gbPolicyHierarchical;
    policies[n++] = gbPolicySplitRail;
  }
  policies[n++] = gbPolicyFlat;
  int kept = 0;
  for (int k = 0; k < n; k++) {
    gbConfig_t config = GB_CONFIG_INITIALIZER;
    config.policy = policies[k];
    if (opts->timeoutSeconds > 0) config.timeoutSeconds = opts->timeoutSeconds;
    gbComm_t child = NULL;
    gbResult_t res = gbCommSplit(ctx->comm, 0, ctx->topo.rank, &child, &config);
    uint64_t failed = res != gbSuccess || child == NULL;
    if (failed)
      fprintf(stderr, "gpubridge-perf: rank %d: --tune: policy %s not available: gbCommSplit: %s: %s\n",
              ctx->topo.rank, perfPolicyName(policies[k]), gbGetErrorString(res), gbGetLastError(NULL));
    perfRanksSumU64(ctx, &failed, 1);
    if (failed) {
      if (child) perfCheck(gbCommDestroy(child), "gbCommDestroy");
      if (ctx->topo.rank == 0) printf("# tune: policy %s skipped: gbCommSplit failed (see stderr)\n",
                                      perfPolicyName(policies[k]));
      continue;
    }
    c[kept++] = (candidate_t){policies[k], child};
  }
  if (kept == 0) perfFail("--tune: no policy could be set up");
  return kept;
}

static void printHead(const candidate_t* c, int n, gbDataType_t dt, gbRedOp_t op) {
  printf("# tune: all_reduce %s %s out of place; time (us) of each policy is the max over ranks\n",
         perfTypeName(dt), perfOpName(op));
  printf("#       size         count");
  for (int k = 0; k < n; k++) printf("  %14s", perfPolicyName(c[k].policy));
  printf("  fastest\n");
}

static void jsonPoint(FILE* f, size_t bytes, size_t count, const candidate_t* c, const double* t, int n,
                      int winner) {
  fprintf(f, "{\"tune\": \"all_reduce\", \"size_bytes\": %zu, \"count\": %zu, \"time_us_max_over_ranks\": {", bytes,
          count);
  for (int k = 0; k < n; k++) fprintf(f, "%s\"%s\": %.3f", k ? ", " : "", perfPolicyName(c[k].policy), t[k] * 1e6);
  fprintf(f, "}, \"fastest\": \"%s\"}\n", perfPolicyName(c[winner].policy));
  fflush(f);
}

/* Measures one size; returns the winner's index (the same on every rank). */
static int tuneSize(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* st, candidate_t* c, int n,
                    gbDataType_t dt, gbRedOp_t op, size_t count, double* t) {
  uint64_t wrong[PERF_TUNE_MAX_POLICIES] = {0};
  for (int k = 0; k < n; k++) {
    perfRun_t r = {ctx, opts, PERF_ALL_REDUCE, dt, op, -1, c[k].comm, NULL};
    for (int c = 0; c < opts->check; c++) {
      uint64_t w = perfMeasureCheck(&r, st, count, 0);
      if (w > wrong[k]) wrong[k] = w;
    }
    t[k] = perfMeasureTime(&r, st, count, 0, NULL);
  }
  perfRanksCombineDouble(ctx, t, n, gbMax);
  perfRanksSumU64(ctx, wrong, n);
  int32_t choice = -1;
  for (int k = 0; k < n; k++) {
    st->wrong += wrong[k];
    if (ctx->topo.rank == 0 && wrong[k] == 0 && (choice < 0 || t[k] < t[choice])) choice = k;
  }
  perfRanksBroadcast(ctx, &choice, sizeof(choice), 0);
  if (choice < 0) perfFail("--tune: every policy gave a wrong result at this size (see stderr)");
  return choice;
}

/* Writes the file and shows it as '#' lines (table parsers skip them). */
static void writeFile(const perfCtx_t* ctx, const char* path, FILE* out, const perfTunePoint_t* points, int n) {
  char date[32], layout[256];
  perfDateText(date, sizeof(date));
  perfLayoutLabel(&ctx->topo, layout, sizeof(layout));
  char* text = NULL;
  size_t len = 0;
  FILE* mem = open_memstream(&text, &len);
  if (!mem) perfFail("out of host memory");
  perfThresholdsWrite(mem, points, n, "all_reduce", date, ctx->topo.nranks, layout);
  fclose(mem);
  if (fwrite(text, 1, len, out) != len || fclose(out) != 0) {
    perror("gpubridge-perf: --tune");
    free(text);
    perfFail("--tune: writing the thresholds file failed");
  }
  printf("# tune: wrote %s:\n", path);
  for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) printf("#   %s\n", line);
  free(text);
}

/* The first (type, op) pair asked for that is defined. */
static void firstPair(const perfOptions_t* opts, gbDataType_t* dt, gbRedOp_t* op) {
  for (int t = 0; t < opts->nTypes; t++)
    for (int o = 0; o < opts->nOps; o++)
      if (perfOpValid(opts->ops[o], opts->types[t])) {
        *dt = opts->types[t];
        *op = opts->ops[o];
        return;
      }
}

void perfTuneRun(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* st, FILE* out, FILE* json) {
  gbDataType_t dt = opts->types[0];
  gbRedOp_t op = opts->ops[0];
  firstPair(opts, &dt, &op);
  candidate_t c[PERF_TUNE_MAX_POLICIES];
  int n = makeCandidates(ctx, opts, c);
  if (ctx->topo.rank == 0) printHead(c, n, dt, op);

  perfTunePoint_t* points = NULL;
  int npoints = 0;
  size_t raw = 0, bytes = 0, unit = perfTypeSize(dt);
  while (perfOptionsNextSize(opts, unit, &raw, &bytes)) {
    double t[PERF_TUNE_MAX_POLICIES];
    int w = tuneSize(ctx, opts, st, c, n, dt, op, bytes / unit, t);
    perfTunePoint_t* grown = realloc(points, (size_t)(npoints + 1) * sizeof(*points));
    if (!grown) perfFail("out of host memory");
    points = grown;
    points[npoints++] = (perfTunePoint_t){bytes, c[w].policy};
    if (ctx->topo.rank != 0) continue;
    printf("%12zu  %12zu", bytes, bytes / unit);
    for (int k = 0; k < n; k++) printf("  %14.2f", t[k] * 1e6);
    printf("  %s%s\n", perfPolicyName(c[w].policy), ctx->topo.runKind == gbRunSimulated ? " simulated" : "");
    if (json) jsonPoint(json, bytes, bytes / unit, c, t, n, w);
  }

  for (int k = 0; k < n; k++) perfCheck(gbCommDestroy(c[k].comm), "gbCommDestroy");
  if (ctx->topo.rank == 0) writeFile(ctx, opts->tunePath, out, points, npoints);
  free(points);
}
