/* The host island: the members' "native" collectives are algo/ calls over a
 * borrowed net group, run as host functions on the device's streams, so they
 * happen in stream order exactly as an NCCL call would on a GPU stream. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "base/result.h"
#include "island/island.h"
#include "os/cond.h"

typedef enum {
  CALL_ALLREDUCE,
  CALL_REDUCE,
  CALL_BROADCAST,
  CALL_ALLGATHER,
  CALL_REDUCESCATTER,
  CALL_SENDRECV
} callKind_t;

#define TICKETS 4096
#define MAX_PREMUL (1 << 20) /* live PreMulSum ops per island */

/* A PreMulSum op of this island; its value is gbNumOps + its table index. */
typedef struct {
  int used;
  gbDataType_t dt;
  gbScalarResidence_t residence;
  unsigned char value[8]; /* gbScalarHostImmediate: copied at creation */
  const void* ptr;        /* gbScalarDevice: read when a call runs */
} preMulSum_t;

typedef struct {
  gbIsland_t island;
  gbAlgoGroup_t* group;
  const gbDeviceOps* dev;
  gbIslandErrorFn_t onError;
  void* errCtx;
  /* First failure (atomic): algo leaves the connections out of step after a
   * failed call, so later calls must fail rather than exchange garbage. */
  atomic_int failed;
  /* Calls take tickets in the order the caller enqueues them (the same order
   * on every member), and run in ticket order whatever stream runs them, so
   * two streams driving one island cannot interleave or reorder its calls. */
  uint64_t nextTicket; /* caller thread */
  pthread_mutex_t lock;
  pthread_cond_t turn;
  uint64_t serving;           /* lowest ticket not yet done */
  unsigned char done[TICKETS]; /* tickets done out of order, by ticket % TICKETS */
  /* PreMulSum ops (caller thread, under lock); free slots are reused. */
  preMulSum_t* preMul;
  int preMulCap;
  /* The scaled copy of a PreMulSum call's input, or the copy of a send/recv
   * call's sends (overlapping its receives): one call runs at a time (ticket
   * order), so one buffer serves them all. */
  void* scaled;
  size_t scaledBytes;
} hostIsland_t;

/* One call's parameters, owned by the stream task. */
typedef struct {
  hostIsland_t* hi;
  callKind_t kind;
  const void* send;
  void* recv;
  size_t count;
  gbDataType_t dt;
  gbRedOp_t op;
  int root;
  uint64_t ticket;
  int ran;
  /* A PreMulSum call (op is then gbSum): the op's definition, copied at
   * enqueue so the op may be destroyed once the call is queued (NCCL's rule). */
  int preMul;
  unsigned char scalar[8];
  const void* scalarPtr; /* gbScalarDevice: read when the call runs */
  int stage;             /* send/recv: sends overlap receives, send from a copy */
  int np;                /* send/recv: the operations */
  gbAlgoP2p_t p2p[];
} call_t;

/* Marks ticket done and moves serving past every done ticket. */
static void ticketDone(hostIsland_t* hi, uint64_t ticket) {
  pthread_mutex_lock(&hi->lock);
  hi->done[ticket % TICKETS] = 1;
  while (hi->done[hi->serving % TICKETS]) hi->done[hi->serving++ % TICKETS] = 0;
  pthread_cond_broadcast(&hi->turn);
  pthread_mutex_unlock(&hi->lock);
}

/* Waits until every earlier ticket is done, up to the group's deadline or
 * its abort (looked at every 100 ms at most). */
static gbResult_t ticketWait(hostIsland_t* hi, uint64_t ticket) {
  gbDeadline_t deadline = gbDeadlineIn(hi->group->timeoutSec);
  const atomic_int* abortFlag = hi->group->abortFlag;
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&hi->lock);
  while (hi->serving != ticket && res == gbSuccess) {
    if (abortFlag && atomic_load_explicit(abortFlag, memory_order_acquire)) {
      res = gbErrorSet(gbRemoteError, "%s: call %llu gave up waiting for the island's earlier call %llu: the "
                                      "communicator was aborted", hi->group->name ? hi->group->name : "island",
                       (unsigned long long)ticket, (unsigned long long)hi->serving);
      break;
    }
    if (gbDeadlinePassed(deadline)) {
      res = gbErrorSet(gbTimeout, "%s: call %llu waited %.0f s for the island's earlier call %llu, queued on another "
                                  "stream that did not reach it",
                       hi->group->name ? hi->group->name : "island", (unsigned long long)ticket,
                       hi->group->timeoutSec, (unsigned long long)hi->serving);
      break;
    }
    gbCondWaitMs(&hi->turn, &hi->lock, gbDeadlineRemainingMs(deadline, 100) + 1);
  }
  pthread_mutex_unlock(&hi->lock);
  return res;
}

/* A call dropped by its stream (after an earlier error) gives its turn up. */
static void freeCall(void* p) {
  call_t* c = p;
  if (!c->ran) ticketDone(c->hi, c->ticket);
  free(c);
}

static const char* kindName(callKind_t k) {
  static const char* const names[] = {"all-reduce", "reduce", "broadcast",
                                      "all-gather", "reduce-scatter", "send/recv"};
  return names[k];
}

static const char* groupName(const hostIsland_t* hi) {
  return hi->group->name ? hi->group->name : "island";
}

/* A PreMulSum call reduces scalar * x: scale a copy of elems elements of
 * the input (never the caller's buffer) and reduce that with sum. */
static gbResult_t copyBuffer(hostIsland_t* hi, const call_t* c, size_t bytes, const char* what) {
  if (bytes > hi->scaledBytes) {
    free(hi->scaled);
    hi->scaledBytes = 0;
    hi->scaled = malloc(bytes);
    if (hi->scaled == NULL)
      return gbErrorSet(gbSystemError, "%s %s: cannot allocate %zu bytes for %s; free host memory or lower "
                        "the message size", groupName(hi), kindName(c->kind), bytes, what);
    hi->scaledBytes = bytes;
  }
  return gbSuccess;
}

static gbResult_t scaleInput(hostIsland_t* hi, const call_t* c, size_t elems, const void** send) {
  size_t bytes = elems * gbDtypeSize(c->dt);
  GB_CHECK(copyBuffer(hi, c, bytes, "the scaled input of a PreMulSum op"));
  memcpy(hi->scaled, c->send, bytes);
  gbScaleBy(hi->scaled, elems, c->dt, c->scalarPtr != NULL ? c->scalarPtr : c->scalar);
  *send = hi->scaled;
  return gbSuccess;
}

/* A send/recv call whose sends overlap its receives (an in-place
 * all-to-all) sends from a copy taken before anything moves. */
static gbResult_t stageSends(hostIsland_t* hi, call_t* c) {
  size_t total = 0;
  for (int i = 0; i < c->np; i++)
    if (c->p2p[i].isSend) total += c->p2p[i].bytes;
  GB_CHECK(copyBuffer(hi, c, total, "a copy of the sends (they overlap the receives)"));
  char* at = hi->scaled;
  for (int i = 0; i < c->np; i++) {
    if (!c->p2p[i].isSend || c->p2p[i].bytes == 0) continue;
    memcpy(at, c->p2p[i].buf, c->p2p[i].bytes);
    c->p2p[i].buf = at;
    at += c->p2p[i].bytes;
  }
  return gbSuccess;
}

/* The algo call a queued call stands for; avg is sum divided once by the
 * island's size where each element is reduced. */
static gbResult_t runAlgo(hostIsland_t* hi, call_t* c) {
  gbAlgoGroup_t* g = hi->group;
  int divisor = c->op == gbAvg ? hi->island.size : 0;
  gbRedOp_t op = c->op == gbAvg ? gbSum : c->op;
  const void* send = c->send;
  size_t es = gbDtypeSize(c->dt);
  switch (c->kind) {
    case CALL_ALLREDUCE:
      if (c->preMul) GB_CHECK(scaleInput(hi, c, c->count, &send));
      return gbAlgoAllReduce(g, send, c->recv, c->count, c->dt, op, divisor);
    case CALL_REDUCE: {
      if (c->preMul) GB_CHECK(scaleInput(hi, c, c->count, &send));
      /* recv is the root's alone (NCCL): the others' is never touched. */
      void* recv = hi->island.index == c->root ? c->recv : NULL;
      return gbAlgoReduce(g, send, recv, c->count, c->dt, op, divisor, c->root);
    }
    case CALL_BROADCAST: {
      size_t bytes = c->count * es;
      /* The chain carries recv; out of place, the root starts from send. */
      if (hi->island.index == c->root && c->send != c->recv) memcpy(c->recv, c->send, bytes);
      return gbAlgoBroadcast(g, c->recv, bytes, c->root);
    }
    case CALL_ALLGATHER:
      return gbAlgoAllGather(g, c->send, c->recv, c->count * es);
    case CALL_REDUCESCATTER:
      if (c->preMul) GB_CHECK(scaleInput(hi, c, c->count * (size_t)hi->island.size, &send));
      return gbAlgoReduceScatter(g, send, c->recv, c->count, c->dt, op, divisor);
    case CALL_SENDRECV:
      if (c->stage) GB_CHECK(stageSends(hi, c));
      return gbAlgoSendRecv(g, c->p2p, c->np);
  }
  return gbErrorSet(gbInternalError, "host island: unknown call kind %d", (int)c->kind);
}

/* Runs on the stream's worker thread. */
static gbResult_t runCall(void* p) {
  call_t* c = p;
  hostIsland_t* hi = c->hi;
  gbResult_t res = ticketWait(hi, c->ticket);
  int earlier = atomic_load_explicit(&hi->failed, memory_order_acquire);
  if (res != gbSuccess) {
    int none = gbSuccess;
    atomic_compare_exchange_strong_explicit(&hi->failed, &none, (int)res, memory_order_release, memory_order_relaxed);
  } else if (earlier != gbSuccess) {
    res = gbErrorSet((gbResult_t)earlier,
                     "%s %s (%zu x %s) skipped: an earlier collective on this island failed (%s), "
                     "so its connections are out of step; destroy the communicator and create a new one",
                     groupName(hi), kindName(c->kind), c->count, gbDtypeName(c->dt),
                     gbResultString((gbResult_t)earlier));
  } else {
    res = runAlgo(hi, c);
    if (res != gbSuccess) {
      int none = gbSuccess;
      atomic_compare_exchange_strong_explicit(&hi->failed, &none, (int)res, memory_order_release, memory_order_relaxed);
    }
  }
  c->ran = 1;
  ticketDone(hi, c->ticket);
  if (res != gbSuccess && hi->onError) hi->onError(hi->errCtx, res);
  return res; /* the stream holds the error too, until it is synchronized */
}

/* Checks the data type and that blocks x count elements fit in size_t. */
static gbResult_t checkCall(const hostIsland_t* hi, const char* what, size_t count, gbDataType_t dt,
                            size_t blocks) {
  size_t es = (int)dt >= 0 && dt < gbNumTypes ? gbDtypeSize(dt) : 0;
  if (es == 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown data type %d; use a gbDataType_t",
                      groupName(hi), what, (int)dt);
  if (count > SIZE_MAX / es / blocks)
    return gbErrorSet(gbInvalidArgument, "%s %s: %zu x %zu elements of %s overflow size_t",
                      groupName(hi), what, blocks, count, gbDtypeName(dt));
  return gbSuccess;
}

static gbResult_t checkRoot(const hostIsland_t* hi, const char* what, int root) {
  if (root < 0 || root >= hi->island.size)
    return gbErrorSet(gbInvalidArgument, "%s %s: root %d is not an island member (0..%d)",
                      groupName(hi), what, root, hi->island.size - 1);
  return gbSuccess;
}

/* Sets c's op: a built-in op as it is; a PreMulSum op becomes sum with the
 * op's scalar copied into the call. */
static gbResult_t takeOp(hostIsland_t* hi, const char* what, gbRedOp_t op, call_t* c) {
  long v = (long)op;
  if (v >= gbSum && v < gbNumOps) {
    c->op = op;
    return gbSuccess;
  }
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&hi->lock);
  long idx = v - gbNumOps;
  const preMulSum_t* pm = idx >= 0 && idx < hi->preMulCap && hi->preMul[idx].used ? &hi->preMul[idx] : NULL;
  if (pm == NULL) {
    res = gbErrorSet(gbInvalidArgument,
                     "%s %s: unknown reduction op %ld: not a built-in op and not a live PreMulSum op "
                     "of this communicator (created with gbRedOpCreatePreMulSum, not yet destroyed)",
                     groupName(hi), what, v);
  } else if (pm->dt != c->dt) {
    res = gbErrorSet(gbInvalidArgument, "%s %s: PreMulSum op %ld was created for %s, the call is %s; "
                     "create one op per data type", groupName(hi), what, v, gbDtypeName(pm->dt),
                     gbDtypeName(c->dt));
  } else {
    c->op = gbSum;
    c->preMul = 1;
    memcpy(c->scalar, pm->value, sizeof c->scalar);
    c->scalarPtr = pm->residence == gbScalarDevice ? pm->ptr : NULL;
  }
  pthread_mutex_unlock(&hi->lock);
  return res;
}

/* Queues a copy of tmpl (and np send/recv operations) as a host function. */
static gbResult_t launch(hostIsland_t* hi, const call_t* tmpl, const gbAlgoP2p_t* p2p, int np,
                         void* stream) {
  if (hi->dev->launchHostFn == NULL)
    return gbErrorSet(gbInternalError,
                      "%s: the host island needs a device that runs host functions on its "
                      "streams; device %s has none",
                      groupName(hi), hi->dev->name);
  call_t* c = malloc(sizeof(*c) + (size_t)np * sizeof(gbAlgoP2p_t));
  if (c == NULL)
    return gbErrorSet(gbSystemError, "%s %s: out of memory queueing the call", groupName(hi),
                      kindName(tmpl->kind));
  *c = *tmpl;
  c->hi = hi;
  c->ticket = hi->nextTicket++;
  c->ran = 0;
  c->np = np;
  if (np > 0) memcpy(c->p2p, p2p, (size_t)np * sizeof(gbAlgoP2p_t));
  /* launchHostFn owns c from here, freeing it (and so giving its ticket up)
   * even when queueing fails. */
  GB_CHECK(hi->dev->launchHostFn(stream, runCall, c, freeCall));
  return gbSuccess;
}

static gbResult_t allReduce(gbIsland_t* is, const void* send, void* recv, size_t count,
                            gbDataType_t dt, gbRedOp_t op, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  call_t c = {.kind = CALL_ALLREDUCE, .send = send, .recv = recv, .count = count, .dt = dt, .root = -1};
  GB_CHECK(checkCall(hi, "all-reduce", count, dt, 1));
  GB_CHECK(takeOp(hi, "all-reduce", op, &c));
  return launch(hi, &c, NULL, 0, stream);
}

static gbResult_t reduce(gbIsland_t* is, const void* send, void* recv, size_t count,
                         gbDataType_t dt, gbRedOp_t op, int root, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  call_t c = {.kind = CALL_REDUCE, .send = send, .recv = recv, .count = count, .dt = dt, .root = root};
  GB_CHECK(checkCall(hi, "reduce", count, dt, 1));
  GB_CHECK(checkRoot(hi, "reduce", root));
  GB_CHECK(takeOp(hi, "reduce", op, &c));
  return launch(hi, &c, NULL, 0, stream);
}

static gbResult_t broadcast(gbIsland_t* is, const void* send, void* recv, size_t count,
                            gbDataType_t dt, int root, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkCall(hi, "broadcast", count, dt, 1));
  GB_CHECK(checkRoot(hi, "broadcast", root));
  call_t c = {.kind = CALL_BROADCAST, .send = send, .recv = recv, .count = count, .dt = dt,
              .op = gbSum, .root = root};
  return launch(hi, &c, NULL, 0, stream);
}

static gbResult_t allGather(gbIsland_t* is, const void* send, void* recv, size_t count,
                            gbDataType_t dt, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkCall(hi, "all-gather", count, dt, (size_t)is->size));
  call_t c = {.kind = CALL_ALLGATHER, .send = send, .recv = recv, .count = count, .dt = dt,
              .op = gbSum, .root = -1};
  return launch(hi, &c, NULL, 0, stream);
}

static gbResult_t reduceScatter(gbIsland_t* is, const void* send, void* recv, size_t count,
                                gbDataType_t dt, gbRedOp_t op, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  call_t c = {.kind = CALL_REDUCESCATTER, .send = send, .recv = recv, .count = count, .dt = dt,
              .root = -1};
  GB_CHECK(checkCall(hi, "reduce-scatter", count, dt, (size_t)is->size));
  GB_CHECK(takeOp(hi, "reduce-scatter", op, &c));
  return launch(hi, &c, NULL, 0, stream);
}

/* Checks every operation now (a bad list fails here, before the island's
 * connections are touched) and queues them as one call. */
static gbResult_t sendRecv(gbIsland_t* is, const gbIslandP2p_t* ops, int nops, void* stream) {
  hostIsland_t* hi = is->impl;
  if (nops < 0 || (nops > 0 && ops == NULL))
    return gbErrorSet(gbInvalidArgument, "%s send/recv: %d operations at %p", groupName(hi), nops,
                      (const void*)ops);
  if (nops == 0) return gbSuccess;
  gbAlgoP2p_t* p2p = malloc((size_t)nops * sizeof(*p2p));
  if (p2p == NULL) return gbErrorSet(gbSystemError, "%s send/recv: out of memory for %d operations",
                                     groupName(hi), nops);
  gbResult_t res = gbSuccess;
  size_t total = 0, selfBytes[2] = {0, 0};
  int selfOps[2] = {0, 0};
  for (int i = 0; i < nops && res == gbSuccess; i++) {
    const gbIslandP2p_t* o = &ops[i];
    const char* dir = o->isSend ? "send" : "receive";
    res = checkCall(hi, "send/recv", o->count, o->dt, 1);
    if (res == gbSuccess && (o->peer < 0 || o->peer >= is->size))
      res = gbErrorSet(gbInvalidArgument, "%s send/recv: operation %d (%s of %zu x %s) names peer %d, "
                       "not an island member (0..%d)", groupName(hi), i, dir, o->count,
                       gbDtypeName(o->dt), o->peer, is->size - 1);
    if (res == gbSuccess && o->count > 0 && o->buf == NULL)
      res = gbErrorSet(gbInvalidArgument, "%s send/recv: operation %d (%s of %zu x %s with peer %d) has "
                       "a NULL buffer", groupName(hi), i, dir, o->count, gbDtypeName(o->dt), o->peer);
    if (res != gbSuccess) break;
    p2p[i] = (gbAlgoP2p_t){o->peer, o->isSend != 0, o->buf, o->count * gbDtypeSize(o->dt)};
    total += p2p[i].bytes;
    if (o->peer == is->index && p2p[i].bytes > 0) {
      selfOps[o->isSend != 0]++;
      selfBytes[o->isSend != 0] += p2p[i].bytes;
    }
  }
  /* Copies to myself must pair up (gbAlgoSendRecv checks each pair);
   * zero-byte entries do nothing, with myself as with others. */
  if (res == gbSuccess && (selfOps[0] != selfOps[1] || selfBytes[0] != selfBytes[1]))
    res = gbErrorSet(gbInvalidArgument, "%s send/recv: member %d sends itself %d messages (%zu bytes) "
                     "but receives %d (%zu bytes) from itself; they pair in list order",
                     groupName(hi), is->index, selfOps[1], selfBytes[1], selfOps[0], selfBytes[0]);
  int overlap = 0;
  if (res == gbSuccess && total > 0) res = gbIslandP2pOverlap(ops, nops, &overlap);
  if (res == gbSuccess && total > 0) {
    call_t c = {.kind = CALL_SENDRECV, .count = total, .dt = gbUint8, .op = gbSum, .root = -1, .stage = overlap};
    res = launch(hi, &c, p2p, nops, stream);
  }
  free(p2p);
  return res;
}

static gbResult_t preMulSumCreate(gbIsland_t* is, void* scalar, gbDataType_t dt,
                                  gbScalarResidence_t residence, gbRedOp_t* op) {
  hostIsland_t* hi = is->impl;
  size_t es = (int)dt >= 0 && dt < gbNumTypes ? gbDtypeSize(dt) : 0;
  if (op == NULL || scalar == NULL)
    return gbErrorSet(gbInvalidArgument, "%s PreMulSum create: the %s pointer is NULL", groupName(hi),
                      op == NULL ? "op" : "scalar");
  if (es == 0)
    return gbErrorSet(gbInvalidArgument, "%s PreMulSum create: unknown data type %d; use a gbDataType_t",
                      groupName(hi), (int)dt);
  if (residence != gbScalarDevice && residence != gbScalarHostImmediate)
    return gbErrorSet(gbInvalidArgument, "%s PreMulSum create: unknown scalar residence %d; use "
                      "gbScalarDevice or gbScalarHostImmediate", groupName(hi), (int)residence);
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&hi->lock);
  int idx = 0;
  while (idx < hi->preMulCap && hi->preMul[idx].used) idx++;
  if (idx == hi->preMulCap) {
    int cap = hi->preMulCap ? 2 * hi->preMulCap : 8;
    preMulSum_t* t = cap <= MAX_PREMUL ? realloc(hi->preMul, (size_t)cap * sizeof(*t)) : NULL;
    if (t == NULL) {
      res = gbErrorSet(gbSystemError, "%s PreMulSum create: cannot grow the table of %d live ops "
                       "(at most %d); destroy ops that are no longer used", groupName(hi),
                       hi->preMulCap, MAX_PREMUL);
    } else {
      memset(t + hi->preMulCap, 0, (size_t)(cap - hi->preMulCap) * sizeof(*t));
      hi->preMul = t;
      hi->preMulCap = cap;
    }
  }
  if (res == gbSuccess) {
    preMulSum_t* pm = &hi->preMul[idx];
    *pm = (preMulSum_t){.used = 1, .dt = dt, .residence = residence};
    if (residence == gbScalarHostImmediate) memcpy(pm->value, scalar, es);
    else pm->ptr = scalar;
    *op = (gbRedOp_t)(gbNumOps + idx);
  }
  pthread_mutex_unlock(&hi->lock);
  return res;
}

static gbResult_t redOpDestroy(gbIsland_t* is, gbRedOp_t op) {
  hostIsland_t* hi = is->impl;
  long v = (long)op;
  if (v >= gbSum && v < gbNumOps)
    return gbErrorSet(gbInvalidArgument, "%s op destroy: %s is a built-in op; only PreMulSum ops are "
                      "destroyed", groupName(hi), gbOpName(op));
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&hi->lock);
  long idx = v - gbNumOps;
  if (idx < 0 || idx >= hi->preMulCap || !hi->preMul[idx].used)
    res = gbErrorSet(gbInvalidArgument, "%s op destroy: op %ld is not a live PreMulSum op of this "
                     "communicator (never created, or already destroyed)", groupName(hi), v);
  else
    hi->preMul[idx].used = 0;
  pthread_mutex_unlock(&hi->lock);
  return res;
}

/* The caller synchronizes the island's streams first: queued calls point here. */
static void destroy(gbIsland_t* is) {
  if (is == NULL) return;
  hostIsland_t* hi = is->impl;
  pthread_mutex_destroy(&hi->lock);
  pthread_cond_destroy(&hi->turn);
  free(hi->preMul);
  free(hi->scaled);
  free(hi);
}

static const gbIslandOps_t hostIslandOps = {
    .name = "host",
    .allReduce = allReduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .allGather = allGather,
    .reduceScatter = reduceScatter,
    .sendRecv = sendRecv,
    .preMulSumCreate = preMulSumCreate,
    .redOpDestroy = redOpDestroy,
    .destroy = destroy,
};

gbResult_t gbIslandHostCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev,
                              gbIslandErrorFn_t onError, void* errCtx, gbIsland_t** out) {
  if (group == NULL || dev == NULL || out == NULL)
    return gbErrorSet(gbInternalError, "host island create: %s is NULL",
                      group == NULL ? "the group" : dev == NULL ? "the device" : "the output pointer");
  if (group->n < 1 || group->me < 0 || group->me >= group->n)
    return gbErrorSet(gbInternalError, "host island create on %s: member %d of %d is not a valid group",
                      group->name ? group->name : "?", group->me, group->n);
  hostIsland_t* hi = calloc(1, sizeof(*hi));
  if (hi == NULL) return gbErrorSet(gbSystemError, "host island create: out of memory");
  hi->group = group;
  hi->dev = dev;
  hi->onError = onError;
  hi->errCtx = errCtx;
  atomic_init(&hi->failed, gbSuccess);
  pthread_mutex_init(&hi->lock, NULL);
  gbCondInit(&hi->turn);
  hi->island.ops = &hostIslandOps;
  hi->island.size = group->n;
  hi->island.index = group->me;
  hi->island.impl = hi;
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "host island on %s: member %d of %d, device %s",
          group->name ? group->name : "?", group->me, group->n, dev->name);
  *out = &hi->island;
  return gbSuccess;
}
