/* One sweep over the sizes for a (type, op, root): per size, out of place and
 * (where the collective has one) in place, the -c check runs, warm-up,
 * then the timed iterations, with guard areas set before and checked after;
 * with --baseline the same again through the vendor library alone. Then the
 * ranks' times and counts are combined and rank 0 prints the row. */
#include "perf.h"

/* What one (target, form) measurement found on this rank. */
typedef struct {
  double seconds;
  uint64_t wrong, outOfBounds;
  perfPhases_t phases; /* --phases: rank 0's, gpubridge only */
} half_t;

static void runHalf(const perfRun_t* r, perfState_t* st, size_t count, int inPlace, half_t* h) {
  perfCtx_t* ctx = r->ctx;
  perfLayout_t l;
  perfCollLayout(r->coll, count, ctx->topo.rank, ctx->topo.nranks, &l);
  size_t size = perfTypeSize(r->dt);
  size_t sendBytes = inPlace ? 0 : l.sendElems * size;
  size_t recvBytes = (inPlace ? l.inPlaceElems : l.recvElems) * size;
  if (!inPlace) perfBufferGuardSet(&st->send, sendBytes);
  perfBufferGuardSet(&st->recv, recvBytes);
  h->wrong = 0;
  /* Every rank runs all -c check runs (each is a collective); the count kept
   * is the worst run's, so #wrong reads the same for any -c. */
  for (int k = 0; k < r->opts->check; k++) {
    uint64_t wrong = perfMeasureCheck(r, st, count, inPlace);
    if (wrong > h->wrong) h->wrong = wrong;
  }
  int phases = r->opts->phases && !r->vendor && ctx->topo.rank == 0;
  h->seconds = perfMeasureTime(r, st, count, inPlace, phases ? &h->phases : NULL);
  h->outOfBounds = perfBufferGuardCheck(&st->recv, recvBytes);
  if (!inPlace) h->outOfBounds += perfBufferGuardCheck(&st->send, sendBytes);
  if (h->outOfBounds)
    fprintf(stderr, "gpubridge-perf: rank %d: %s%s %s count %zu %s: %llu guard bytes changed\n", ctx->topo.rank,
            r->vendor ? "baseline " : "", perfCollName(r->coll), perfTypeName(r->dt), count,
            inPlace ? "in-place" : "out-of-place", (unsigned long long)h->outOfBounds);
}

static void fillHalf(perfHalf_t* h, int ran, double seconds, size_t bytes, double factor, uint64_t wrong) {
  h->ran = ran;
  h->timeUs = seconds * 1e6;
  h->algBw = seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0;
  h->busBw = h->algBw * factor;
  h->wrong = wrong;
}

/* Index of each form in the arrays below: gpubridge out of place, in place,
 * then the baseline's. */
#define FORMS 4

static void runSize(perfRun_t* runs[2], perfState_t* st, perfTable_t* table, perfProgress_t* progress, size_t bytes,
                    size_t count) {
  perfRun_t* gb = runs[0];
  perfCtx_t* ctx = gb->ctx;
  int inPlace = perfCollHasInPlace(gb->coll);
  half_t h[FORMS] = {{0}};
  for (int k = 0; k < FORMS; k++) {
    const perfRun_t* r = runs[k / 2];
    if (!r || (k % 2 == 1 && !inPlace)) continue;
    runHalf(r, st, count, k % 2, &h[k]);
  }
  double t[FORMS];
  uint64_t counts[FORMS + 1] = {0};
  for (int k = 0; k < FORMS; k++) {
    t[k] = h[k].seconds;
    counts[k] = h[k].wrong;
    counts[FORMS] += h[k].outOfBounds;
  }
  perfMeasureCombine(ctx, gb->opts, t, FORMS);
  perfRanksSumU64(ctx, counts, FORMS + 1);
  for (int k = 0; k < FORMS; k++) st->wrong += counts[k];
  st->outOfBounds += counts[FORMS];
  if (ctx->topo.rank != 0) return;

  double factor = perfCollBusFactor(gb->coll, ctx->topo.nranks);
  perfRow_t rows[2];
  for (int k = 0; k < 2; k++) {
    perfRow_t* row = &rows[k];
    *row = (perfRow_t){.bytes = bytes, .count = count, .dt = gb->dt, .op = gb->op,
                       .root = perfCollRooted(gb->coll) ? gb->root : -1};
    fillHalf(&row->outOfPlace, 1, t[2 * k], bytes, factor, counts[2 * k]);
    fillHalf(&row->inPlace, inPlace, t[2 * k + 1], bytes, factor, counts[2 * k + 1]);
    row->outOfPlace.phases = h[2 * k].phases;
    row->inPlace.phases = h[2 * k + 1].phases;
  }
  perfRun_t* base = runs[1];
  perfProgressClear(progress); /* the row takes the progress line's place */
  perfTableRow(table, gb->opts, ctx, &rows[0], base ? &rows[1] : NULL, base ? perfVendorLabel(base->vendor) : NULL);
}

void perfBenchSweep(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* state, perfTable_t* table,
                    perfVendor_t* baseline, gbDataType_t dt, gbRedOp_t op, int root) {
  perfRun_t gb = {ctx, opts, opts->coll, dt, op, root, ctx->comm, NULL};
  perfRun_t vendor = gb;
  vendor.vendor = baseline;
  perfRun_t* runs[2] = {&gb, baseline ? &vendor : NULL};
  /* A size is nranks parts of count elements for all_gather, reduce_scatter, alltoall. */
  size_t unit = perfTypeSize(dt) * (size_t)perfCollParts(opts->coll, ctx->topo.nranks);
  char what[96];
  snprintf(what, sizeof(what), "%s %s%s%s", perfCollName(opts->coll), perfTypeName(dt),
           perfCollReduces(opts->coll) ? " " : "", perfCollReduces(opts->coll) ? perfOpName(op) : "");
  perfProgress_t progress;
  perfProgressStart(&progress, opts, ctx->topo.rank, unit, what);
  size_t raw = 0, bytes = 0;
  while (perfOptionsNextSize(opts, unit, &raw, &bytes)) {
    perfProgressSize(&progress, bytes);
    runSize(runs, state, table, &progress, bytes, bytes / unit);
  }
}
