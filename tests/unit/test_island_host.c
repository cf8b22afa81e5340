/* island/host: 1..4 members (threads), each with a host island over TCP
 * loopback connections and its own host device stream. All-reduce (sum, avg,
 * max), reduce to root 1, broadcast from root 2, several calls queued before
 * one synchronize, count 0, bad arguments, and a peer that closes its
 * connection; all-gather, reduce-scatter (sum, avg), a fused send/recv
 * group, and PreMulSum ops with immediate and device scalars. Expected bits follow the order documented in algo/algo.h,
 * computed here independently. A call waiting for its turn behind an
 * earlier call stuck on another stream gives up once the group aborts, long
 * before its deadline. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "base/clock.h"
#include "base/result.h"
#include "device/device.h"
#include "island/island.h"
#include "net/net.h"
#include "os/socket.h"
#include "unit/loopback_group.h"

#define MAX_N 4
#define TIMEOUT_SEC 20.0
#define RING_MIN_BYTES 4096
#define PIECE_BYTES (64 * 1024)

typedef struct {
  int n;
  gbSockAddr_t addrs[MAX_N];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived, generation;
  int failed;
  atomic_int abortFlag;
  int closer; /* error scenario: this member closes its connections */
} shared_t;

typedef struct {
  shared_t* sh;
  int me;
  int errors;         /* onError calls */
  gbResult_t lastErr; /* the last code onError saw */
  int checks;
} member_t;

static void fail(shared_t* sh, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (last error: %s)\n", gbErrorLast());
  va_end(ap);
  pthread_mutex_lock(&sh->mu);
  sh->failed = 1;
  sh->abortFlag = 1; /* the others stop waiting for this member */
  pthread_cond_broadcast(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
}

/* 1 when all members arrived; 0 on failure or deadline. */
static int barrier(shared_t* sh) {
  gbDeadline_t d = gbDeadlineIn(TIMEOUT_SEC);
  struct timespec ts = {(time_t)(d.ns / 1000000000LL), (long)(d.ns % 1000000000LL)};
  pthread_mutex_lock(&sh->mu);
  int gen = sh->generation;
  if (++sh->arrived == sh->n) {
    sh->arrived = 0;
    sh->generation++;
    pthread_cond_broadcast(&sh->cv);
  }
  int rc = 0;
  while (gen == sh->generation && !sh->failed && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
  int ok = gen != sh->generation && !sh->failed;
  pthread_mutex_unlock(&sh->mu);
  if (!ok && rc == ETIMEDOUT) fail(sh, "barrier: deadline passed");
  return ok;
}

static void onError(void* ctx, gbResult_t res) {
  member_t* m = ctx;
  __atomic_store_n(&m->lastErr, res, __ATOMIC_RELAXED);
  __atomic_fetch_add(&m->errors, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ inputs */

static uint32_t hash3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu ^ (c + 0x165667b1u) * 0xc2b2ae35u;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  h *= 0x297a2d39u;
  h ^= h >> 15;
  return h;
}

/* Mixed magnitudes, so a different folding order changes the bits. */
static float inputF(int member, size_t i, int salt) {
  uint32_t h = hash3((uint32_t)member, (uint32_t)i, (uint32_t)salt);
  float mant = (float)(int32_t)(h & 0xffffff) / (float)(1 << 23) - 1.0f;
  int e = (int)((h >> 24) % 21) - 10;
  return ldexpf(mant, e);
}

static int32_t inputI(int member, size_t i, int salt) {
  return (int32_t)hash3((uint32_t)member, (uint32_t)i, (uint32_t)salt);
}

/* ------------------------------------------------------------ references */

/* The member that folds element i, per algo.h: slice j holds
 * [floor(j*count/n), floor((j+1)*count/n)). */
static int sliceOf(size_t i, size_t count, int n) {
  for (int j = 0; j < n; j++) {
    size_t end = (size_t)((uint64_t)count * (uint64_t)(j + 1) / (uint64_t)n);
    if (i < end) return j;
  }
  return n - 1;
}

/* Sum (or avg when avg != 0) of every member's scale * inputF (each product
 * rounded to float; scale 1 changes nothing), in algo.h's order. */
static void refScaled(float* out, size_t count, int n, int salt, int avg, float scale) {
  int exchange = count * sizeof(float) < RING_MIN_BYTES || n < 3;
  for (size_t i = 0; i < count; i++) {
    int first = exchange ? 0 : (sliceOf(i, count, n) + 1) % n;
    float acc = scale * inputF(first, i, salt);
    for (int k = 1; k < n; k++) acc = acc + scale * inputF((first + k) % n, i, salt);
    if (avg) acc = acc / (float)n;
    out[i] = acc;
  }
}

static void refFloat(float* out, size_t count, int n, int salt, int avg) {
  refScaled(out, count, n, salt, avg, 1.0f);
}

/* Reduce-scatter: my block, folded x0 + x1 + ... + x(n-1) left to right,
 * each x scaled first. */
static void refBlock(float* out, size_t count, int n, int me, int salt, int avg, float scale) {
  for (size_t e = 0; e < count; e++) {
    size_t at = (size_t)me * count + e;
    float acc = scale * inputF(0, at, salt);
    for (int k = 1; k < n; k++) acc = acc + scale * inputF(k, at, salt);
    out[e] = avg ? acc / (float)n : acc;
  }
}

static int sameBits(member_t* m, const void* got, const void* want, size_t bytes, size_t esize,
                    const char* what) {
  m->checks++;
  if (memcmp(got, want, bytes) == 0) return 1;
  for (size_t i = 0; i < bytes / esize; i++) {
    if (memcmp((const char*)got + i * esize, (const char*)want + i * esize, esize) != 0) {
      if (esize == 4)
        fail(m->sh, "%s: member %d element %zu is 0x%08x, want 0x%08x", what, m->me, i,
             ((const uint32_t*)got)[i], ((const uint32_t*)want)[i]);
      else
        fail(m->sh, "%s: member %d element %zu differs", what, m->me, i);
      return 0;
    }
  }
  return 0;
}

static int syncOk(member_t* m, const gbDeviceOps* dev, void* stream, const char* what) {
  gbResult_t r = dev->streamSynchronize(stream);
  if (r != gbSuccess) {
    fail(m->sh, "%s: member %d: synchronize returned %d", what, m->me, r);
    return 0;
  }
  return 1;
}

/* ------------------------------------------------------------ scenarios */

static int runAllReduce(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  static const size_t counts[] = {1, 5, 777, 1024, 100003};
  int n = m->sh->n, me = m->me;
  size_t maxc = 100003;
  float* send = malloc(maxc * sizeof(float));
  float* recv = malloc(maxc * sizeof(float));
  float* want = malloc(maxc * sizeof(float));
  int ok = send && recv && want;
  char what[128];
  for (size_t ci = 0; ok && ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    size_t count = counts[ci];
    for (int avg = 0; ok && avg <= 1; avg++) {
      for (int inPlace = 0; ok && inPlace <= 1; inPlace++) {
        int salt = (int)ci * 4 + avg * 2 + inPlace;
        for (size_t i = 0; i < count; i++) send[i] = inputF(me, i, salt);
        memset(recv, 0xee, count * sizeof(float));
        float* dst = inPlace ? send : recv;
        snprintf(what, sizeof(what), "all-reduce %s n=%d count=%zu%s", avg ? "avg" : "sum", n, count,
                 inPlace ? " in place" : "");
        gbResult_t r = is->ops->allReduce(is, send, dst, count, gbFloat32, avg ? gbAvg : gbSum, stream);
        if (r != gbSuccess) { fail(m->sh, "%s: enqueue returned %d", what, r); ok = 0; break; }
        if (!syncOk(m, dev, stream, what)) { ok = 0; break; }
        refFloat(want, count, n, salt, avg);
        ok = sameBits(m, dst, want, count * sizeof(float), sizeof(float), what);
      }
    }
  }
  /* An integer max, where the order does not matter but the op does. */
  if (ok) {
    size_t count = 3001;
    int32_t* is32 = (int32_t*)send;
    int32_t* ir32 = (int32_t*)recv;
    int32_t* iw32 = (int32_t*)want;
    for (size_t i = 0; i < count; i++) {
      is32[i] = inputI(me, i, 99);
      int32_t best = inputI(0, i, 99);
      for (int k = 1; k < n; k++) if (inputI(k, i, 99) > best) best = inputI(k, i, 99);
      iw32[i] = best;
    }
    gbResult_t r = is->ops->allReduce(is, is32, ir32, count, gbInt32, gbMax, stream);
    if (r != gbSuccess) { fail(m->sh, "int32 max: enqueue returned %d", r); ok = 0; }
    else ok = syncOk(m, dev, stream, "int32 max") &&
              sameBits(m, ir32, iw32, count * sizeof(int32_t), sizeof(int32_t), "int32 max");
  }
  free(send);
  free(recv);
  free(want);
  return ok;
}

static int runReduce(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  int n = m->sh->n, me = m->me;
  int root = n > 1 ? 1 : 0;
  static const size_t counts[] = {3, 50000};
  int ok = 1;
  for (size_t ci = 0; ok && ci < 2; ci++) {
    size_t count = counts[ci];
    int salt = 40 + (int)ci;
    float* send = malloc(count * sizeof(float));
    float* recv = malloc(count * sizeof(float));
    float* want = malloc(count * sizeof(float));
    if (!send || !recv || !want) { fail(m->sh, "out of memory"); ok = 0; }
    char what[96];
    snprintf(what, sizeof(what), "reduce sum to %d, n=%d count=%zu", root, n, count);
    if (ok) {
      for (size_t i = 0; i < count; i++) send[i] = inputF(me, i, salt);
      memset(recv, 0xee, count * sizeof(float));
      gbResult_t r = is->ops->reduce(is, send, recv, count, gbFloat32, gbSum, root, stream);
      if (r != gbSuccess) { fail(m->sh, "%s: enqueue returned %d", what, r); ok = 0; }
    }
    if (ok) ok = syncOk(m, dev, stream, what);
    if (ok) {
      if (me == root) {
        refFloat(want, count, n, salt, 0);
      } else {
        memset(want, 0xee, count * sizeof(float)); /* recv is the root's alone */
      }
      ok = sameBits(m, recv, want, count * sizeof(float), sizeof(float), what);
    }
    free(send);
    free(recv);
    free(want);
  }
  return ok;
}

static int runBroadcast(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  int n = m->sh->n, me = m->me;
  int root = n > 2 ? 2 : n - 1;
  static const size_t counts[] = {1, 300001};
  int ok = 1;
  for (size_t ci = 0; ok && ci < 2; ci++) {
    for (int inPlace = 0; ok && inPlace <= 1; inPlace++) {
      size_t count = counts[ci];
      int salt = 60 + (int)ci * 2 + inPlace;
      float* send = malloc(count * sizeof(float));
      float* recv = malloc(count * sizeof(float));
      float* want = malloc(count * sizeof(float));
      if (!send || !recv || !want) { fail(m->sh, "out of memory"); ok = 0; }
      char what[96];
      snprintf(what, sizeof(what), "broadcast from %d, n=%d count=%zu%s", root, n, count,
               inPlace ? " in place" : "");
      if (ok) {
        for (size_t i = 0; i < count; i++) {
          want[i] = inputF(root, i, salt);
          send[i] = inputF(me, i, salt);
        }
        memset(recv, 0xee, count * sizeof(float));
        float* buf = inPlace ? send : recv;
        gbResult_t r = is->ops->broadcast(is, send, buf, count, gbFloat32, root, stream);
        if (r != gbSuccess) { fail(m->sh, "%s: enqueue returned %d", what, r); ok = 0; }
        if (ok) ok = syncOk(m, dev, stream, what);
        if (ok) ok = sameBits(m, buf, want, count * sizeof(float), sizeof(float), what);
      }
      free(send);
      free(recv);
      free(want);
    }
  }
  return ok;
}

/* Three calls queued before one synchronize: stream order carries them. */
static int runQueued(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  int n = m->sh->n, me = m->me;
  enum { C = 2000 };
  static _Thread_local float a[C], b[C], want[C];
  for (size_t i = 0; i < C; i++) a[i] = inputF(me, i, 80);
  memset(b, 0, sizeof(b));
  /* a = sum; b = broadcast of a from member 0; a = sum again (of equal inputs). */
  if (is->ops->allReduce(is, a, a, C, gbFloat32, gbSum, stream) != gbSuccess ||
      is->ops->broadcast(is, a, b, C, gbFloat32, 0, stream) != gbSuccess ||
      is->ops->allReduce(is, b, b, C, gbFloat32, gbMax, stream) != gbSuccess) {
    fail(m->sh, "queued calls: an enqueue failed");
    return 0;
  }
  if (!syncOk(m, dev, stream, "queued calls")) return 0;
  refFloat(want, C, n, 80, 0);
  /* Every member holds the same sum, so the max of equal values is that sum. */
  return sameBits(m, a, want, sizeof(a), sizeof(float), "queued all-reduce") &&
         sameBits(m, b, want, sizeof(b), sizeof(float), "queued broadcast then max");
}

static int runArgChecks(member_t* m, gbIsland_t* is) {
  static uint64_t notAStream[32];
  float x = 1.0f;
  int n = m->sh->n;
  struct {
    gbResult_t got, want;
    const char* what;
  } c[] = {
      /* count 0 queues nothing, so even a stream that is not one passes */
      {is->ops->allReduce(is, NULL, NULL, 0, gbFloat32, gbSum, notAStream), gbSuccess, "count 0 all-reduce"},
      {is->ops->reduce(is, NULL, NULL, 0, gbFloat32, gbSum, 0, notAStream), gbSuccess, "count 0 reduce"},
      {is->ops->broadcast(is, NULL, NULL, 0, gbFloat32, 0, notAStream), gbSuccess, "count 0 broadcast"},
      {is->ops->allReduce(is, &x, &x, 1, gbFloat32, gbSum, notAStream), gbInvalidArgument, "foreign stream"},
      {is->ops->reduce(is, &x, &x, 1, gbFloat32, gbSum, n, NULL), gbInvalidArgument, "reduce root == n"},
      {is->ops->broadcast(is, &x, &x, 1, gbFloat32, -1, NULL), gbInvalidArgument, "broadcast root -1"},
      {is->ops->allReduce(is, &x, &x, 1, (gbDataType_t)42, gbSum, NULL), gbInvalidArgument, "unknown dtype"},
      {is->ops->allReduce(is, &x, &x, 1, gbFloat32, (gbRedOp_t)9, NULL), gbInvalidArgument, "unknown op"},
  };
  for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
    m->checks++;
    if (c[i].got != c[i].want) {
      fail(m->sh, "%s: member %d got %d, want %d", c[i].what, m->me, c[i].got, c[i].want);
      return 0;
    }
  }
  return 1;
}

/* The error scenario: sh->closer closes its connections; every other member's
 * all-reduce must fail through synchronize and onError, long before the
 * deadline, and a later call must fail too (the connections are out of step). */
static int runPeerClosed(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream,
                         gbAlgoGroup_t* g) {
  shared_t* sh = m->sh;
  if (m->me == sh->closer) {
    for (int j = 0; j < sh->n; j++) {
      if (g->conns[j] != NULL) {
        g->net->close(g->conns[j]);
        g->conns[j] = NULL;
      }
    }
    return 1;
  }
  enum { C = 64 };
  float x[C], y[C];
  for (int i = 0; i < C; i++) x[i] = (float)i;
  int64_t t0 = gbClockNowNs();
  gbResult_t r = is->ops->allReduce(is, x, y, C, gbFloat32, gbSum, stream);
  if (r != gbSuccess) { fail(sh, "peer closed: enqueue returned %d", r); return 0; }
  gbResult_t s = dev->streamSynchronize(stream);
  double waited = (double)(gbClockNowNs() - t0) / 1e9;
  m->checks += 4;
  if (s == gbSuccess || s == gbTimeout || waited > TIMEOUT_SEC / 2) {
    fail(sh, "peer closed: member %d synchronize returned %d after %.2f s; want a prompt error", m->me,
         s, waited);
    return 0;
  }
  int errors = __atomic_load_n(&m->errors, __ATOMIC_RELAXED);
  if (errors != 1 || __atomic_load_n(&m->lastErr, __ATOMIC_RELAXED) != s) {
    fail(sh, "peer closed: member %d onError called %d times with %d; want once with %d", m->me,
         errors, m->lastErr, s);
    return 0;
  }
  /* The island refuses to talk over connections left out of step. */
  r = is->ops->allReduce(is, x, y, C, gbFloat32, gbSum, stream);
  gbResult_t s2 = dev->streamSynchronize(stream);
  if (r != gbSuccess || s2 != s || __atomic_load_n(&m->errors, __ATOMIC_RELAXED) != 2) {
    fail(sh, "after failure: member %d enqueue %d, synchronize %d (want %d), onError %d times", m->me,
         r, s2, s, m->errors);
    return 0;
  }
  if (strstr(gbErrorLast(), "earlier collective") == NULL) {
    fail(sh, "after failure: member %d error text does not name the earlier failure", m->me);
    return 0;
  }
  /* The stream itself recovered: the error was returned once. */
  if (dev->streamSynchronize(stream) != gbSuccess) {
    fail(sh, "after failure: member %d stream still holds an error", m->me);
    return 0;
  }
  return 1;
}

/* All-gather and reduce-scatter (sum and avg), in place and out of place. */
static int runGatherScatter(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  static const size_t counts[] = {1, 5000};
  int n = m->sh->n, me = m->me;
  size_t maxc = 5000 * MAX_N;
  float* send = malloc(maxc * sizeof(float));
  float* recv = malloc(maxc * sizeof(float));
  float* want = malloc(maxc * sizeof(float));
  int ok = send && recv && want;
  if (!ok) fail(m->sh, "out of memory");
  char what[128];
  for (size_t ci = 0; ok && ci < 2; ci++) {
    size_t count = counts[ci];
    for (int inPlace = 0; ok && inPlace <= 1; inPlace++) {
      int salt = 100 + (int)ci * 2 + inPlace;
      snprintf(what, sizeof what, "all-gather n=%d count=%zu%s", n, count, inPlace ? " in place" : "");
      memset(recv, 0xee, (size_t)n * count * sizeof(float));
      float* src = inPlace ? recv + (size_t)me * count : send;
      for (size_t i = 0; i < count; i++) src[i] = inputF(me, i, salt);
      for (int k = 0; k < n; k++)
        for (size_t i = 0; i < count; i++) want[(size_t)k * count + i] = inputF(k, i, salt);
      gbResult_t r = is->ops->allGather(is, src, recv, count, gbFloat32, stream);
      if (r != gbSuccess) { fail(m->sh, "%s: enqueue returned %d", what, r); ok = 0; break; }
      ok = syncOk(m, dev, stream, what) &&
           sameBits(m, recv, want, (size_t)n * count * sizeof(float), sizeof(float), what);
      for (int avg = 0; ok && avg <= 1; avg++) {
        salt = 110 + (int)ci * 4 + inPlace * 2 + avg;
        snprintf(what, sizeof what, "reduce-scatter %s n=%d count=%zu%s", avg ? "avg" : "sum", n, count,
                 inPlace ? " in place" : "");
        for (size_t i = 0; i < (size_t)n * count; i++) send[i] = inputF(me, i, salt);
        memset(recv, 0xee, count * sizeof(float));
        float* dst = inPlace ? send + (size_t)me * count : recv;
        r = is->ops->reduceScatter(is, send, dst, count, gbFloat32, avg ? gbAvg : gbSum, stream);
        if (r != gbSuccess) { fail(m->sh, "%s: enqueue returned %d", what, r); ok = 0; break; }
        refBlock(want, count, n, me, salt, avg, 1.0f);
        ok = syncOk(m, dev, stream, what) && sameBits(m, dst, want, count * sizeof(float), sizeof(float), what);
      }
    }
  }
  free(send);
  free(recv);
  free(want);
  return ok;
}

/* A ring shift, a copy to myself and several messages to one peer, as one
 * fused group; then lists refused when they are enqueued. */
static int runSendRecv(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  enum { C = 7777, S = 3 };
  int n = m->sh->n, me = m->me, next = (me + 1) % n, prev = (me + n - 1) % n;
  static _Thread_local float a[C], b[C], c[S], d[S], e[2][S], f[2][S];
  for (size_t i = 0; i < C; i++) a[i] = inputF(me, i, 120);
  for (size_t i = 0; i < S; i++) {
    c[i] = inputF(me, i, 121);
    e[0][i] = inputF(me, i, 122);
    e[1][i] = inputF(me, i, 123);
  }
  memset(b, 0xee, sizeof b);
  memset(d, 0xee, sizeof d);
  memset(f, 0xee, sizeof f);
  /* Ordered so that with n == 1 (next and prev are me) the copies to myself
   * pair the same way: a to b, e[0] to f[0], c to d, e[1] to f[1]. */
  gbIslandP2p_t ops[] = {
      {prev, 0, b, C, gbFloat32},    {next, 1, a, C, gbFloat32},    {prev, 0, f[0], S, gbFloat32},
      {me, 0, d, S, gbFloat32},      {next, 1, e[0], S, gbFloat32}, {me, 1, c, S, gbFloat32},
      {next, 1, e[1], S, gbFloat32}, {prev, 0, f[1], S, gbFloat32}, {next, 1, NULL, 0, gbFloat32},
      {prev, 0, NULL, 0, gbFloat32}};
  gbResult_t r = is->ops->sendRecv(is, ops, (int)(sizeof ops / sizeof ops[0]), stream);
  if (r != gbSuccess) { fail(m->sh, "send/recv: enqueue returned %d", r); return 0; }
  if (!syncOk(m, dev, stream, "send/recv")) return 0;
  float wb[C], wf[2][S], wd[S];
  for (size_t i = 0; i < C; i++) wb[i] = inputF(prev, i, 120);
  for (size_t i = 0; i < S; i++) {
    wf[0][i] = inputF(prev, i, 122);
    wf[1][i] = inputF(prev, i, 123);
    wd[i] = inputF(me, i, 121);
  }
  if (!sameBits(m, b, wb, sizeof b, sizeof(float), "send/recv ring shift") ||
      !sameBits(m, f, wf, sizeof f, sizeof(float), "send/recv two messages from one peer, in order") ||
      !sameBits(m, d, wd, sizeof d, sizeof(float), "send/recv to myself"))
    return 0;
  float x[2] = {1, 2};
  gbIslandP2p_t badPeer[] = {{n, 1, x, 1, gbFloat32}};
  gbIslandP2p_t badType[] = {{me, 1, x, 1, (gbDataType_t)42}, {me, 0, x, 1, gbFloat32}};
  gbIslandP2p_t unpaired[] = {{me, 1, x, 1, gbFloat32}, {me, 0, x + 1, 1, gbInt8}};
  gbIslandP2p_t nullBuf[] = {{me, 1, NULL, 1, gbFloat32}, {me, 0, x, 1, gbFloat32}};
  gbResult_t got[] = {is->ops->sendRecv(is, badPeer, 1, stream), is->ops->sendRecv(is, badType, 2, stream),
                      is->ops->sendRecv(is, unpaired, 2, stream), is->ops->sendRecv(is, nullBuf, 2, stream)};
  for (int i = 0; i < 4; i++) {
    m->checks++;
    if (got[i] != gbInvalidArgument) {
      fail(m->sh, "send/recv bad list %d: member %d got %d, want gbInvalidArgument", i, me, got[i]);
      return 0;
    }
  }
  return syncOk(m, dev, stream, "send/recv after refused lists");
}

static int expect(member_t* m, gbResult_t got, gbResult_t want, const char* what) {
  m->checks++;
  if (got == want) return 1;
  fail(m->sh, "%s: member %d got %d, want %d", what, m->me, got, want);
  return 0;
}

/* One call with a PreMulSum op, checked against the scaled fold; the send
 * buffer must be left alone. kind: 0 all-reduce (in place when inPlace),
 * 1 reduce to the last member, 2 reduce-scatter. */
static int onePreMul(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream, gbRedOp_t op,
                     float scale, int kind, int inPlace, int salt, const char* what) {
  enum { C = 3001 };
  static _Thread_local float send[C * MAX_N], recv[C * MAX_N], want[C * MAX_N];
  int n = m->sh->n, me = m->me, root = n - 1;
  for (size_t i = 0; i < (size_t)n * C; i++) send[i] = inputF(me, i, salt);
  memset(recv, 0xee, sizeof recv);
  float* dst = inPlace ? send : recv;
  gbResult_t r = kind == 0 ? is->ops->allReduce(is, send, dst, C, gbFloat32, op, stream)
               : kind == 1 ? is->ops->reduce(is, send, recv, C, gbFloat32, op, root, stream)
                           : is->ops->reduceScatter(is, send, recv, C, gbFloat32, op, stream);
  if (r != gbSuccess) { fail(m->sh, "%s: enqueue returned %d", what, r); return 0; }
  if (!syncOk(m, dev, stream, what)) return 0;
  if (kind == 2) refBlock(want, C, n, me, salt, 0, scale);
  else refScaled(want, C, n, salt, 0, scale);
  if ((kind != 1 || me == root) && !sameBits(m, dst, want, C * sizeof(float), sizeof(float), what)) return 0;
  if (inPlace) return 1;
  for (size_t i = 0; i < (size_t)n * C; i++) want[i] = inputF(me, i, salt);
  return sameBits(m, send, want, (size_t)n * C * sizeof(float), sizeof(float), "PreMulSum left send alone");
}

/* PreMulSum ops: an immediate scalar is copied at creation (changing it
 * later changes nothing); a device scalar is read when the call runs (its
 * value set after creation and before each call counts). Then the ops'
 * lifecycle: destroy right after enqueue, slot reuse, refused uses. */
static int runPreMulSum(member_t* m, gbIsland_t* is, const gbDeviceOps* dev, void* stream) {
  float imm = 0.1f, *devScalar = NULL;
  gbRedOp_t opImm = gbSum, opDev = gbSum, again = gbSum;
  if (dev->memAlloc((void**)&devScalar, sizeof(float)) != gbSuccess) {
    fail(m->sh, "PreMulSum: device allocation failed");
    return 0;
  }
  *devScalar = 7.0f;
  int ok = is->ops->preMulSumCreate(is, &imm, gbFloat32, gbScalarHostImmediate, &opImm) == gbSuccess &&
           is->ops->preMulSumCreate(is, devScalar, gbFloat32, gbScalarDevice, &opDev) == gbSuccess;
  m->checks++;
  if (!ok || (int)opImm < gbNumOps || (int)opDev < gbNumOps || opImm == opDev) {
    fail(m->sh, "PreMulSum create: ok %d, ops %d and %d", ok, (int)opImm, (int)opDev);
    ok = 0;
  }
  char what[128];
  for (int call = 0; ok && call < 8; call++) {
    int useDev = call & 1, kind = (call >> 1) % 3, inPlace = kind == 0 && (call & 4);
    float scale = useDev ? 0.3f + 0.25f * (float)call : 0.1f;
    if (useDev) *devScalar = scale;
    else imm = 9.0f + (float)call; /* copied at creation: no effect */
    snprintf(what, sizeof what, "PreMulSum (%s scalar) %s%s n=%d", useDev ? "device" : "immediate",
             kind == 0 ? "all-reduce" : kind == 1 ? "reduce" : "reduce-scatter",
             inPlace ? " in place" : "", m->sh->n);
    ok = onePreMul(m, is, dev, stream, useDev ? opDev : opImm, scale, kind, inPlace, 140 + call, what);
  }
  if (ok) {
    /* NCCL's rule: an op may be destroyed once the calls using it are queued. */
    float x = 1.5f, y = 0.0f, wantY = 0.1f * 1.5f;
    for (int k = 1; k < m->sh->n; k++) wantY = wantY + 0.1f * 1.5f;
    gbResult_t r1 = is->ops->allReduce(is, &x, &y, 1, gbFloat32, opImm, stream);
    gbResult_t r2 = is->ops->redOpDestroy(is, opImm);
    ok = r1 == gbSuccess && r2 == gbSuccess && syncOk(m, dev, stream, "PreMulSum destroyed after enqueue") &&
         sameBits(m, &y, &wantY, sizeof y, sizeof y, "PreMulSum destroyed after enqueue");
    if (!ok) fail(m->sh, "PreMulSum destroyed after enqueue: enqueue %d, destroy %d", r1, r2);
  }
  if (ok) { /* one after the other: each depends on the one before */
    float x = 1.0f;
    double xd = 1.0;
    ok = expect(m, is->ops->redOpDestroy(is, opImm), gbInvalidArgument, "PreMulSum destroy twice") &&
         expect(m, is->ops->allReduce(is, &x, &x, 1, gbFloat32, opImm, stream), gbInvalidArgument,
                "PreMulSum op used after destroy") &&
         expect(m, is->ops->redOpDestroy(is, gbSum), gbInvalidArgument, "destroy a built-in op") &&
         expect(m, is->ops->reduceScatter(is, &xd, &xd, 1, gbFloat64, opDev, stream), gbInvalidArgument,
                "PreMulSum float32 op on float64") &&
         expect(m, is->ops->preMulSumCreate(is, NULL, gbFloat32, gbScalarDevice, &again),
                gbInvalidArgument, "PreMulSum NULL scalar") &&
         expect(m, is->ops->preMulSumCreate(is, &x, gbFloat32, (gbScalarResidence_t)7, &again),
                gbInvalidArgument, "PreMulSum unknown residence") &&
         expect(m, is->ops->preMulSumCreate(is, &x, gbFloat32, gbScalarHostImmediate, &again), gbSuccess,
                "PreMulSum create again");
    m->checks++;
    if (ok && again != opImm) {
      fail(m->sh, "PreMulSum: a new op got %d, not the freed slot's %d", (int)again, (int)opImm);
      ok = 0;
    }
    ok = ok && expect(m, is->ops->redOpDestroy(is, again), gbSuccess, "PreMulSum destroy") &&
         expect(m, is->ops->redOpDestroy(is, opDev), gbSuccess, "PreMulSum destroy");
  }
  dev->memFree(devScalar);
  return ok && syncOk(m, dev, stream, "PreMulSum");
}

/* ------------------------------------------------------------ a member */

static void* memberMain(void* arg) {
  member_t* m = arg;
  shared_t* sh = m->sh;
  int n = sh->n, me = m->me;
  static const uint8_t secret[GB_NET_SECRET_BYTES] = {9, 8, 7, 6};
  const uint64_t commHash = 0x15a4d000u + (uint64_t)n * 2 + (sh->closer >= 0);
  const int tag = 5;
  const gbNetOps_t* net = &gbNetTcpOps;
  const gbDeviceOps* dev = gbDeviceHostOps();
  gbNetListener_t* lis = NULL;
  gbNetConn_t* conns[MAX_N] = {0};
  int ranks[MAX_N];
  gbAlgoGroup_t g;
  memset(&g, 0, sizeof g);
  gbIsland_t* is = NULL;
  void* stream = NULL;

  const loopbackSpec_t spec = {net, secret, commHash, tag, "island test",
                               n, me, TIMEOUT_SEC, &sh->abortFlag};
  char why[128];
  if (!loopbackListen(&spec, &lis, &sh->addrs[me])) {
    fail(sh, "member %d: cannot listen on loopback", me);
    goto done;
  }
  if (!barrier(sh)) goto done;
  if (!loopbackJoin(&spec, lis, sh->addrs, conns, ranks, &g, why, sizeof why)) {
    fail(sh, "%s", why);
    goto done;
  }
  g.ringMinBytes = RING_MIN_BYTES;
  g.pieceBytes = PIECE_BYTES;

  if (dev->streamCreate(&stream) != gbSuccess) { fail(sh, "member %d: stream create", me); goto done; }
  if (gbIslandHostCreate(&g, dev, onError, m, &is) != gbSuccess) {
    fail(sh, "member %d: island create", me);
    goto done;
  }
  m->checks++;
  if (strcmp(is->ops->name, "host") != 0 || is->size != n || is->index != me) {
    fail(sh, "member %d: island says %s, size %d, index %d", me, is->ops->name, is->size, is->index);
    goto done;
  }

  if (sh->closer >= 0) {
    if (!barrier(sh)) goto done;
    runPeerClosed(m, is, dev, stream, &g);
  } else {
    if (!runArgChecks(m, is)) goto done;
    if (!runAllReduce(m, is, dev, stream)) goto done;
    if (!runReduce(m, is, dev, stream)) goto done;
    if (!runBroadcast(m, is, dev, stream)) goto done;
    if (!runQueued(m, is, dev, stream)) goto done;
    if (!runGatherScatter(m, is, dev, stream)) goto done;
    if (!runSendRecv(m, is, dev, stream)) goto done;
    if (!runPreMulSum(m, is, dev, stream)) goto done;
    m->checks++;
    if (m->errors != 0) fail(sh, "member %d: onError called %d times without a failure", me, m->errors);
  }
  /* Connections stay open until every member is done. */
  barrier(sh);

done:
  if (is != NULL) is->ops->destroy(is);
  if (stream != NULL) dev->streamDestroy(stream);
  gbAlgoGroupFree(&g);
  for (int i = 0; i < n; i++) if (conns[i] != NULL) net->close(conns[i]);
  if (lis != NULL) net->listenerClose(lis);
  return NULL;
}

static int runGroup(int n, int closer) {
  shared_t sh;
  memset(&sh, 0, sizeof sh);
  pthread_mutex_init(&sh.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&sh.cv, &ca);
  pthread_condattr_destroy(&ca);
  sh.n = n;
  sh.closer = closer;
  member_t members[MAX_N];
  pthread_t threads[MAX_N];
  int64_t t0 = gbClockNowNs();
  for (int i = 0; i < n; i++) {
    members[i] = (member_t){&sh, i, 0, gbSuccess, 0};
    if (pthread_create(&threads[i], NULL, memberMain, &members[i]) != 0) {
      fprintf(stderr, "FAIL: cannot start member thread %d\n", i);
      exit(1);
    }
  }
  int checks = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(threads[i], NULL);
    checks += members[i].checks;
  }
  printf("n=%d%s: %d checks, %.2f s, %s\n", n, closer >= 0 ? " (peer closes)" : "", checks,
         (double)(gbClockNowNs() - t0) / 1e9, sh.failed ? "FAILED" : "ok");
  return sh.failed ? 1 : 0;
}

/* -------------------------------------------------- abort while queued */

static atomic_int gate;

static gbResult_t holdStream(void* arg) {
  (void)arg;
  gbDeadline_t d = gbDeadlineIn(TIMEOUT_SEC);
  struct timespec ms = {0, 1000000};
  while (!atomic_load(&gate) && !gbDeadlinePassed(d)) nanosleep(&ms, NULL);
  return gbSuccess;
}

static void noteError(void* ctx, gbResult_t res) {
  (void)ctx;
  (void)res;
}

/* One member: call 0 on stream a waits behind a held task, call 1 on stream
 * b waits for call 0's turn; an abort ends call 1's wait at once. */
static int abortWhileQueued(void) {
  const gbDeviceOps* dev = gbDeviceHostOps();
  atomic_int abortFlag = 0;
  gbAlgoGroup_t g;
  memset(&g, 0, sizeof g);
  g.n = 1;
  g.me = 0;
  g.name = "abort test";
  g.timeoutSec = TIMEOUT_SEC;
  g.abortFlag = &abortFlag;
  gbIsland_t* is = NULL;
  void *a = NULL, *b = NULL;
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  int ok = dev->streamCreate(&a) == gbSuccess && dev->streamCreate(&b) == gbSuccess &&
           gbIslandHostCreate(&g, dev, noteError, NULL, &is) == gbSuccess;
  atomic_store(&gate, 0);
  ok = ok && dev->launchHostFn(a, holdStream, NULL, NULL) == gbSuccess &&
       is->ops->allReduce(is, x, x, 4, gbFloat32, gbSum, a) == gbSuccess &&
       is->ops->allReduce(is, y, y, 4, gbFloat32, gbSum, b) == gbSuccess;
  if (!ok) fprintf(stderr, "test_island_host: abort while queued: set-up failed: %s\n", gbErrorLast());
  int64_t t0 = gbClockNowNs();
  atomic_store(&abortFlag, 1);
  gbResult_t r = ok ? dev->streamSynchronize(b) : gbInternalError;
  double el = (double)(gbClockNowNs() - t0) / 1e9;
  if (ok && (r == gbSuccess || el > 2.0)) {
    fprintf(stderr, "test_island_host: abort while queued: the waiting call ended with %d after %.2f s (its deadline "
            "is %.0f s)\n", (int)r, el, TIMEOUT_SEC);
    ok = 0;
  }
  atomic_store(&gate, 1);
  if (a) (void)dev->streamSynchronize(a);
  if (is) is->ops->destroy(is);
  if (a) dev->streamDestroy(a);
  if (b) dev->streamDestroy(b);
  if (ok) printf("test_island_host: abort while queued: the waiting call ended %.3f s after the abort\n", el);
  return !ok;
}

int main(void) {
  int bad = 0;
  bad |= abortWhileQueued();
  for (int n = 1; n <= MAX_N; n++) bad |= runGroup(n, -1);
  bad |= runGroup(2, 1);
  bad |= runGroup(3, 2);
  if (bad) {
    fprintf(stderr, "test_island_host: FAILED\n");
    return 1;
  }
  printf("test_island_host: all passed\n");
  return 0;
}
