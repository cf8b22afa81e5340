/* One measured or checked call of a collective, on gpubridge or on the vendor
 * library alone. Out of place the call reads the send buffer and writes the
 * receive buffer; in place both pointers lie in the receive buffer where the
 * header's in-place rule puts them (colls.c). A time covers the -n timed
 * calls: with device events (events.c) the stream's time from a start event
 * recorded before the first call to a stop event after the last; with the
 * host clock the enqueue loop plus a stream synchronize. */
#include <time.h>
#include "perf.h"

static double nowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void enqueue(const perfRun_t* r, const void* send, void* recv, size_t count) {
  perfCtx_t* ctx = r->ctx;
  if (r->vendor) {
    perfVendorEnqueue(r->vendor, ctx, r->coll, send, recv, count, r->dt, r->op, r->root, ctx->stream);
    return;
  }
  perfCheck(perfCollEnqueue(r->coll, send, recv, count, r->dt, r->op, r->root, r->comm, ctx->stream),
            perfCollCall(r->coll));
}

static void sync(const perfRun_t* r) {
  if (r->vendor) perfCheck(gbStreamSynchronize(r->ctx->stream), "gbStreamSynchronize");
  else perfSyncComm(r->ctx, r->comm);
}

/* The call's pointers and this rank's buffer layout. */
static void pointers(const perfRun_t* r, perfState_t* st, size_t count, int inPlace, perfLayout_t* l,
                     const void** send, void** recv) {
  perfCollLayout(r->coll, count, r->ctx->topo.rank, r->ctx->topo.nranks, l);
  size_t size = perfTypeSize(r->dt);
  if (inPlace) {
    *send = st->recv.data + l->sendOff * size;
    *recv = st->recv.data + l->recvOff * size;
  } else {
    *send = st->send.data;
    *recv = st->recv.data;
  }
}

double perfMeasureTime(const perfRun_t* r, perfState_t* st, size_t count, int inPlace, perfPhases_t* phases) {
  perfLayout_t l;
  const void* send;
  void* recv;
  pointers(r, st, count, inPlace, &l, &send, &recv);
  for (int k = 0; k < r->opts->warmup; k++) enqueue(r, send, recv, count);
  sync(r);
  perfEvents_t* ev = r->ctx->events;
  if (ev && perfEventsRecord(ev, 0, r->ctx->stream) != 0) perfFail("recording the start event failed");
  double t0 = nowSeconds();
  for (int k = 0; k < r->opts->iters; k++) {
    enqueue(r, send, recv, count);
    if (r->opts->blocking) sync(r);
  }
  if (ev && perfEventsRecord(ev, 1, r->ctx->stream) != 0) perfFail("recording the stop event failed");
  sync(r);
  double seconds = nowSeconds() - t0;
  if (ev && (seconds = perfEventsElapsed(ev)) < 0) perfFail("reading the time between the device events failed");
  if (phases) perfPhasesRead(r->comm, r->coll, r->opts->iters, r->opts->blocking, phases);
  return seconds / r->opts->iters;
}

uint64_t perfMeasureCheck(const perfRun_t* r, perfState_t* st, size_t count, int inPlace) {
  perfCtx_t* ctx = r->ctx;
  perfCheckSpec_t spec = {r->coll, r->dt, r->op, r->root, ctx->topo.rank, ctx->topo.nranks, count};
  perfPattern_t* p = perfPatternCreate(&spec);
  perfLayout_t l;
  const void* send;
  void* recv;
  pointers(r, st, count, inPlace, &l, &send, &recv);
  if (inPlace) {
    perfBufferPoison(&st->recv, 0, l.inPlaceElems, r->dt, &st->host);
    perfBufferFillInput(&st->recv, l.sendOff, l.sendElems, p, &st->host);
  } else {
    perfBufferFillInput(&st->send, 0, l.sendElems, p, &st->host);
    perfBufferPoison(&st->recv, 0, l.recvElems, r->dt, &st->host);
  }
  enqueue(r, send, recv, count);
  sync(r);
  uint64_t wrong = perfBufferCheck(&st->recv, inPlace ? l.recvOff : 0, l.recvElems, p, inPlace, &st->host);
  perfPatternDestroy(p);
  return wrong;
}

void perfMeasureCombine(perfCtx_t* ctx, const perfOptions_t* opts, double* t, int n) {
  switch (opts->average) {
    case PERF_AVG_RANK0: return; /* rank 0 prints its own */
    case PERF_AVG_MIN: perfRanksCombineDouble(ctx, t, n, gbMin); return;
    case PERF_AVG_MAX: perfRanksCombineDouble(ctx, t, n, gbMax); return;
    default:
      perfRanksCombineDouble(ctx, t, n, gbSum);
      for (int k = 0; k < n; k++) t[k] /= ctx->topo.nranks;
      return;
  }
}
