/* The flight recorder's ring: taking and writing records (caller thread),
 * the proxy's stamps, the done writer's finish (the end marker's, or the
 * watcher's: done.c), counters, readers, the observer, and the phase a
 * record is in. See trace.h for who writes what. */
#include "trace/trace.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "plan/plan.h"

_Static_assert(sizeof(gbCollRecord_t) == 168, "gbCollRecord_t is 168 bytes (the Python binding says so too)");
_Static_assert(sizeof(gbCommCounters_t) == 168, "gbCommCounters_t is 168 bytes");
_Static_assert(sizeof(gbTraceEntry_t) == 192, "a ring entry is three cache lines");
_Static_assert(gbCollAllReduce == (int)GB_COLL_ALLREDUCE && gbCollBroadcast == (int)GB_COLL_BROADCAST &&
                   gbCollReduce == (int)GB_COLL_REDUCE && gbCollAllGather == (int)GB_COLL_ALLGATHER &&
                   gbCollReduceScatter == (int)GB_COLL_REDUCESCATTER && gbCollAllToAll == (int)GB_COLL_ALLTOALL &&
                   gbCollSendRecv == (int)GB_COLL_SENDRECV && gbNumColls == (int)GB_NUM_COLLS,
               "gbCollKind_t equals gbColl_t");

/* Release stores and acquire loads (plain moves on x86) make the entry a
 * seqlock without fences: a reader that sees any store of a write also sees
 * the odd version before it, and its re-read of the version comes after. */
#define ST(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define LD(p) atomic_load_explicit((p), memory_order_acquire)
#define ADD(p, v) ST((p), LD(p) + (v)) /* for a field with one writer */

static _Thread_local int inObserver;

/* ------------------------------------------------------------ life */

gbResult_t gbTraceCreate(const gbTraceSetup_t* setup, gbTrace_t** out) {
  *out = NULL;
  int64_t want = gbParamInt(GB_PARAM_TRACE_BUFFER);
  if (want <= 0) return gbSuccess;
  uint64_t cap = 1;
  unsigned shift = 0;
  while (cap < (uint64_t)want) {
    cap <<= 1;
    shift++;
  }
  gbTrace_t* t = calloc(1, sizeof(*t));
  gbTraceEntry_t* e = t ? aligned_alloc(64, cap * sizeof(gbTraceEntry_t)) : NULL;
  if (!e) {
    free(t);
    return gbErrorSet(gbSystemError, "out of memory for a flight recorder of %llu entries (%llu KiB); lower "
                      "GPUBRIDGE_TRACE_BUFFER or set it to 0", (unsigned long long)cap,
                      (unsigned long long)(cap * sizeof(gbTraceEntry_t) / 1024));
  }
  memset(e, 0, cap * sizeof(gbTraceEntry_t));
  for (uint64_t i = 0; i < cap; i++) e[i].comm = setup->owner.handle;
  t->e = e;
  t->cap = cap;
  t->mask = cap - 1;
  t->shift = shift;
  t->setup = *setup;
  pthread_mutex_init(&t->dumpLock, NULL);
  gbResult_t res = gbTraceDoneCreate(t);
  if (res == gbSuccess) res = gbTraceWatchStart(t);
  if (res != gbSuccess) {
    gbTraceDestroy(t);
    return res;
  }
  *out = t;
  return gbSuccess;
}

void gbTraceDestroy(gbTrace_t* t) {
  if (!t) return;
  gbTraceWatchStop(t);
  /* The streams drained: records still pending end now, observed. */
  if (t->doneFlags) gbTraceDonePoll(t, 1);
  free(atomic_exchange_explicit(&t->obs, NULL, memory_order_seq_cst));
  pthread_mutex_lock(&t->dumpLock); /* a dump in progress (another thread's API call) ends first */
  pthread_mutex_unlock(&t->dumpLock);
  pthread_mutex_destroy(&t->dumpLock);
  gbTraceDoneDestroy(t);
  free(t->e);
  free(t);
}

/* The steps word of an entry: its posted proxy steps not yet ended, and,
 * once its call finished while some still ran, that the last of them
 * publishes the record (and with which state). */
#define STEPS_COUNT 0x3FFFu
#define STEPS_HELD 0x8000u   /* the call finished: the last step to end publishes it */
#define STEPS_FAILED 0x4000u /* ... as failed */

static void publish(gbTrace_t* t, gbTraceEntry_t* e, int state);

/* ------------------------------------------------------------ the caller */

/* The next entry, marked odd; NULL (unrecorded) when it is still in flight. */
static gbTraceEntry_t* take(gbTrace_t* t) {
  t->now = NULL;
  ADD(&t->enqueued, 1);
  uint64_t id = LD(&t->next) + 1;
  gbTraceEntry_t* e = &t->e[id & t->mask];
  /* An entry is reused once nothing writes it: its call is done and its
   * proxy steps ended (a stream that hands chunks over itself may finish
   * before the proxy, which only watches, saw the last of them). */
  if (atomic_load_explicit(&e->rec.state, memory_order_acquire) == gbRecordInFlight ||
      atomic_load_explicit(&e->steps, memory_order_acquire) > 0) {
    ADD(&t->unrecorded, 1);
    return NULL;
  }
  ST(&e->version, LD(&e->version) + 1);
  gbTraceRecord_t* r = &e->rec;
  ST(&e->id, id);
  ST(&r->size, (uint32_t)sizeof(gbCollRecord_t));
  ST(&r->version, 1u);
  ST(&r->t[gbPhaseEnqueued], gbClockNowNs());
  for (int k = 1; k < gbNumPhases; k++) ST(&r->t[k], (int64_t)0);
  for (int k = 0; k < gbNumHostGroups; k++) ST(&r->bytes[k], (uint64_t)0);
  ST(&r->op, -1);
  ST(&r->root, -1);
  ST(&r->peer, -1);
  ST(&r->npeers, 0);
  ST(&r->policy, -1);
  ST(&r->nchunks, 0);
  ST(&r->chunksBridged, 0);
  ST(&r->flags, 0);
  ST(&r->result, 0);
  ST(&e->byFlag, 0u);
  ST(&r->state, (int32_t)gbRecordInFlight);
  atomic_store_explicit(&t->next, id, memory_order_release);
  t->now = e;
  return e;
}

void gbTraceRecordBegin(gbTrace_t* t, uint64_t seq, int coll, uint64_t count, int dtype, int op, int root) {
  gbTraceEntry_t* e = take(t);
  atomic_store_explicit(&t->lastSeq, seq, memory_order_release);
  if (!e) return;
  gbTraceRecord_t* r = &e->rec;
  ST(&r->seq, seq);
  ST(&r->p2pSeq, (uint64_t)0);
  ST(&r->count, count);
  ST(&r->coll, coll);
  ST(&r->dtype, dtype);
  ST(&r->op, op);
  if (coll == GB_COLL_BROADCAST || coll == GB_COLL_REDUCE) ST(&r->root, root);
}

void gbTraceRecordBeginP2p(gbTrace_t* t, uint64_t p2pSeq, uint64_t count, int dtype, int peer, int npeers) {
  gbTraceEntry_t* e = take(t);
  atomic_store_explicit(&t->lastP2p, p2pSeq, memory_order_release);
  if (!e) return;
  gbTraceRecord_t* r = &e->rec;
  ST(&r->seq, (uint64_t)0);
  ST(&r->p2pSeq, p2pSeq);
  ST(&r->count, count);
  ST(&r->coll, (int32_t)gbCollSendRecv);
  ST(&r->dtype, dtype);
  ST(&r->peer, peer);
  ST(&r->npeers, npeers);
}

void gbTraceRecordCancel(gbTrace_t* t, uint64_t seq) {
  gbTraceEntry_t* e = t->now;
  atomic_store_explicit(&t->lastSeq, seq, memory_order_release);
  ST(&t->enqueued, LD(&t->enqueued) - 1);
  if (!e) {
    ST(&t->unrecorded, LD(&t->unrecorded) - 1); /* take() found no free entry */
    return;
  }
  ST(&e->rec.state, 0);
  ST(&e->id, (uint64_t)0);
  atomic_store_explicit(&t->next, LD(&t->next) - 1, memory_order_release);
  atomic_store_explicit(&e->version, LD(&e->version) + 1, memory_order_release);
  t->now = NULL;
}

void gbTraceRecordSetPlan(gbTrace_t* t, int policy, int nchunks) {
  gbTraceEntry_t* e = t->now;
  if (!e) return;
  ST(&e->rec.policy, policy);
  ST(&e->rec.nchunks, nchunks);
  if (nchunks > 0) ST(&e->rec.flags, LD(&e->rec.flags) | (int32_t)GB_RECORD_HAS_HOST_STEP);
}

void gbTraceRecordAddFlags(gbTrace_t* t, uint32_t flags) {
  gbTraceEntry_t* e = t->now;
  if (e) ST(&e->rec.flags, LD(&e->rec.flags) | (int32_t)flags);
}

void gbTraceRecordAddIslandBytes(gbTrace_t* t, uint64_t bytes) {
  gbTraceEntry_t* e = t->now;
  if (!e) return;
  ADD(&e->rec.bytes[gbHostGroupIsland], bytes);
  ADD(&t->bytes[gbHostGroupIsland], bytes);
}

void gbTraceRecordTagOp(gbTrace_t* t, gbProxyOp_t* op, int role, uint32_t chunk, uint32_t nchunks) {
  op->trace = t ? t->now : NULL;
  op->traceRole = role;
  op->chunk = chunk;
  op->nchunks = nchunks;
}

gbTraceEntry_t* gbTraceRecordEnqueued(gbTrace_t* t) {
  gbTraceEntry_t* e = t->now;
  t->now = NULL;
  if (e) atomic_store_explicit(&e->version, LD(&e->version) + 1, memory_order_release);
  return e;
}

/* ------------------------------------------------------------ late writers */

/* A step's stamps and bytes on its record (READY, END). */
static void stamp(gbTrace_t* t, const gbProxyOp_t* op, gbTraceRecord_t* r, int event, gbResult_t res,
                  uint64_t bytesSent, int64_t now) {
  if (op->traceRole == GB_TRACE_ROLE_CHECK) {
    /* A check that failed did not end: the record stays in phase "check". */
    if (event == GB_PROXY_STEP_READY) ST(&r->t[gbPhaseCheckBegin], now);
    else if (res == gbSuccess) ST(&r->t[gbPhaseCheckEnd], now);
    return;
  }
  if (op->traceRole != GB_TRACE_ROLE_HOST) return;
  if (event == GB_PROXY_STEP_READY) {
    /* The proxy sees the chunk staged and starts its host step at once. */
    t->stepBegin = now;
    if (op->chunk == 0) {
      ST(&r->t[gbPhaseStaged], now);
      ST(&r->t[gbPhaseBridgeBegin], now);
    }
    return;
  }
  int g = op->group ? t->setup.owner.hostGroup(t->setup.owner.ctx, op->group) : -1;
  if (g >= 0) {
    ADD(&r->bytes[g], bytesSent);
    ADD(&t->bytes[g], bytesSent);
    ADD(&t->busyNs[g], (uint64_t)(now - t->stepBegin));
  }
  if (res != gbSuccess) return;
  ADD(&r->chunksBridged, 1);
  if (op->chunk + 1 >= op->nchunks) ST(&r->t[gbPhaseBridgeEnd], now);
}

void gbTraceOnStep(gbTrace_t* t, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent) {
  gbTraceEntry_t* e = op->trace;
  if (!t || !e) return;
  /* Posted steps keep the entry from reuse until they end or are dropped. */
  if (event == GB_PROXY_STEP_POSTED) {
    atomic_fetch_add_explicit(&e->steps, 1, memory_order_acq_rel);
    return;
  }
  if (event != GB_PROXY_STEP_DROPPED) {
    /* The proxy may see a step after the stream finished the call (a stream
     * that hands chunks over itself, the proxy only watching): done is when
     * the caller's stream was, and no stamp is later. */
    int64_t now = gbClockNowNs(), done = LD(&e->rec.t[gbPhaseDone]);
    stamp(t, op, &e->rec, event, res, bytesSent, done > 0 && now > done ? done : now);
    if (event == GB_PROXY_STEP_READY) return;
  }
  uint16_t was = atomic_fetch_sub_explicit(&e->steps, 1, memory_order_acq_rel);
  if ((was & STEPS_COUNT) == 1 && (was & STEPS_HELD)) publish(t, e, (was & STEPS_FAILED) ? gbRecordFailed : gbRecordDone);
}

/* A copy made of atomic loads (writers may still store). */
static void copyRecord(const gbTraceRecord_t* s, gbCollRecord_t* d) {
  d->size = LD(&s->size);
  d->version = LD(&s->version);
  d->seq = LD(&s->seq);
  d->p2pSeq = LD(&s->p2pSeq);
  d->count = LD(&s->count);
  for (int k = 0; k < gbNumPhases; k++) d->t[k] = LD(&s->t[k]);
  for (int k = 0; k < gbNumHostGroups; k++) d->bytes[k] = LD(&s->bytes[k]);
  d->coll = LD(&s->coll);
  d->dtype = LD(&s->dtype);
  d->op = LD(&s->op);
  d->root = LD(&s->root);
  d->peer = LD(&s->peer);
  d->npeers = LD(&s->npeers);
  d->policy = LD(&s->policy);
  d->nchunks = LD(&s->nchunks);
  d->chunksBridged = LD(&s->chunksBridged);
  d->flags = LD(&s->flags);
  d->state = LD(&s->state);
  d->result = LD(&s->result);
}

static void callObserver(gbTrace_t* t, const gbCollRecord_t* rec) {
  if (!atomic_load_explicit(&t->obs, memory_order_seq_cst)) return;
  atomic_fetch_add_explicit(&t->obsCalls, 1, memory_order_seq_cst);
  gbTraceObserver_t* o = atomic_load_explicit(&t->obs, memory_order_seq_cst);
  if (o) {
    inObserver++;
    o->fn(t->setup.owner.handle, rec, o->userData);
    inObserver--;
  }
  atomic_fetch_sub_explicit(&t->obsCalls, 1, memory_order_seq_cst);
}

/* Publishes a record its writers finished: its state, the counters, the
 * observer. */
static void publish(gbTrace_t* t, gbTraceEntry_t* e, int state) {
  gbTraceRecord_t* r = &e->rec;
  /* Read before the state is published: from then on the entry may be
   * reused. The whole record is copied only for an observer. */
  int32_t coll = LD(&r->coll);
  int64_t enqueued = LD(&r->t[gbPhaseEnqueued]), done = LD(&r->t[gbPhaseDone]);
  int observed = atomic_load_explicit(&t->obs, memory_order_seq_cst) != NULL;
  gbCollRecord_t copy;
  if (observed) {
    copyRecord(r, &copy);
    copy.state = state;
  }
  ST(&e->steps, (uint16_t)0);
  atomic_store_explicit(&r->state, (int32_t)state, memory_order_release);
  if (state == gbRecordDone) {
    atomic_fetch_add_explicit(&t->completed, 1, memory_order_relaxed);
    if (coll >= 0 && coll < gbNumColls) atomic_fetch_add_explicit(&t->byColl[coll], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->latencyNs, (uint64_t)(done - enqueued), memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&t->failed, 1, memory_order_relaxed);
  }
  if (observed) callObserver(t, &copy);
}

void gbTraceRecordFinish(gbTrace_t* t, gbTraceEntry_t* e, int state, gbResult_t result, uint32_t flags) {
  gbTraceRecord_t* r = &e->rec;
  ST(&r->t[gbPhaseDone], gbClockNowNs());
  ST(&r->result, (int32_t)result);
  /* The caller wrote flags last before its even version, long before. */
  if (flags) ST(&r->flags, LD(&r->flags) | (int32_t)flags);
  /* A stream that hands chunks over itself may finish before the proxy,
   * which only watches, ended its steps: the last of them publishes. */
  uint16_t v = atomic_load_explicit(&e->steps, memory_order_acquire);
  while (v & STEPS_COUNT) {
    uint16_t held = (uint16_t)(v | STEPS_HELD | (state == gbRecordDone ? 0u : STEPS_FAILED));
    if (atomic_compare_exchange_weak_explicit(&e->steps, &v, held, memory_order_acq_rel, memory_order_acquire))
      return;
  }
  publish(t, e, state);
}

int gbTraceRecordOpen(const gbTraceEntry_t* e) {
  return atomic_load_explicit(&e->rec.state, memory_order_acquire) == gbRecordInFlight &&
         !(atomic_load_explicit(&e->steps, memory_order_acquire) & STEPS_HELD);
}

void gbTraceRecordDropped(gbTrace_t* t, gbTraceEntry_t* e, uint32_t flags) {
  gbResult_t res = t->setup.owner.asyncError(t->setup.owner.ctx);
  gbTraceRecordFinish(t, e, gbRecordFailed, res != gbSuccess ? res : gbRemoteError, flags);
}

/* ------------------------------------------------------------ readers */

int gbTraceRead(const gbTrace_t* t, uint64_t id, gbCollRecord_t* out) {
  const gbTraceEntry_t* e = &t->e[id & t->mask];
  for (int attempt = 0; attempt < 4; attempt++) {
    uint32_t v = atomic_load_explicit(&e->version, memory_order_acquire);
    if (v & 1u) continue;
    uint64_t held = LD(&e->id);
    copyRecord(&e->rec, out);
    if (LD(&e->version) != v) continue;
    return held == id && out->state != 0;
  }
  return 0;
}

int gbTraceCollect(const gbTrace_t* t, gbCollRecord_t* out, int max, int inFlightOnly) {
  uint64_t next = atomic_load_explicit(&t->next, memory_order_acquire);
  uint64_t lo = next > t->cap ? next - t->cap + 1 : 1;
  if (!inFlightOnly && max >= 0 && next >= lo && next - lo + 1 > (uint64_t)max) lo = next - (uint64_t)max + 1;
  int n = 0;
  for (uint64_t id = lo; id <= next && n < max; id++) {
    if (!gbTraceRead(t, id, &out[n])) continue;
    if (inFlightOnly && out[n].state != gbRecordInFlight) continue;
    n++;
  }
  return n;
}

void gbTraceCounters(const gbTrace_t* t, gbCommCounters_t* out) {
  memset(out, 0, sizeof(*out));
  out->size = (uint32_t)sizeof(*out);
  out->version = 1;
  out->enqueued = LD(&t->enqueued);
  out->completed = LD(&t->completed);
  out->failed = LD(&t->failed);
  out->unrecorded = LD(&t->unrecorded);
  for (int k = 0; k < gbNumColls; k++) out->byColl[k] = LD(&t->byColl[k]);
  for (int k = 0; k < gbNumHostGroups; k++) {
    out->bytes[k] = LD(&t->bytes[k]);
    out->busyNs[k] = LD(&t->busyNs[k]);
  }
  out->latencyNs = LD(&t->latencyNs);
}

gbResult_t gbTraceSetObserver(gbTrace_t* t, gbObserver_t fn, void* userData) {
  gbTraceObserver_t* o = NULL;
  if (fn) {
    o = malloc(sizeof(*o));
    if (!o) return gbErrorSet(gbSystemError, "gbCommSetObserver: out of memory");
    o->fn = fn;
    o->userData = userData;
  }
  gbTraceObserver_t* old = atomic_exchange_explicit(&t->obs, o, memory_order_seq_cst);
  if (!old) return gbSuccess;
  if (inObserver) {
    /* Called from inside an observer: that call still runs the old one. */
    GB_INFO(GB_LOG_COLL, "gbCommSetObserver from inside an observer: the previous observer's record is kept");
    return gbSuccess;
  }
  gbDeadline_t until = gbDeadlineIn(5.0);
  while (atomic_load_explicit(&t->obsCalls, memory_order_seq_cst) > 0) {
    if (gbDeadlinePassed(until)) {
      GB_WARN("gbCommSetObserver: the previous observer is still running after 5 s; its record is kept (not freed)");
      return gbSuccess;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  free(old);
  return gbSuccess;
}

/* ------------------------------------------------------------ names */

const char* gbTracePhaseName(const gbCollRecord_t* r, int olderInFlight) {
  if (r->state == gbRecordDone) return "done";
  if (r->state == gbRecordFailed) return "failed";
  if (r->state != gbRecordInFlight) return "unknown";
  if (olderInFlight) return "queued";
  if ((r->flags & (int32_t)GB_RECORD_HAS_CHECK) && r->t[gbPhaseCheckEnd] == 0) return "check";
  if (r->flags & (int32_t)GB_RECORD_HAS_HOST_STEP) {
    if (r->t[gbPhaseStaged] == 0) return "island";
    if (r->t[gbPhaseBridgeBegin] == 0) return "staged";
    if (r->t[gbPhaseBridgeEnd] == 0) return "bridge";
    return "copy-back";
  }
  return "island";
}

const char* gbTraceCollName(int coll) { return gbPlanCollName(coll); }
