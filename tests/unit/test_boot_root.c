/* The rendezvous root over real sockets: a probe that holds the job secret
 * but carries fields out of range (a negative or huge world size,
 * unterminated strings) gets a verdict naming it, never a crash; the root
 * stops listening before it sends its verdict, so a rank that retries init
 * at once cannot reach a root on its way out; every probe is acknowledged at
 * once, long before the verdict; a root that no rank will ever reach (its
 * id was never shared) ends soon after gbBootRootStop and stops listening,
 * where it would otherwise wait for ranks as long as the process lives. */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/result.h"
#include "boot/probe.h"
#include "boot/root.h"
#include "boot/topology.h"
#include "boot/uniqueid.h"
#include "check.h"

typedef struct {
  gbNetHello_t hello;
  gbProbe_t probe;
} msg_t;

static gbBootId_t id;

static void startRoot(int timeoutSec) {
  (void)timeoutSec;
  gbSockAddr_t any;
  CHECK(gbSockAddrParse("127.0.0.1", 0, &any) == gbSuccess, "%s", gbErrorLast());
  CHECK(gbRandomBytes(id.secret, sizeof(id.secret)) == gbSuccess, "%s", gbErrorLast());
  CHECK(gbBootRootStart(&any, id.secret, gbBootIdHash(&id), &id.root) == gbSuccess, "%s", gbErrorLast());
}

static void makeMsg(msg_t* m, int rank, int nranks, int timeoutSec) {
  memset(m, 0, sizeof(*m));
  m->hello.magic = GB_NET_HELLO_MAGIC;
  memcpy(m->hello.secret, id.secret, GB_NET_SECRET_BYTES);
  m->hello.commHash = gbBootIdHash(&id);
  m->hello.srcRank = rank;
  m->hello.tag = GB_BOOT_ROOT_TAG;
  m->hello.nsocks = 1;
  gbProbe_t* p = &m->probe;
  p->magic = GB_PROBE_MAGIC;
  p->version = GB_PROBE_VERSION;
  p->rank = rank;
  p->nranks = nranks;
  p->pid = 5000 + rank;
  p->runKind = gbRunSimulated;
  p->libVersion = GB_VERSION_CODE;
  p->gpuIndex = -1;
  snprintf(p->host, sizeof(p->host), "testhost");
  snprintf(p->vendor, sizeof(p->vendor), "nvidia");
  p->settings = (gbSettings_t){.policy = gbPolicyAuto, .transport = gbTransportTcp, .timeoutSec = timeoutSec,
                               .nsocks = 1, .stagingSlots = 4, .checkCalls = 2, .chunkBytes = 1 << 20,
                               .ringMinBytes = 65536};
  CHECK(gbSockAddrParse("127.0.0.1", 40000 + rank % 20000, &p->listenAddr) == gbSuccess, "%s", gbErrorLast());
}

static int connectTo(const gbSockAddr_t* a, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  if (connect(fd, (const struct sockaddr*)&a->sa, a->len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Reads the acknowledgement, then a failure verdict; returns its result
 * (-1: none) and its text. */
static int readVerdict(int fd, char* text, size_t len, double seconds) {
  gbVerdictHeader_t h;
  uint32_t ack = 0;
  text[0] = '\0';
  int64_t sent = gbClockNowNs();
  if (gbSockRecvAll(fd, &ack, sizeof(ack), gbDeadlineIn(seconds), NULL, "acknowledgement") != gbSuccess) return -1;
  double ackSec = (double)(gbClockNowNs() - sent) / 1e9;
  CHECK(ack == GB_BOOT_PROBE_ACK, "the root's acknowledgement is %08x, want %08x", ack, GB_BOOT_PROBE_ACK);
  CHECK(ackSec < GB_BOOT_ACK_SECONDS, "the acknowledgement took %.2f s, ranks wait %.1f s", ackSec,
        GB_BOOT_ACK_SECONDS);
  if (gbSockRecvAll(fd, &h, sizeof(h), gbDeadlineIn(seconds), NULL, "verdict") != gbSuccess) return -1;
  if (h.magic != GB_BOOT_VERDICT_MAGIC || h.textLen >= len) return -1;
  if (gbSockRecvAll(fd, text, h.textLen, gbDeadlineIn(seconds), NULL, "verdict text") != gbSuccess) return -1;
  text[h.textLen] = '\0';
  return h.result;
}

/* One probe with the secret and a field out of range, alone: the verdict
 * comes within the root's grace (2 s), names the field, and the root ends. */
static void malformed(const char* what, void (*breakIt)(gbProbe_t*), const char* words) {
  startRoot(30);
  msg_t m;
  makeMsg(&m, 1, 4, 30);
  breakIt(&m.probe);
  int fd = connectTo(&id.root, 0);
  CHECK(fd >= 0, "%s: cannot connect to the root", what);
  int64_t t0 = gbClockNowNs();
  CHECK(gbSockSendAll(fd, &m, sizeof(m), gbDeadlineIn(5), NULL, "probe") == gbSuccess, "%s", gbErrorLast());
  char text[4096];
  int res = readVerdict(fd, text, sizeof(text), 10);
  double took = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(res == gbInvalidUsage, "%s: verdict result %d, want gbInvalidUsage (%s)", what, res, text);
  CHECK(strstr(text, "malformed probe") && strstr(text, words), "%s: want \"%s\" in: %s", what, words, text);
  CHECK(took < 5.0, "%s: the verdict took %.1f s (the root waits 2 s after a malformed probe)", what, took);
  close(fd);
  gbBootRootWait(gbBootIdHash(&id), gbDeadlineIn(10), NULL);
}

static void negWorld(gbProbe_t* p) { p->nranks = -5; }
static void hugeWorld(gbProbe_t* p) {
  p->nranks = INT_MAX;
  memset(p->host, 'h', sizeof(p->host));
}
static void strings(gbProbe_t* p) {
  memset(p->vendor, 'v', sizeof(p->vendor));
  memset(p->gpuUuid, 'u', sizeof(p->gpuUuid));
  memset(p->problems, 'x', sizeof(p->problems));
}
static void timeout(gbProbe_t* p) { p->settings.timeoutSec = INT_MIN; }

/* N ranks; the first never reads and has a tiny receive buffer, so the
 * root's verdict to it stalls while the others wait their turn. Meanwhile
 * nobody can connect to the root: its listener closed before the verdicts. */
static void closedBeforeVerdict(void) {
  enum { N = 300 };
  startRoot(3);
  static int fds[N];
  static msg_t m;
  for (int r = 0; r < N; r++) {
    fds[r] = connectTo(&id.root, r == 0 ? 1 : 0);
    CHECK(fds[r] >= 0, "rank %d cannot connect", r);
    makeMsg(&m, r, N, 3);
    CHECK(gbSockSendAll(fds[r], &m, sizeof(m), gbDeadlineIn(5), NULL, "probe") == gbSuccess, "%s", gbErrorLast());
  }
  /* The verdict has begun once bytes past the acknowledgement reach rank 0
   * (peeked, not read). */
  gbDeadline_t d = gbDeadlineIn(10);
  char c[sizeof(uint32_t) + 1];
  while (recv(fds[0], c, sizeof(c), MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof(c) && !gbDeadlinePassed(d)) {
    struct pollfd p = {fds[0], POLLIN, 0};
    poll(&p, 1, 20);
  }
  CHECK(!gbDeadlinePassed(d), "no verdict began within 10 s");
  int late = connectTo(&id.root, 0);
  CHECK(late < 0 && errno == ECONNREFUSED,
        "a connection made while the root sends its verdicts %s; it must be refused (the listener closes first)",
        late >= 0 ? "was accepted" : strerror(errno));
  if (late >= 0) close(late);
  for (int r = 0; r < N; r++) close(fds[r]);
  gbBootRootWait(gbBootIdHash(&id), gbDeadlineIn(10), NULL);
}

static void stopped(void) {
  startRoot(0);
  uint64_t hash = gbBootIdHash(&id);
  /* Running: a wait for its verdict ends only at its deadline. */
  int64_t t0 = gbClockNowNs();
  gbBootRootWait(hash, gbDeadlineIn(0.3), NULL);
  double el = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(el >= 0.25, "a root nobody reached ended by itself after %.2f s", el);
  gbBootRootStop(hash);
  t0 = gbClockNowNs();
  gbBootRootWait(hash, gbDeadlineIn(10), NULL);
  el = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(el < 2.0, "gbBootRootStop: the root still ran %.2f s later", el);
  int fd = -1, err = gbSockConnectOnce(&id.root, gbDeadlineIn(1), NULL, &fd);
  CHECK(err == ECONNREFUSED, "a stopped root: connecting gave errno %d, not ECONNREFUSED", err);
  if (err == 0) close(fd);
}

int main(void) {
  malformed("negative world size", negWorld, "world size -5 is not in [1, 4096]");
  malformed("huge world size, unterminated host", hugeWorld, "host name is not terminated");
  malformed("unterminated strings", strings, "is not terminated");
  malformed("negative timeout", timeout, "timeout -2147483648 s");
  closedBeforeVerdict();
  stopped();
  if (failures) return 1;
  printf("test_boot_root: all checks passed\n");
  return 0;
}
