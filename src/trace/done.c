/* Records that end by a done flag: on a device without host functions on
 * streams (a GPU), or with GPUBRIDGE_TRACE_DONE=flag, the last stream work
 * of a recorded call is a write of the entry's flag in host-mapped memory,
 * in stream order like the staging flags. The watcher thread
 * (watch.c) polls the flags of handed records and is the done writer
 * (gbTraceRecordFinish, with GB_RECORD_DEVICE_DONE: done is when it looked).
 *
 * Entry k's flag is doneFlags[k]. Its value is the entry's use, id >> shift
 * (id / cap) plus 1: it grows by one each time the entry is reused, which
 * happens only after the previous record ended, so a value that reaches a
 * record's use was written by that record's stream. Uses stay below 2^32
 * long after ids would pass it (GPUs with 32-bit stream memory ops only).
 *
 * Who ends a handed record: the watcher, while it polls the ring; teardown,
 * once the watcher stopped polling it and the streams drained (final). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "os/backoff.h"
#include "trace/trace.h"

static uint64_t useOf(const gbTrace_t* t, uint64_t id) { return (id >> t->shift) + 1; }

/* As the communicator's other flags: its deadline, and how often a host
 * waiter looks (a GPU's write wakes nobody). */
static void flagsInit(gbTrace_t* t) {
  memset(t->doneFlags, 0, (size_t)t->cap * sizeof(gbFlag_t));
  for (uint64_t i = 0; i < t->cap; i++) {
    t->doneFlags[i].timeoutSec = t->setup.timeoutSec;
    t->doneFlags[i].pollNs = t->setup.dev->hostMemory ? 0 : GB_OS_SLEEP_POLL_NS;
  }
}

gbResult_t gbTraceDoneCreate(gbTrace_t* t) {
  const gbDeviceOps* dev = t->setup.dev;
  int mode = (int)gbParamInt(GB_PARAM_TRACE_DONE);
  int hostFns = dev->launchHostFn != NULL;
  if (mode == GB_TRACE_DONE_MARKER && !hostFns) {
    static atomic_int warned;
    if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
      GB_WARN("GPUBRIDGE_TRACE_DONE=marker: this device (%s) runs no host functions on streams, so the flight "
              "recorder ends records by flag instead; set GPUBRIDGE_TRACE_DONE=auto to silence this",
              dev->name);
  }
  if (mode == GB_TRACE_DONE_MARKER && hostFns) return gbSuccess;
  if (mode == GB_TRACE_DONE_AUTO && hostFns) return gbSuccess;
  size_t bytes = (size_t)t->cap * sizeof(gbFlag_t);
  gbResult_t res = dev->hostAlloc((void**)&t->doneFlags, bytes);
  if (res != gbSuccess) {
    t->doneFlags = NULL;
    return gbErrorSet(res, "flight recorder: no mapped host memory for its %llu done flags (%zu KiB): %s; lower "
                      "GPUBRIDGE_TRACE_BUFFER or set it to 0", (unsigned long long)t->cap, bytes / 1024,
                      gbErrorLast());
  }
  flagsInit(t);
  t->doneMapped = t->doneFlags;
  if (dev->flagsMap && (res = dev->flagsMap(t->doneFlags, &t->doneMapped)) != gbSuccess) {
    dev->hostFree(t->doneFlags);
    t->doneFlags = NULL;
    return res;
  }
  GB_INFO(GB_LOG_INIT, "flight recorder: a call is done when the stream writes its done flag (%s device; "
                       "looked at every 1 ms while calls are in flight)", dev->name);
  return gbSuccess;
}

void gbTraceDoneDestroy(gbTrace_t* t) {
  if (!t || !t->doneFlags) return;
  t->setup.dev->hostFree(t->doneFlags);
  t->doneFlags = NULL;
  t->doneMapped = NULL;
}

gbResult_t gbTraceDoneWrite(gbTrace_t* t, gbTraceEntry_t* e, void* stream) {
  const gbDeviceOps* dev = t->setup.dev;
  uint64_t id = atomic_load_explicit(&e->id, memory_order_relaxed);
  uint64_t k = id & t->mask;
  uint64_t use = useOf(t, id);
  gbResult_t res =
      dev->flagWriteMapped
          ? dev->flagWriteMapped(&t->doneFlags[k], (char*)t->doneMapped + k * sizeof(gbFlag_t), use, stream)
          : dev->flagWrite(&t->doneFlags[k], use, stream);
  if (res != gbSuccess) {
    gbTraceRecordFinish(t, e, gbRecordFailed, res, 0);
    return res;
  }
  /* Counted before it is handed over, so the watcher never counts it out
   * first; seq_cst, against the watcher's look before it goes idle. */
  atomic_fetch_add_explicit(&t->flagsPending, 1, memory_order_seq_cst);
  atomic_store_explicit(&e->byFlag, 1u, memory_order_release);
  gbTraceWatchWake();
  return gbSuccess;
}

/* Ends handed record e (number id) when its flag tells: 1 when it did. */
static int endOne(gbTrace_t* t, gbTraceEntry_t* e, uint64_t id, int failed) {
  gbFlag_t* f = &t->doneFlags[id & t->mask];
  if (atomic_load_explicit(&f->value, memory_order_acquire) >= useOf(t, id)) {
    gbTraceRecordFinish(t, e, gbRecordDone, gbSuccess, GB_RECORD_DEVICE_DONE);
    return 1;
  }
  /* The host device's stream dropped the write after an error: as the
   * marker's drop. The error goes before the entry can be reused. */
  if (atomic_load_explicit(&f->error, memory_order_acquire) != 0) {
    atomic_store_explicit(&f->error, 0, memory_order_relaxed);
    gbTraceRecordDropped(t, e, GB_RECORD_DEVICE_DONE);
    return 1;
  }
  /* A failed communicator's streams may never get there (a GPU stuck in a
   * vendor kernel): they end failed, once its dump showed them in flight. */
  if (failed) {
    gbTraceRecordDropped(t, e, 0);
    return 1;
  }
  return 0;
}

uint64_t gbTraceDonePoll(gbTrace_t* t, int final) {
  int failed = final || atomic_load_explicit(&t->failSettled, memory_order_acquire);
  /* Acquire: every record up to next is completely taken. */
  uint64_t next = atomic_load_explicit(&t->next, memory_order_acquire);
  uint64_t lo = next >= t->cap ? next - t->cap + 1 : 1; /* older entries were reused, so had ended */
  uint64_t id = t->scanFrom > lo ? t->scanFrom : lo;
  int settled = 1; /* every record below id has ended */
  uint64_t ended = 0;
  for (; id <= next; id++) {
    gbTraceEntry_t* e = &t->e[id & t->mask];
    /* State and byFlag first, then id: an id still equal means both are
     * this record's (a reuse stores id before them). */
    int state = atomic_load_explicit(&e->rec.state, memory_order_acquire);
    uint32_t handed = atomic_load_explicit(&e->byFlag, memory_order_acquire);
    uint64_t held = atomic_load_explicit(&e->id, memory_order_acquire);
    int over;
    if (held > id) over = 1; /* reused: this one ended */
    else if (held != id) over = 0; /* given back (gbTraceRecordCancel) and maybe taken again */
    else if (state == gbRecordDone || state == gbRecordFailed || !gbTraceRecordOpen(e)) over = 1; /* or its steps publish it */
    else if (state == gbRecordInFlight && handed && endOne(t, e, id, failed)) over = 1, ended++;
    else over = 0; /* in flight: not handed yet (being enqueued) or its flag not come */
    if (!over) settled = 0;
    else if (settled) t->scanFrom = id + 1;
  }
  if (ended) atomic_fetch_sub_explicit(&t->flagsPending, ended, memory_order_seq_cst);
  return atomic_load_explicit(&t->flagsPending, memory_order_seq_cst);
}
