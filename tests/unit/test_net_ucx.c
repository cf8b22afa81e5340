/* net/ucx: connections between threads of this process over 127.0.0.1
 * (UCX's tcp transport, peer-failure mode); messages of awkward sizes both
 * ways at once, data checked against patterns computed here; many
 * connections in one wait; a peer that closes, a silent peer, abort and
 * shutdown from another thread, and the messages each gives. Skips (77)
 * where UCX is not installed. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/result.h"
#include "check.h"
#include "net/net.h"
#include "net_pattern.h"


static const gbNetOps_t* net;
static uint8_t secret[GB_NET_SECRET_BYTES];
static const uint64_t commHash = 0x5eed5eed0cc0cc0cull;
static const char* group = "testgroup";

static double secondsSince(int64_t t0) { return (double)(gbClockNowNs() - t0) / 1e9; }

static gbNetListener_t* makeListener(gbSockAddr_t* addr) {
  gbSockAddr_t any;
  gbNetListener_t* l = NULL;
  if (gbSockAddrParse("127.0.0.1:0", 0, &any) != gbSuccess || net->listen(&any, secret, commHash, &l) != gbSuccess ||
      net->listenerAddr(l, addr) != gbSuccess) {
    if (strstr(gbErrorLast(), "UCX did not load")) {
      printf("SKIP: %s\n", gbErrorLast());
      exit(77);
    }
    fprintf(stderr, "FAIL: cannot listen: %s\n", gbErrorLast());
    exit(1);
  }
  return l;
}

typedef struct {
  gbSockAddr_t addr;
  int rank, tag;
  gbNetConn_t* conn;
  gbResult_t res;
} connector_t;

static void* connectMain(void* arg) {
  connector_t* k = arg;
  gbNetHello_t h;
  memset(&h, 0, sizeof(h));
  h.magic = GB_NET_HELLO_MAGIC;
  memcpy(h.secret, secret, sizeof(secret));
  h.commHash = commHash;
  h.srcRank = k->rank;
  h.tag = k->tag;
  h.nsocks = 2; /* the transport uses one control socket whatever this says */
  gbNetLabel_t toListener = {0, group, 0};
  k->res = net->connect(&k->addr, &h, toListener, gbDeadlineIn(20), NULL, &k->conn);
  return NULL;
}

/* A connected pair: the connecting side in a thread (UCX's set-up needs
 * both sides at once). a accepts; p is the peer, rank peerRank. */
static void makePair(gbNetListener_t* l, const gbSockAddr_t* addr, int peerRank, int tag, gbNetConn_t** a,
                     gbNetConn_t** p) {
  connector_t k = {*addr, peerRank, tag, NULL, gbSuccess};
  pthread_t t;
  pthread_create(&t, NULL, connectMain, &k);
  gbNetLabel_t toPeer = {peerRank, group, 0};
  gbResult_t r = net->accept(l, peerRank, tag, toPeer, gbDeadlineIn(20), NULL, a);
  pthread_join(t, NULL);
  if (r != gbSuccess || k.res != gbSuccess) {
    fprintf(stderr, "FAIL: cannot make a pair: accept %d, connect %d: %s\n", r, k.res, gbErrorLast());
    exit(1);
  }
  *p = k.conn;
}

/* ------------------------------------------------ data in both directions */

static const size_t sizes[] = {0, 1, 7, 8191, 65537, (1u << 20) + 3, 16u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define ROUNDS 40

typedef struct {
  gbNetConn_t* conn;
  int side;
} side_t;

/* Everything at once (all sizes, both directions), then ROUNDS exchanges
 * in a row, every byte compared with the sender's pattern. */
static void* exchange(void* arg) {
  side_t* s = arg;
  unsigned char *out[NSIZES], *in[NSIZES], *want = malloc(sizes[NSIZES - 1]);
  gbNetReq_t* reqs[2 * NSIZES];
  int n = 0;
  for (size_t i = 0; i < NSIZES; i++) {
    out[i] = malloc(sizes[i] + 1);
    in[i] = malloc(sizes[i] + 1);
    pattern(((uint64_t)s->side << 32) ^ i, out[i], sizes[i]);
    memset(in[i], 0xa5, sizes[i] + 1);
  }
  for (size_t i = 0; i < NSIZES; i++) {
    CHECK(net->isend(s->conn, out[i], sizes[i], &reqs[n++]) == gbSuccess, "%s", gbErrorLast());
    CHECK(net->irecv(s->conn, in[i], sizes[i], &reqs[n++]) == gbSuccess, "%s", gbErrorLast());
  }
  gbResult_t r = gbNetWaitAll(reqs, n, gbDeadlineIn(30), NULL);
  CHECK(r == gbSuccess, "side %d: wait: %s", s->side, gbErrorLast());
  for (size_t i = 0; i < NSIZES && r == gbSuccess; i++) {
    pattern(((uint64_t)(1 - s->side) << 32) ^ i, want, sizes[i]);
    CHECK(memcmp(in[i], want, sizes[i]) == 0, "side %d: %zu bytes differ", s->side, sizes[i]);
    CHECK(in[i][sizes[i]] == 0xa5, "side %d: wrote past %zu bytes", s->side, sizes[i]);
  }
  for (int round = 1; round <= ROUNDS && r == gbSuccess; round++) {
    size_t i = (size_t)round % (NSIZES - 1);
    pattern(((uint64_t)s->side << 32) ^ ((uint64_t)round << 8) ^ i, out[i], sizes[i]);
    gbNetReq_t* two[2];
    CHECK(net->irecv(s->conn, in[i], sizes[i], &two[0]) == gbSuccess, "%s", gbErrorLast());
    CHECK(net->isend(s->conn, out[i], sizes[i], &two[1]) == gbSuccess, "%s", gbErrorLast());
    r = gbNetWaitAll(two, 2, gbDeadlineIn(30), NULL);
    CHECK(r == gbSuccess, "round %d: %s", round, gbErrorLast());
    pattern(((uint64_t)(1 - s->side) << 32) ^ ((uint64_t)round << 8) ^ i, want, sizes[i]);
    CHECK(r != gbSuccess || memcmp(in[i], want, sizes[i]) == 0, "round %d: %zu bytes differ", round, sizes[i]);
  }
  for (size_t i = 0; i < NSIZES; i++) {
    free(out[i]);
    free(in[i]);
  }
  free(want);
  return NULL;
}

static void testData(void) {
  gbSockAddr_t addr;
  gbNetListener_t* l = makeListener(&addr);
  gbNetConn_t *a, *p;
  makePair(l, &addr, 1, 100, &a, &p);
  side_t me = {a, 0}, peer = {p, 1};
  pthread_t t;
  int64_t t0 = gbClockNowNs();
  pthread_create(&t, NULL, exchange, &peer);
  exchange(&me);
  pthread_join(t, NULL);
  printf("  %zu sizes at once + %d rounds, both ways, in %.2f s\n", NSIZES, ROUNDS, secondsSince(t0));
  net->close(a);
  net->close(p);

  /* Many connections and requests in one wait, all in this thread. */
  gbNetConn_t *as[MANY_PAIRS], *ps[MANY_PAIRS];
  char why[512];
  for (int c = 0; c < MANY_PAIRS; c++) makePair(l, &addr, 10 + c, 5, &as[c], &ps[c]);
  CHECK(exchangeInOneWait(net, as, ps, why, sizeof(why)) == 0, "%s", why);
  net->listenerClose(l);
}

/* ----------------------------------------------------------------- faults */

typedef struct {
  atomic_int waiting;
  atomic_int abortFlag;
  int64_t firedAt;
  gbNetConn_t* shutConn;
  const gbNetCause_t* cause;
} aborter_t;

static void* aborterMain(void* arg) {
  aborter_t* a = arg;
  gbDeadline_t d = gbDeadlineIn(10);
  while (!atomic_load(&a->waiting) && !gbDeadlinePassed(d)) poll(NULL, 0, 1);
  /* A delay, not a synchronisation: the wait should be inside poll() when
   * the flag flips; the checks hold either way. */
  struct timespec ts = {0, 200 * 1000000};
  nanosleep(&ts, NULL);
  a->firedAt = gbClockNowNs();
  if (a->shutConn) net->shutdown(a->shutConn, a->cause);
  else atomic_store_explicit(&a->abortFlag, 1, memory_order_relaxed);
  return NULL;
}

static void testFaults(void) {
  gbSockAddr_t addr;
  gbNetListener_t* l = makeListener(&addr);
  gbNetConn_t *a, *p;
  char want[256];

  /* The peer closes while this side waits for a message. */
  makePair(l, &addr, 4, 1, &a, &p);
  size_t big = 1u << 20;
  unsigned char* buf = malloc(big);
  gbNetReq_t* rr;
  CHECK(net->irecv(a, buf, big, &rr) == gbSuccess, "%s", gbErrorLast());
  net->close(p);
  int64_t t0 = gbClockNowNs();
  gbResult_t r = gbNetWaitAll(&rr, 1, gbDeadlineIn(10), NULL);
  CHECK(r == gbRemoteError && secondsSince(t0) < 2.0, "peer closed: %d after %.2f s", r, secondsSince(t0));
  snprintf(want, sizeof(want), "%s: rank 4 closed the connection while this rank was receiving %zu bytes", group, big);
  CHECK(strstr(gbErrorLast(), want) != NULL, "message \"%s\" lacks \"%s\"", gbErrorLast(), want);
  gbNetCause_t cause;
  CHECK(gbNetFailureCause(gbErrorLast(), &cause) && cause.faultRank == 4, "the failure blames rank 4");
  gbNetReq_t* later;
  CHECK(net->isend(a, buf, 10, &later) == gbRemoteError, "a broken connection accepted a send");
  net->close(a);
  free(buf);

  /* A silent peer: the wait ends at the deadline with a timeout. */
  makePair(l, &addr, 4, 2, &a, &p);
  unsigned char four[4];
  CHECK(net->irecv(a, four, 4, &rr) == gbSuccess, "%s", gbErrorLast());
  t0 = gbClockNowNs();
  r = gbNetWaitAll(&rr, 1, gbDeadlineIn(0.5), NULL);
  double el = secondsSince(t0);
  CHECK(r == gbTimeout && el >= 0.5 && el <= 1.5, "silent peer: %d after %.2f s (deadline 0.5 s)", r, el);
  snprintf(want, sizeof(want), "%s: no progress from rank 4 within", group);
  CHECK(strstr(gbErrorLast(), want) && strstr(gbErrorLast(), "receiving 4 bytes"), "timeout message: %s",
        gbErrorLast());

  /* Abort from another thread: the wait returns promptly. */
  aborter_t ab = {0};
  pthread_t t;
  pthread_create(&t, NULL, aborterMain, &ab);
  atomic_store(&ab.waiting, 1);
  r = gbNetWaitAll(&rr, 1, gbDeadlineIn(20), &ab.abortFlag);
  int64_t back = gbClockNowNs();
  pthread_join(t, NULL);
  double late = (double)(back - ab.firedAt) / 1e9;
  CHECK(r == gbRemoteError && ab.firedAt > 0 && late < 0.5, "abort: %d, %.3f s after the flag", r, late);
  CHECK(strstr(gbErrorLast(), "aborted") != NULL, "abort message: %s", gbErrorLast());

  /* Shutdown from another thread, with the cause (rank 7 failed, seen by
   * this side, rank 0 to the peer): this wait ends, and the peer hears the
   * cause on the control socket while the endpoint is still open. */
  gbNetCause_t seven = {.faultRank = 7, .seenBy = 0, .code = gbTimeout};
  snprintf(seven.text, sizeof(seven.text), "rank 7 stalled in an all-reduce");
  aborter_t sh = {0};
  sh.shutConn = a;
  sh.cause = &seven;
  pthread_create(&t, NULL, aborterMain, &sh);
  atomic_store(&sh.waiting, 1);
  r = gbNetWaitAll(&rr, 1, gbDeadlineIn(20), NULL);
  back = gbClockNowNs();
  pthread_join(t, NULL);
  late = (double)(back - sh.firedAt) / 1e9;
  CHECK(r == gbRemoteError && late < 0.5, "shutdown: %d, %.3f s after it", r, late);
  CHECK(strstr(gbErrorLast(), "shut down by this rank") != NULL, "shutdown message: %s", gbErrorLast());
  CHECK(net->irecv(p, four, 4, &rr) == gbSuccess, "%s", gbErrorLast());
  t0 = gbClockNowNs();
  r = gbNetWaitAll(&rr, 1, gbDeadlineIn(5), NULL);
  CHECK(r == gbRemoteError && secondsSince(t0) < 2.0, "peer of a shut connection: %d after %.2f s: %s", r,
        secondsSince(t0), gbErrorLast());
  snprintf(want, sizeof(want), "%s: rank 7 failed (seen by rank 0, which then shut its connection to this rank "
           "down: rank 7 stalled in an all-reduce)", group);
  CHECK(strstr(gbErrorLast(), want) != NULL, "the peer's message \"%s\" lacks \"%s\"", gbErrorLast(), want);
  CHECK(gbNetFailureCause(gbErrorLast(), &cause) && cause.faultRank == 7, "the peer blames rank 7");
  net->close(a);
  net->close(p);

  /* Nobody connects: accept times out naming the rank and group. */
  t0 = gbClockNowNs();
  gbNetLabel_t label = {99, group, 0};
  r = net->accept(l, 99, 0, label, gbDeadlineIn(0.3), NULL, &a);
  el = secondsSince(t0);
  CHECK(r == gbTimeout && el >= 0.3 && el <= 1.3, "accept: %d after %.2f s", r, el);
  net->listenerClose(l);
}

/* A listener that failed refuses a connection with the cause it holds: the
 * connecting side's failure blames the rank the cause names (3), not the
 * listener's rank (0) that refused. */
static void testRefusedWithCause(void) {
  gbSockAddr_t addr;
  gbNetListener_t* l = makeListener(&addr);
  gbNetCause_t why = {.faultRank = 3, .seenBy = 2, .code = gbTimeout};
  snprintf(why.text, sizeof(why.text), "world: no progress from rank 3");
  net->listenerFail(l, &why);
  connector_t k = {addr, 8, 1, NULL, gbSuccess};
  int64_t t0 = gbClockNowNs();
  connectMain(&k);
  gbNetCause_t got = {0};
  int noted = gbNetFailureCause(gbErrorLast(), &got);
  CHECK(k.res != gbSuccess && k.conn == NULL && secondsSince(t0) < 5.0, "connect to a failed listener: %d after "
        "%.2f s: %s", k.res, secondsSince(t0), gbErrorLast());
  CHECK(noted && got.faultRank == 3 && got.seenBy == 2 && strcmp(got.text, why.text) == 0,
        "the refusal's cause is noted: %d, rank %d seen by %d, '%s' (error: %s)", noted, got.faultRank, got.seenBy,
        got.text, gbErrorLast());
  net->listenerClose(l);
}

int main(void) {
  net = gbNetGet(gbTransportUcx);
  CHECK(net != NULL && strcmp(net->name, "ucx") == 0, "gbNetGet(ucx)");
  if (gbRandomBytes(secret, sizeof(secret)) != gbSuccess) return 1;
  int64_t t0 = gbClockNowNs();
  testData();
  printf("data: %.2f s\n", secondsSince(t0));
  testFaults();
  testRefusedWithCause();
  printf("faults: %.2f s\n", secondsSince(t0));
  if (failures) {
    fprintf(stderr, "test_net_ucx: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_net_ucx: all checks passed\n");
  return 0;
}
