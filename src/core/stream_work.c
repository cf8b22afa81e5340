/* A collective's stream work as the communicator sees it: the flags it
 * gives stream waits, the pipeline over the stages' slots, and the
 * end-of-collective marker teardown counts. */
#include <stdatomic.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"
#include "core/trace.h"

void gbCommFlagsInit(gbComm_t c, gbFlag_t* flags, size_t n) { gbStageFlagsInit(&c->stageCtx, flags, n); }

/* The last stream task of each collective counts it done (also when the
 * stream drops it after an error), so teardown knows when no stream work
 * still points into the communicator. With a flight-recorder record the
 * same task stamps it: done when it runs, failed when it is dropped. Where
 * records end by flag (a GPU, or GPUBRIDGE_TRACE_DONE=flag) the stream
 * writes the record's done flag instead, before the marker, and the
 * watcher stamps it (trace/done.c). */
static gbResult_t markerRun(void* arg) {
  (void)arg;
  return gbSuccess;
}
static void markerDone(void* arg) {
  atomic_fetch_add_explicit(&((gbComm_t)arg)->streamDone->value, 1, memory_order_release);
}

static gbResult_t tracedMarkerRun(void* arg) {
  gbTraceFinish(arg, gbRecordDone, gbSuccess, 0);
  return gbSuccess;
}
static void tracedMarkerDone(void* arg) {
  gbTraceEntry_t* e = arg;
  gbComm_t c = e->comm;
  if (gbTraceRecordOpen(e)) gbTraceFinishDropped(e, 0);
  markerDone(c);
}

gbResult_t gbCommMarkStreamWork(gbComm_t c, void* stream, gbTraceEntry_t* record) {
  gbResult_t res = gbSuccess;
  if (record && c->trace->doneFlags) {
    res = gbTraceDonePost(record, stream); /* a write that cannot be queued stamps the record failed */
    record = NULL;
  }
  if (!c->dev->launchHostFn) return res;
  if (record) GB_CHECK(c->dev->launchHostFn(stream, tracedMarkerRun, record, tracedMarkerDone));
  else GB_CHECK(c->dev->launchHostFn(stream, markerRun, c, markerDone));
  c->streamPosted++;
  return res;
}

gbResult_t gbCommPipeline(size_t nchunks, int depth, gbResult_t (*front)(void*, size_t),
                          gbResult_t (*back)(void*, size_t), void* arg) {
  size_t d = (size_t)depth;
  for (size_t i = 0; i < nchunks; i++) {
    GB_CHECK(front(arg, i));
    if (i + 1 >= d) GB_CHECK(back(arg, i + 1 - d));
  }
  for (size_t k = nchunks >= d ? nchunks - d + 1 : 0; k < nchunks; k++) GB_CHECK(back(arg, k));
  return gbSuccess;
}

/* A call that queued nothing fails alone (a bad stream, say); once part of a
 * schedule is queued, peers would wait on the rest: the comm fails, and the
 * end marker still goes on the stream so teardown waits for what is queued. */
gbResult_t gbCommEnqueueEnd(gbComm_t c, void* stream, int queued, gbResult_t res) {
  gbTraceEntry_t* record = gbTraceEnqueued(c);
  if (!queued) {
    if (record) gbTraceFinish(record, res == gbSuccess ? gbRecordDone : gbRecordFailed, res, 0);
    return res;
  }
  /* A marker that cannot be queued is dropped at once: it stamps the record failed. */
  gbResult_t marked = gbCommMarkStreamWork(c, stream, record);
  if (res == gbSuccess) res = marked;
  if (res != gbSuccess) gbCommFail(c, res);
  return res;
}
