/* net/tcp: connections with 1, 2 and 4 sockets between threads of this
 * process over 127.0.0.1; messages of awkward sizes both ways at once, data
 * checked against patterns computed here; strangers (garbage, a wrong secret,
 * another communicator, bad fields, a short hello, silence, a duplicate) while
 * a real peer connects; a peer that closes mid-message; a silent peer; abort
 * and shutdown from another thread. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/result.h"
#include "net/net.h"
#include "net_pattern.h"
#include "os/socket.h"

static atomic_int failures;
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      atomic_fetch_add(&failures, 1);                                      \
    }                                                                      \
  } while (0)

static const gbNetOps_t* net;
static uint8_t secret[GB_NET_SECRET_BYTES];
static const uint64_t commHash = 0x5eed5eed12345678ull;
static const char* group = "testgroup";

static double secondsSince(int64_t t0) { return (double)(gbClockNowNs() - t0) / 1e9; }

/* ------------------------------------------------------------- log lines */

static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;
static char logText[1 << 16];
static size_t logLen;

static void logHook(int level, const char* line) {
  pthread_mutex_lock(&logMu);
  size_t n = strlen(line);
  if (logLen + n + 2 < sizeof(logText)) {
    memcpy(logText + logLen, line, n);
    logLen += n;
    logText[logLen++] = '\n';
    logText[logLen] = '\0';
  }
  pthread_mutex_unlock(&logMu);
}

static int logCount(const char* needle) {
  int n = 0;
  pthread_mutex_lock(&logMu);
  for (const char* p = strstr(logText, needle); p; p = strstr(p + 1, needle)) n++;
  pthread_mutex_unlock(&logMu);
  return n;
}

static void logClear(void) {
  pthread_mutex_lock(&logMu);
  logLen = 0;
  logText[0] = '\0';
  pthread_mutex_unlock(&logMu);
}

/* -------------------------------------------------------------- helpers */

static gbNetHello_t makeHello(int rank, int tag, int nsocks) {
  gbNetHello_t h;
  memset(&h, 0, sizeof(h));
  h.magic = GB_NET_HELLO_MAGIC;
  memcpy(h.secret, secret, sizeof(secret));
  h.commHash = commHash;
  h.srcRank = rank;
  h.tag = tag;
  h.nsocks = nsocks;
  return h;
}

typedef struct {
  const gbSockAddr_t* addr;
  gbNetHello_t hello;
  int told;
  gbNetCause_t got;
} askArg_t;

static void* askMain(void* arg) {
  askArg_t* a = arg;
  a->told = net->ask(a->addr, &a->hello, gbDeadlineIn(5), &a->got);
  return NULL;
}

static gbNetListener_t* makeListener(gbSockAddr_t* addr) {
  gbSockAddr_t any;
  gbNetListener_t* l = NULL;
  if (gbSockAddrParse("127.0.0.1:0", 0, &any) != gbSuccess || net->listen(&any, secret, commHash, &l) != gbSuccess ||
      net->listenerAddr(l, addr) != gbSuccess) {
    fprintf(stderr, "FAIL: cannot listen: %s\n", gbErrorLast());
    exit(1);
  }
  return l;
}

/* A connected pair in one thread: connect (which completes through the
 * kernel's backlog) then accept. a is the accepting side, p the peer. */
static void makePair(gbNetListener_t* l, const gbSockAddr_t* addr, int peerRank, int tag, int nsocks,
                     gbNetConn_t** a, gbNetConn_t** p) {
  gbNetHello_t h = makeHello(peerRank, tag, nsocks);
  gbNetLabel_t toListener = {0, group, 0}, toPeer = {peerRank, group, 0}; /* one thread: TCP only */
  *a = *p = NULL;
  if (net->connect(addr, &h, toListener, gbDeadlineIn(10), NULL, p) != gbSuccess ||
      net->accept(l, peerRank, tag, toPeer, gbDeadlineIn(10), NULL, a) != gbSuccess) {
    fprintf(stderr, "FAIL: cannot make a pair: %s\n", gbErrorLast());
    exit(1);
  }
}

/* ------------------------------------------------ data in both directions */

static const size_t sizes[] = {0, 1, 7, 65535, 65537, (1u << 20) + 3, 16u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define ROUNDS 40

typedef struct {
  gbNetConn_t* conn;
  int side;   /* 0 or 1: seeds differ per direction */
  int nsocks;
  gbNetListener_t* listener;
  gbSockAddr_t addr;
  int peerRank, tag;
  int shm;    /* set up as a same-host pair (shared-memory rings) */
} side_t;

static uint64_t seedOf(int side, int nsocks, int round, int i) {
  return ((uint64_t)side << 40) ^ ((uint64_t)nsocks << 32) ^ ((uint64_t)round << 8) ^ (uint64_t)i;
}

/* Everything at once (all sizes, both directions), then ROUNDS exchanges in
 * a row; every received byte compared with the pattern the sender used. */
static void exchange(side_t* s) {
  unsigned char *out[NSIZES], *in[NSIZES], *want = malloc(sizes[NSIZES - 1]);
  gbNetReq_t* reqs[2 * NSIZES];
  int n = 0;
  for (size_t i = 0; i < NSIZES; i++) {
    out[i] = malloc(sizes[i] + 1);
    in[i] = malloc(sizes[i] + 1);
    pattern(seedOf(s->side, s->nsocks, 0, (int)i), out[i], sizes[i]);
    memset(in[i], 0xa5, sizes[i] + 1);
  }
  for (size_t i = 0; i < NSIZES; i++) {
    CHECK(net->isend(s->conn, out[i], sizes[i], &reqs[n++]) == gbSuccess, "%s", gbErrorLast());
    CHECK(net->irecv(s->conn, in[i], sizes[i], &reqs[n++]) == gbSuccess, "%s", gbErrorLast());
  }
  gbResult_t r = gbNetWaitAll(reqs, n, gbDeadlineIn(20), NULL);
  CHECK(r == gbSuccess, "side %d nsocks %d: wait: %s", s->side, s->nsocks, gbErrorLast());
  for (size_t i = 0; i < NSIZES && r == gbSuccess; i++) {
    pattern(seedOf(1 - s->side, s->nsocks, 0, (int)i), want, sizes[i]);
    CHECK(memcmp(in[i], want, sizes[i]) == 0, "side %d nsocks %d: %zu bytes differ", s->side, s->nsocks, sizes[i]);
    CHECK(in[i][sizes[i]] == 0xa5, "side %d nsocks %d: wrote past %zu bytes", s->side, s->nsocks, sizes[i]);
  }
  for (int round = 1; round <= ROUNDS && r == gbSuccess; round++) {
    size_t i = (size_t)round % (NSIZES - 1); /* all but 16 MiB */
    pattern(seedOf(s->side, s->nsocks, round, (int)i), out[i], sizes[i]);
    gbNetReq_t* two[2];
    CHECK(net->irecv(s->conn, in[i], sizes[i], &two[0]) == gbSuccess, "%s", gbErrorLast());
    CHECK(net->isend(s->conn, out[i], sizes[i], &two[1]) == gbSuccess, "%s", gbErrorLast());
    r = gbNetWaitAll(two, 2, gbDeadlineIn(30), NULL);
    CHECK(r == gbSuccess, "round %d: %s", round, gbErrorLast());
    pattern(seedOf(1 - s->side, s->nsocks, round, (int)i), want, sizes[i]);
    CHECK(r != gbSuccess || memcmp(in[i], want, sizes[i]) == 0, "round %d: %zu bytes differ", round, sizes[i]);
  }
  for (size_t i = 0; i < NSIZES; i++) {
    free(out[i]);
    free(in[i]);
  }
  free(want);
}

static void* peerMain(void* arg) {
  side_t* s = arg;
  gbNetHello_t h = makeHello(s->peerRank, s->tag, s->nsocks);
  gbNetLabel_t label = {0, group, s->shm};
  if (net->connect(&s->addr, &h, label, gbDeadlineIn(20), NULL, &s->conn) != gbSuccess) {
    CHECK(0, "peer connect: %s", gbErrorLast());
    return NULL;
  }
  exchange(s);
  return NULL;
}

static void testData(void) {
  gbSockAddr_t addr;
  gbNetListener_t* l = makeListener(&addr);
  /* 1, 2, 4 sockets over TCP; then 2 sockets set up as a same-host pair,
   * whose data goes through the shared-memory rings. */
  const int socks[] = {1, 2, 4, 2};
  for (int k = 0; k < 4; k++) {
    int shm = k == 3;
    side_t peer = {NULL, 1, socks[k], l, addr, 1, 100 + k, shm}, me = {NULL, 0, socks[k], l, addr, 1, 100 + k, shm};
    pthread_t t;
    int64_t t0 = gbClockNowNs();
    pthread_create(&t, NULL, peerMain, &peer);
    gbNetLabel_t label = {1, group, shm};
    gbResult_t r = net->accept(l, 1, 100 + k, label, gbDeadlineIn(20), NULL, &me.conn);
    CHECK(r == gbSuccess, "accept: %s", gbErrorLast());
    if (r == gbSuccess) exchange(&me);
    pthread_join(t, NULL);
    printf("  %d socket(s)%s: %zu sizes at once + %d rounds, both ways, in %.2f s\n", socks[k],
           shm ? ", shared memory" : "", NSIZES, ROUNDS, secondsSince(t0));
    net->close(me.conn);
    net->close(peer.conn);
  }

  /* Many connections and many requests in one wait, all in this thread. */
  gbNetConn_t *a[MANY_PAIRS], *p[MANY_PAIRS];
  char why[512];
  for (int c = 0; c < MANY_PAIRS; c++) makePair(l, &addr, 10 + c, 5, c + 1, &a[c], &p[c]);
  CHECK(exchangeInOneWait(net, a, p, why, sizeof(why)) == 0, "%s", why);
  net->listenerClose(l);
}

/* -------------------------------------------------------------- strangers */

/* Waits (serving the listener) until fd reports end of stream or reset;
 * returns the time it happened, or -1 at the deadline. */
static int64_t waitClosed(gbNetListener_t* l, int fd, double seconds) {
  gbDeadline_t d = gbDeadlineIn(seconds);
  char c;
  while (!gbDeadlinePassed(d)) {
    if (net->listenerServe(l) != gbSuccess) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, gbDeadlineRemainingMs(d, 20)) > 0) {
      ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno == ECONNRESET)) return gbClockNowNs();
    }
  }
  return -1;
}

static int rawConnect(const gbSockAddr_t* addr) {
  int fd = -1;
  CHECK(gbSockConnect(addr, gbDeadlineIn(5), NULL, &fd) == gbSuccess, "%s", gbErrorLast());
  return fd;
}

static void rawSend(int fd, const void* buf, size_t len) {
  CHECK(gbSockSendAll(fd, buf, len, gbDeadlineIn(5), NULL, "stranger") == gbSuccess, "%s", gbErrorLast());
}

static void testStrangers(void) {
  gbSockAddr_t addr;
  char addrText[80], line[160];
  logClear();
  gbNetListener_t* l = makeListener(&addr);
  gbSockAddrString(&addr, addrText, sizeof(addrText));
  snprintf(line, sizeof(line), "listening for peers on %s", addrText);
  CHECK(logCount(line) == 1, "no INFO line \"%s\"", line);

  enum { GARBAGE, SECRET, OTHERCOMM, FIELDS, SHORT, SILENT, NSTRANGERS };
  int fd[NSTRANGERS];
  int64_t silentSince = gbClockNowNs();
  for (int i = 0; i < NSTRANGERS; i++) fd[i] = rawConnect(&addr);
  unsigned char junk[100];
  pattern(77, junk, sizeof(junk));
  junk[0] ^= 0x5a; /* whatever the pattern, not the magic's first byte */
  junk[0] = (unsigned char)(junk[0] == (GB_NET_HELLO_MAGIC & 0xff) ? junk[0] + 1 : junk[0]);
  rawSend(fd[GARBAGE], junk, sizeof(junk));
  gbNetHello_t h = makeHello(3, 7, 1);
  h.secret[5] ^= 1;
  rawSend(fd[SECRET], &h, sizeof(h));
  h = makeHello(3, 7, 1);
  h.commHash ^= 1;
  rawSend(fd[OTHERCOMM], &h, sizeof(h));
  h = makeHello(3, 7, 65);
  rawSend(fd[FIELDS], &h, sizeof(h));
  h = makeHello(3, 7, 1);
  rawSend(fd[SHORT], &h, 20);
  shutdown(fd[SHORT], SHUT_WR);

  /* The real peer, with the strangers queued before it. */
  side_t peer = {NULL, 1, 2, l, addr, 3, 7, 0};
  pthread_t t;
  pthread_create(&t, NULL, peerMain, &peer);
  side_t me = {NULL, 0, 2, l, addr, 3, 7, 0};
  gbNetLabel_t label = {3, group, 0};
  gbResult_t r = net->accept(l, 3, 7, label, gbDeadlineIn(20), NULL, &me.conn);
  CHECK(r == gbSuccess, "accept with strangers around: %s", gbErrorLast());
  if (r == gbSuccess) exchange(&me);
  pthread_join(t, NULL);
  net->close(me.conn);
  net->close(peer.conn);

  const char* name[NSTRANGERS] = {"garbage", "wrong secret", "other communicator", "bad fields", "short hello", "silent"};
  for (int i = 0; i < SILENT; i++)
    CHECK(waitClosed(l, fd[i], 5) >= 0, "the %s stranger was not closed", name[i]);
  int64_t closedAt = waitClosed(l, fd[SILENT], 13);
  double after = (double)(closedAt - silentSince) / 1e9;
  CHECK(closedAt >= 0 && after >= 10.0 && after <= 11.5, "silent stranger closed after %.2f s (want 10..11.5)", after);
  for (int i = 0; i < NSTRANGERS; i++) gbSockClose(fd[i]);

  snprintf(line, sizeof(line), "refused a connection from 127.0.0.1:");
  CHECK(logCount(line) == NSTRANGERS, "%d refusals logged, expected %d:\n%s", logCount(line), NSTRANGERS, logText);
  snprintf(line, sizeof(line), "on %s: wrong job secret (not a peer of this job; check GPUBRIDGE_JOB_SECRET", addrText);
  CHECK(logCount(line) == 1, "wrong secret not logged as \"%s\"", line);
  const char* reasons[] = {"bad magic", "another communicator", "bad hello fields", "closed before a full hello",
                           "no hello within 10 s"};
  for (int i = 0; i < 5; i++) CHECK(logCount(reasons[i]) == 1, "reason \"%s\" logged %d times", reasons[i], logCount(reasons[i]));

  /* A duplicate socket: two connections claim (rank 5, tag 9, socket 0). */
  gbNetConn_t *c1, *c2, *a;
  gbNetHello_t dh = makeHello(5, 9, 1);
  gbNetLabel_t toL = {0, group, 0}, toPeer = {5, group, 0};
  CHECK(net->connect(&addr, &dh, toL, gbDeadlineIn(5), NULL, &c1) == gbSuccess, "%s", gbErrorLast());
  CHECK(net->connect(&addr, &dh, toL, gbDeadlineIn(5), NULL, &c2) == gbSuccess, "%s", gbErrorLast());
  /* Serve until both hellos are judged, so the duplicate is seen now. */
  gbDeadline_t d = gbDeadlineIn(5);
  while (logCount("duplicate socket 0 of rank 5") == 0 && !gbDeadlinePassed(d)) {
    net->listenerServe(l);
    struct pollfd p = {-1, 0, 0};
    poll(&p, 0, 5);
  }
  CHECK(logCount("duplicate socket 0 of rank 5") == 1, "duplicate not refused");
  CHECK(net->accept(l, 5, 9, toPeer, gbDeadlineIn(5), NULL, &a) == gbSuccess, "%s", gbErrorLast());
  unsigned char one = 42, got1 = 0, got2 = 0;
  gbNetReq_t *rs, *r1, *r2;
  CHECK(net->isend(a, &one, 1, &rs) == gbSuccess && gbNetWaitAll(&rs, 1, gbDeadlineIn(5), NULL) == gbSuccess, "%s",
        gbErrorLast());
  net->irecv(c1, &got1, 1, &r1);
  net->irecv(c2, &got2, 1, &r2);
  gbResult_t e1 = gbNetWaitAll(&r1, 1, gbDeadlineIn(3), NULL);
  gbResult_t e2 = gbNetWaitAll(&r2, 1, gbDeadlineIn(3), NULL);
  CHECK((e1 == gbSuccess && got1 == 42 && e2 == gbRemoteError) || (e2 == gbSuccess && got2 == 42 && e1 == gbRemoteError),
        "duplicate: results %d/%d, bytes %d/%d", e1, e2, got1, got2);
  net->close(a);
  net->close(c1);
  net->close(c2);
  net->listenerClose(l);
}

/* ----------------------------------------------------------------- faults */

typedef struct {
  atomic_int waiting;
  atomic_int abortFlag;
  int64_t firedAt;
  gbNetConn_t* shutConn;
} aborter_t;

static void* aborterMain(void* arg) {
  aborter_t* a = arg;
  gbDeadline_t d = gbDeadlineIn(10);
  while (!atomic_load(&a->waiting) && !gbDeadlinePassed(d)) {
    struct pollfd p = {-1, 0, 0};
    poll(&p, 0, 1);
  }
  /* A delay, not a synchronisation: the wait should be inside poll() when
   * the flag flips; the checks hold either way. */
  struct timespec ts = {0, 200 * 1000000};
  nanosleep(&ts, NULL);
  a->firedAt = gbClockNowNs();
  if (a->shutConn) net->shutdown(a->shutConn, NULL);
  else atomic_store_explicit(&a->abortFlag, 1, memory_order_relaxed);
  return NULL;
}

static void testFaults(void) {
  gbSockAddr_t addr;
  gbNetListener_t* l = makeListener(&addr);
  gbNetConn_t *a, *p;
  char want[256];

  /* The peer sends part of a message, then closes. */
  makePair(l, &addr, 4, 1, 2, &a, &p);
  size_t big = 1u << 20, part = 300u << 10;
  unsigned char* buf = malloc(big);
  pattern(1, buf, part);
  gbNetReq_t *rr, *rs;
  CHECK(net->irecv(a, buf, big, &rr) == gbSuccess, "%s", gbErrorLast());
  CHECK(net->isend(p, buf, part, &rs) == gbSuccess, "%s", gbErrorLast());
  int doneS = 0, doneR = 0;
  gbDeadline_t d = gbDeadlineIn(10);
  while (!doneS && !gbDeadlinePassed(d)) {
    CHECK(net->test(rs, &doneS) == gbSuccess, "%s", gbErrorLast());
    CHECK(net->test(rr, &doneR) == gbSuccess && !doneR, "receive finished early");
  }
  CHECK(doneS, "partial send did not finish");
  net->close(p);
  int64_t t0 = gbClockNowNs();
  gbResult_t r = gbNetWaitAll(&rr, 1, gbDeadlineIn(10), NULL);
  CHECK(r == gbRemoteError && secondsSince(t0) < 1.0, "peer closed: %d after %.2f s", r, secondsSince(t0));
  snprintf(want, sizeof(want), "%s: rank 4 closed the connection while this rank was receiving %zu bytes", group, big);
  CHECK(strstr(gbErrorLast(), want) != NULL, "message \"%s\" lacks \"%s\"", gbErrorLast(), want);
  gbNetReq_t* later;
  CHECK(net->isend(a, buf, 10, &later) == gbRemoteError, "a broken connection accepted a send");
  CHECK(net->test(rr, &doneR) == gbRemoteError && !doneR, "a broken connection's request did not keep the error");
  net->close(a);
  free(buf);

  /* A silent peer: the wait ends at the deadline with a timeout. */
  makePair(l, &addr, 4, 2, 1, &a, &p);
  unsigned char four[4];
  CHECK(net->irecv(a, four, 4, &rr) == gbSuccess, "%s", gbErrorLast());
  t0 = gbClockNowNs();
  r = gbNetWaitAll(&rr, 1, gbDeadlineIn(0.5), NULL);
  double el = secondsSince(t0);
  CHECK(r == gbTimeout && el >= 0.5 && el <= 1.5, "silent peer: %d after %.2f s (deadline 0.5 s)", r, el);
  snprintf(want, sizeof(want), "%s: no progress from rank 4 within", group);
  CHECK(strstr(gbErrorLast(), want) && strstr(gbErrorLast(), "receiving 4 bytes") && strstr(gbErrorLast(), "GPUBRIDGE_TIMEOUT"),
        "timeout message: %s", gbErrorLast());

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

  /* Shutdown from another thread: this wait ends, and the peer sees the end. */
  aborter_t sh = {0};
  sh.shutConn = a;
  pthread_create(&t, NULL, aborterMain, &sh);
  atomic_store(&sh.waiting, 1);
  r = gbNetWaitAll(&rr, 1, gbDeadlineIn(20), NULL);
  back = gbClockNowNs();
  pthread_join(t, NULL);
  late = (double)(back - sh.firedAt) / 1e9;
  CHECK(r == gbRemoteError && late < 0.5, "shutdown: %d, %.3f s after it", r, late);
  CHECK(strstr(gbErrorLast(), "shut down by this rank") != NULL, "shutdown message: %s", gbErrorLast());
  CHECK(net->irecv(p, four, 4, &rr) == gbSuccess, "%s", gbErrorLast());
  CHECK(gbNetWaitAll(&rr, 1, gbDeadlineIn(5), NULL) == gbRemoteError, "peer of a shut connection: %s", gbErrorLast());
  net->close(a);
  net->close(p);

  /* Several silent peers: the message names the first and every other one. */
  gbNetConn_t *a5, *p5, *a6, *p6;
  makePair(l, &addr, 5, 5, 1, &a5, &p5);
  makePair(l, &addr, 6, 6, 1, &a6, &p6);
  unsigned char eight[8];
  gbNetReq_t* three[3];
  CHECK(net->irecv(a5, four, 4, &three[0]) == gbSuccess && net->irecv(a6, eight, 4, &three[1]) == gbSuccess &&
            net->irecv(a6, eight + 4, 4, &three[2]) == gbSuccess, "%s", gbErrorLast());
  r = gbNetWaitAll(three, 3, gbDeadlineIn(0.3), NULL);
  CHECK(r == gbTimeout && strstr(gbErrorLast(), "no progress from rank 5 within") &&
            strstr(gbErrorLast(), "(and 2 more pending, from rank 6; is it stopped"),
        "several silent peers: %s", gbErrorLast());
  net->close(a5);
  net->close(p5);
  net->close(a6);
  net->close(p6);

  /* Nobody connects: accept times out naming the rank and group. */
  t0 = gbClockNowNs();
  gbNetLabel_t label = {99, group, 0};
  r = net->accept(l, 99, 0, label, gbDeadlineIn(0.3), NULL, &a);
  el = secondsSince(t0);
  CHECK(r == gbTimeout && el >= 0.3 && el <= 1.3, "accept: %d after %.2f s", r, el);
  snprintf(want, sizeof(want), "rank 99 did not connect (group %s) within", group);
  CHECK(strstr(gbErrorLast(), want) != NULL, "accept message: %s", gbErrorLast());
  net->listenerClose(l);
}

/* ------------------------------------------------ telling and asking why */

static void testTellAsk(void) {
  gbSockAddr_t addr;
  gbNetListener_t* l = makeListener(&addr);
  gbNetHello_t q = makeHello(7, GB_NET_TAG_ASK, 1);
  gbNetCause_t got, why = {.faultRank = 3, .seenBy = 2, .code = gbTimeout};
  snprintf(why.text, sizeof(why.text), "world: no progress from rank 3");

  /* Not failed: the question stays unanswered until the asker's deadline. */
  int64_t t0 = gbClockNowNs();
  int told = net->ask(&addr, &q, gbDeadlineIn(0.3), &got);
  double el = secondsSince(t0);
  CHECK(!told && el >= 0.3 && el <= 1.3, "a healthy listener: told %d after %.2f s", told, el);

  /* Failing: asked while it fails or after, the answer is the cause. */
  q.srcRank = 8;
  askArg_t before = {&addr, q, 0, {0}};
  pthread_t t;
  pthread_create(&t, NULL, askMain, &before);
  net->listenerFail(l, &why);
  pthread_join(t, NULL);
  q.srcRank = 9;
  told = net->ask(&addr, &q, gbDeadlineIn(5), &got);
  CHECK(before.told && before.got.faultRank == 3 && before.got.seenBy == 2 && before.got.code == gbTimeout &&
            strcmp(before.got.text, why.text) == 0,
        "asked while it fails: told %d, cause %d/%d/%d '%s'", before.told, before.got.faultRank,
        before.got.seenBy, before.got.code, before.got.text);
  CHECK(told && got.faultRank == 3 && got.seenBy == 2 && strcmp(got.text, why.text) == 0,
        "asked after the failure: told %d, cause %d/%d '%s'", told, got.faultRank, got.seenBy, got.text);

  /* Told: an accept of the teller fails at once with the cause it carries. */
  gbNetListener_t* l2 = makeListener(&addr);
  gbNetHello_t tell = makeHello(2, GB_NET_TAG_TELL, 1);
  gbNetCause_t died = {.faultRank = 0, .seenBy = 2, .code = gbRemoteError};
  snprintf(died.text, sizeof(died.text), "world: rank 0 closed the connection");
  net->tell(&addr, &tell, &died, gbDeadlineIn(5));
  gbNetLabel_t from2 = {2, group, 0};
  gbNetConn_t* none = NULL;
  t0 = gbClockNowNs();
  gbResult_t r = net->accept(l2, 2, 1, from2, gbDeadlineIn(10), NULL, &none);
  el = secondsSince(t0);
  char want[256];
  snprintf(want, sizeof(want), "%s: rank 0 failed (seen by rank 2, which told this rank instead of connecting: "
           "world: rank 0 closed the connection)", group);
  CHECK(r == gbRemoteError && none == NULL && el < 2.0 && strcmp(gbErrorLast(), want) == 0,
        "accept of a rank that told: %d after %.2f s: %s", r, el, gbErrorLast());
  net->listenerClose(l2);

  /* Gone: no answer, at once. */
  net->listenerClose(l);
  t0 = gbClockNowNs();
  told = net->ask(&addr, &q, gbDeadlineIn(5), &got);
  CHECK(!told && secondsSince(t0) < 1.0, "a closed listener: told %d after %.2f s", told, secondsSince(t0));
}

int main(void) {
  /* The listener's INFO line is checked; see only NET's. */
  setenv("GPUBRIDGE_DEBUG", "INFO", 1);
  setenv("GPUBRIDGE_DEBUG_SUBSYS", "NET", 1);
  gbLogSetHook(logHook);
  net = gbNetGet(gbTransportTcp);
  CHECK(net != NULL && strcmp(net->name, "tcp") == 0, "gbNetGet(tcp)");
  CHECK(gbNetGet(gbNumTransports) == NULL && gbNetGet(-1) == NULL, "gbNetGet of an unknown transport");
  if (gbRandomBytes(secret, sizeof(secret)) != gbSuccess) return 1;
  int64_t t0 = gbClockNowNs();
  testData();
  printf("data: %.2f s\n", secondsSince(t0));
  testFaults();
  printf("faults: %.2f s\n", secondsSince(t0));
  testStrangers();
  printf("strangers: %.2f s\n", secondsSince(t0));
  testTellAsk();
  printf("tell and ask: %.2f s\n", secondsSince(t0));
  if (atomic_load(&failures)) {
    fprintf(stderr, "test_net_tcp: %d check(s) failed\n", atomic_load(&failures));
    return 1;
  }
  printf("test_net_tcp: all checks passed\n");
  return 0;
}
