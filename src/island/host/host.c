/* The host island: the members' "native" collectives are algo/ calls over a
 * borrowed net group, run as host functions on the device's streams, so they
 * happen in stream order exactly as an NCCL call would on a GPU stream. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/dtype.h"
#include "base/result.h"
#include "island/island.h"

typedef enum { CALL_ALLREDUCE, CALL_REDUCE, CALL_BROADCAST } callKind_t;

#define TICKETS 4096

typedef struct {
  gbIsland_t island;
  gbAlgoGroup_t* group;
  const gbDeviceOps* dev;
  gbIslandErrorFn_t onError;
  void* errCtx;
  /* First failure (atomic): algo leaves the connections out of step after a
   * failed call, so later calls must fail rather than exchange garbage. */
  int failed;
  /* Calls take tickets in the order the caller enqueues them (the same order
   * on every member), and run in ticket order whatever stream runs them, so
   * two streams driving one island cannot interleave or reorder its calls. */
  uint64_t nextTicket; /* caller thread */
  pthread_mutex_t lock;
  pthread_cond_t turn;
  uint64_t serving;           /* lowest ticket not yet done */
  unsigned char done[TICKETS]; /* tickets done out of order, by ticket % TICKETS */
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
} call_t;

/* Marks ticket done and moves serving past every done ticket. */
static void ticketDone(hostIsland_t* hi, uint64_t ticket) {
  pthread_mutex_lock(&hi->lock);
  hi->done[ticket % TICKETS] = 1;
  while (hi->done[hi->serving % TICKETS]) hi->done[hi->serving++ % TICKETS] = 0;
  pthread_cond_broadcast(&hi->turn);
  pthread_mutex_unlock(&hi->lock);
}

/* Waits until every earlier ticket is done, up to the group's deadline. */
static gbResult_t ticketWait(hostIsland_t* hi, uint64_t ticket) {
  gbDeadline_t deadline = gbDeadlineIn(hi->group->timeoutSec);
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&hi->lock);
  while (hi->serving != ticket && res == gbSuccess) {
    if (gbDeadlinePassed(deadline)) {
      res = gbErrorSet(gbTimeout, "%s: call %llu waited %.0f s for the island's earlier call %llu, queued on another "
                                  "stream that did not reach it",
                       hi->group->name ? hi->group->name : "island", (unsigned long long)ticket,
                       hi->group->timeoutSec, (unsigned long long)hi->serving);
      break;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)gbDeadlineRemainingMs(deadline, 100) * 1000000L + 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&hi->turn, &hi->lock, &ts);
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
  return k == CALL_ALLREDUCE ? "all-reduce" : k == CALL_REDUCE ? "reduce" : "broadcast";
}

static const char* groupName(const hostIsland_t* hi) {
  return hi->group->name ? hi->group->name : "island";
}

/* Runs on the stream's worker thread. */
static gbResult_t runCall(void* p) {
  call_t* c = p;
  hostIsland_t* hi = c->hi;
  gbAlgoGroup_t* g = hi->group;
  gbResult_t res = ticketWait(hi, c->ticket);
  int earlier = __atomic_load_n(&hi->failed, __ATOMIC_ACQUIRE);
  if (res != gbSuccess) {
    int none = gbSuccess;
    __atomic_compare_exchange_n(&hi->failed, &none, (int)res, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  } else if (earlier != gbSuccess) {
    res = gbErrorSet((gbResult_t)earlier,
                     "%s %s of %zu x %s skipped: an earlier collective on this island failed (%s), "
                     "so its connections are out of step; destroy the communicator and create a new one",
                     groupName(hi), kindName(c->kind), c->count, gbDtypeName(c->dt),
                     gbResultString((gbResult_t)earlier));
  } else {
    switch (c->kind) {
      case CALL_ALLREDUCE: {
        /* avg: sum, divided once where each element is reduced. */
        int divisor = c->op == gbAvg ? hi->island.size : 0;
        gbRedOp_t op = c->op == gbAvg ? gbSum : c->op;
        res = gbAlgoAllReduce(g, c->send, c->recv, c->count, c->dt, op, divisor);
        break;
      }
      case CALL_REDUCE: {
        int divisor = c->op == gbAvg ? hi->island.size : 0;
        gbRedOp_t op = c->op == gbAvg ? gbSum : c->op;
        /* recv is the root's alone (NCCL): the others' is never touched. */
        void* recv = hi->island.index == c->root ? c->recv : NULL;
        res = gbAlgoReduce(g, c->send, recv, c->count, c->dt, op, divisor, c->root);
        break;
      }
      case CALL_BROADCAST: {
        size_t bytes = c->count * gbDtypeSize(c->dt);
        /* The chain carries recv; out of place, the root starts from send. */
        if (hi->island.index == c->root && c->send != c->recv) memcpy(c->recv, c->send, bytes);
        res = gbAlgoBroadcast(g, c->recv, bytes, c->root);
        break;
      }
      default:
        res = gbErrorSet(gbInternalError, "host island: unknown call kind %d", (int)c->kind);
    }
    if (res != gbSuccess) {
      int none = gbSuccess;
      __atomic_compare_exchange_n(&hi->failed, &none, (int)res, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
  }
  c->ran = 1;
  ticketDone(hi, c->ticket);
  if (res != gbSuccess && hi->onError) hi->onError(hi->errCtx, res);
  return res; /* the stream holds the error too, until it is synchronized */
}

static gbResult_t checkCall(const hostIsland_t* hi, const char* what, gbDataType_t dt, int root,
                            int needRoot) {
  if (gbDtypeSize(dt) == 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown data type %d; use a gbDataType_t",
                      groupName(hi), what, (int)dt);
  if (needRoot && (root < 0 || root >= hi->island.size))
    return gbErrorSet(gbInvalidArgument, "%s %s: root %d is not an island member (0..%d)",
                      groupName(hi), what, root, hi->island.size - 1);
  return gbSuccess;
}

static gbResult_t launch(hostIsland_t* hi, callKind_t kind, const void* send, void* recv,
                         size_t count, gbDataType_t dt, gbRedOp_t op, int root, void* stream) {
  if (hi->dev->launchHostFn == NULL)
    return gbErrorSet(gbInternalError,
                      "%s: the host island needs a device that runs host functions on its "
                      "streams; device %s has none",
                      groupName(hi), hi->dev->name);
  call_t* c = malloc(sizeof(*c));
  if (c == NULL)
    return gbErrorSet(gbSystemError, "%s %s: out of memory queueing the call", groupName(hi), kindName(kind));
  *c = (call_t){hi, kind, send, recv, count, dt, op, root, hi->nextTicket++, 0};
  /* launchHostFn owns c from here, freeing it (and so giving its ticket up)
   * even when queueing fails. */
  GB_CHECK(hi->dev->launchHostFn(stream, runCall, c, freeCall));
  return gbSuccess;
}

static gbResult_t allReduce(gbIsland_t* is, const void* send, void* recv, size_t count,
                            gbDataType_t dt, gbRedOp_t op, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkCall(hi, "all-reduce", dt, 0, 0));
  if (op < gbSum || op >= gbNumOps)
    return gbErrorSet(gbInvalidArgument, "%s all-reduce: unknown reduction op %d", groupName(hi), (int)op);
  return launch(hi, CALL_ALLREDUCE, send, recv, count, dt, op, -1, stream);
}

static gbResult_t reduce(gbIsland_t* is, const void* send, void* recv, size_t count,
                         gbDataType_t dt, gbRedOp_t op, int root, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkCall(hi, "reduce", dt, root, 1));
  if (op < gbSum || op >= gbNumOps)
    return gbErrorSet(gbInvalidArgument, "%s reduce: unknown reduction op %d", groupName(hi), (int)op);
  return launch(hi, CALL_REDUCE, send, recv, count, dt, op, root, stream);
}

static gbResult_t broadcast(gbIsland_t* is, const void* send, void* recv, size_t count,
                            gbDataType_t dt, int root, void* stream) {
  hostIsland_t* hi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkCall(hi, "broadcast", dt, root, 1));
  return launch(hi, CALL_BROADCAST, send, recv, count, dt, gbSum, root, stream);
}

/* The caller synchronizes the island's streams first: queued calls point here. */
static void destroy(gbIsland_t* is) {
  if (is == NULL) return;
  hostIsland_t* hi = is->impl;
  pthread_mutex_destroy(&hi->lock);
  pthread_cond_destroy(&hi->turn);
  free(hi);
}

static const gbIslandOps_t hostIslandOps = {
    .name = "host",
    .allReduce = allReduce,
    .reduce = reduce,
    .broadcast = broadcast,
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
  hi->failed = gbSuccess;
  pthread_mutex_init(&hi->lock, NULL);
  pthread_cond_init(&hi->turn, NULL);
  hi->island.ops = &hostIslandOps;
  hi->island.size = group->n;
  hi->island.index = group->me;
  hi->island.impl = hi;
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "host island on %s: member %d of %d, device %s",
          group->name ? group->name : "?", group->me, group->n, dev->name);
  *out = &hi->island;
  return gbSuccess;
}
