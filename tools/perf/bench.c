/* One sweep over the sizes for a (type, op, root): per size, an optional
 * check run, warm-up, then the timed iterations, out of place and in place;
 * then the ranks' times and counts are combined and rank 0 prints the row. */
#include <time.h>
#include "perf.h"

static double nowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  perfCtx_t* ctx;
  const perfOptions_t* opts;
  gbDataType_t dt;
  gbRedOp_t op;
  int root;
} sweep_t;

static void enqueue(const sweep_t* s, const void* send, void* recv, size_t count) {
  perfCtx_t* ctx = s->ctx;
  if (s->opts->coll == PERF_BROADCAST) {
    perfCheck(gbBroadcast(send, recv, count, s->dt, s->root, ctx->comm, ctx->stream), "gbBroadcast");
  } else {
    perfCheck(gbAllReduce(send, recv, count, s->dt, s->op, ctx->comm, ctx->stream), "gbAllReduce");
  }
}

/* Average seconds per iteration: the enqueue loop plus the final synchronize. */
static double timeIters(const sweep_t* s, const void* send, void* recv, size_t count) {
  for (int k = 0; k < s->opts->warmup; k++) enqueue(s, send, recv, count);
  perfSync(s->ctx);
  double t0 = nowSeconds();
  for (int k = 0; k < s->opts->iters; k++) {
    enqueue(s, send, recv, count);
    if (s->opts->blocking) perfSync(s->ctx);
  }
  perfSync(s->ctx);
  return (nowSeconds() - t0) / s->opts->iters;
}

/* Runs once with fresh inputs and counts this rank's wrong elements. */
static uint64_t checkRun(const sweep_t* s, perfState_t* st, size_t count, int inPlace) {
  perfCheckSpec_t spec = {s->opts->coll, s->dt, s->op, s->root, s->ctx->topo.rank, s->ctx->topo.nranks};
  size_t bytes = count * perfTypeSize(s->dt);
  perfBuffer_t* in = inPlace ? &st->recv : &st->send;
  perfBufferFillInput(in, count, &spec, &st->host);
  if (!inPlace) perfBufferPoison(&st->recv, bytes, &st->host);
  enqueue(s, in->data, st->recv.data, count);
  perfSync(s->ctx);
  return perfBufferCheck(&st->recv, count, &spec, &st->host, inPlace ? "in-place" : "out-of-place");
}

static double busFactor(const perfOptions_t* opts, int nranks) {
  if (opts->coll == PERF_BROADCAST) return 1.0;
  return nranks > 1 ? 2.0 * (nranks - 1) / nranks : 0.0;
}

/* The printed time from every rank's, as -a says. Collective: every rank. */
static void combineTimes(perfCtx_t* ctx, const perfOptions_t* opts, double t[2]) {
  switch (opts->average) {
    case PERF_AVG_RANK0: return; /* rank 0 prints its own */
    case PERF_AVG_MIN: perfRanksCombineDouble(ctx, t, 2, gbMin); return;
    case PERF_AVG_MAX: perfRanksCombineDouble(ctx, t, 2, gbMax); return;
    default:
      perfRanksCombineDouble(ctx, t, 2, gbSum);
      t[0] /= ctx->topo.nranks;
      t[1] /= ctx->topo.nranks;
      return;
  }
}

static void fillHalf(perfHalf_t* h, double seconds, size_t bytes, double factor, uint64_t wrong) {
  h->timeUs = seconds * 1e6;
  h->algBw = seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0;
  h->busBw = h->algBw * factor;
  h->wrong = wrong;
}

static void runSize(const sweep_t* s, perfState_t* st, perfTable_t* table, size_t bytes) {
  perfCtx_t* ctx = s->ctx;
  size_t count = bytes / perfTypeSize(s->dt);
  perfBufferGuardSet(&st->send, bytes);
  perfBufferGuardSet(&st->recv, bytes);

  uint64_t counts[3] = {0, 0, 0}; /* wrong out of place, wrong in place, out of bounds */
  double t[2];
  if (s->opts->check) counts[0] = checkRun(s, st, count, 0);
  t[0] = timeIters(s, st->send.data, st->recv.data, count);
  if (s->opts->check) counts[1] = checkRun(s, st, count, 1);
  t[1] = timeIters(s, st->recv.data, st->recv.data, count);
  counts[2] = perfBufferGuardCheck(&st->send, bytes) + perfBufferGuardCheck(&st->recv, bytes);
  if (counts[2])
    fprintf(stderr, "gpubridge-perf: rank %d: %s %s %zu B: %llu guard bytes changed\n", ctx->topo.rank,
            perfCollName(s->opts->coll), perfTypeName(s->dt), bytes, (unsigned long long)counts[2]);

  combineTimes(ctx, s->opts, t);
  perfRanksSumU64(ctx, counts, 3);
  st->wrong += counts[0] + counts[1];
  st->outOfBounds += counts[2];
  if (ctx->topo.rank != 0) return;

  double factor = busFactor(s->opts, ctx->topo.nranks);
  perfRow_t row = {.bytes = bytes, .count = count, .dt = s->dt, .op = s->op,
                   .root = s->opts->coll == PERF_BROADCAST ? s->root : -1};
  fillHalf(&row.outOfPlace, t[0], bytes, factor, counts[0]);
  fillHalf(&row.inPlace, t[1], bytes, factor, counts[1]);
  perfTableRow(table, s->opts, ctx, &row);
}

void perfBenchSweep(perfCtx_t* ctx, const perfOptions_t* opts, perfState_t* state,
                    perfTable_t* table, gbDataType_t dt, gbRedOp_t op, int root) {
  sweep_t s = {ctx, opts, dt, op, root};
  size_t raw = 0, bytes = 0;
  while (perfOptionsNextSize(opts, perfTypeSize(dt), &raw, &bytes)) runSize(&s, state, table, bytes);
}
