/* os/: address parsing and formatting, interface selection (the IFNAME
 * syntax), listen/connect/accept and exact I/O over 127.0.0.1, connect
 * retrying until its deadline, timeouts, host identity and random bytes. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/param.h"
#include "base/result.h"
#include "os/socket.h"

static int failures;
#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
      failures++;                                               \
    }                                                           \
  } while (0)

static double secondsSince(int64_t t0) { return (double)(gbClockNowNs() - t0) / 1e9; }

/* ------------------------------------------------------------- addresses */

static void testParse(void) {
  gbSockAddr_t a;
  char buf[80];
  CHECK(gbSockAddrParse("127.0.0.1:80", 0, &a) == gbSuccess, "%s", gbErrorLast());
  const struct sockaddr_in* in = (const struct sockaddr_in*)&a.sa;
  const unsigned char lo4[4] = {127, 0, 0, 1};
  CHECK(a.sa.ss_family == AF_INET, "family %d", a.sa.ss_family);
  CHECK(memcmp(&in->sin_addr, lo4, 4) == 0, "address bytes differ");
  CHECK(in->sin_port == htons(80), "port %d", ntohs(in->sin_port));
  CHECK(gbSockAddrPort(&a) == 80, "port %d", gbSockAddrPort(&a));
  CHECK(strcmp(gbSockAddrString(&a, buf, sizeof(buf)), "127.0.0.1:80") == 0, "%s", buf);

  CHECK(gbSockAddrParse("[::1]:5678", 0, &a) == gbSuccess, "%s", gbErrorLast());
  const struct sockaddr_in6* in6 = (const struct sockaddr_in6*)&a.sa;
  unsigned char lo6[16] = {0};
  lo6[15] = 1;
  CHECK(a.sa.ss_family == AF_INET6, "family %d", a.sa.ss_family);
  CHECK(memcmp(&in6->sin6_addr, lo6, 16) == 0, "v6 address bytes differ");
  CHECK(gbSockAddrPort(&a) == 5678, "port %d", gbSockAddrPort(&a));
  CHECK(strcmp(gbSockAddrString(&a, buf, sizeof(buf)), "[::1]:5678") == 0, "%s", buf);
  gbSockAddrSetPort(&a, 9);
  CHECK(in6->sin6_port == htons(9) && strcmp(gbSockAddrString(&a, buf, sizeof(buf)), "[::1]:9") == 0, "%s", buf);

  CHECK(gbSockAddrParse("10.1.2.3", 4242, &a) == gbSuccess, "%s", gbErrorLast());
  const unsigned char ten[4] = {10, 1, 2, 3};
  CHECK(memcmp(&((const struct sockaddr_in*)&a.sa)->sin_addr, ten, 4) == 0, "10.1.2.3 bytes differ");
  CHECK(gbSockAddrPort(&a) == 4242, "default port not applied: %d", gbSockAddrPort(&a));
  CHECK(gbSockAddrParse("[fd00::2]", 77, &a) == gbSuccess && a.sa.ss_family == AF_INET6 &&
            gbSockAddrPort(&a) == 77, "bracketed v6 without port");

  /* A name is resolved; localhost is a loopback address of either family. */
  CHECK(gbSockAddrParse("localhost:7", 0, &a) == gbSuccess, "%s", gbErrorLast());
  int loop = (a.sa.ss_family == AF_INET && memcmp(&((struct sockaddr_in*)&a.sa)->sin_addr, lo4, 4) == 0) ||
             (a.sa.ss_family == AF_INET6 && memcmp(&((struct sockaddr_in6*)&a.sa)->sin6_addr, lo6, 16) == 0);
  CHECK(loop && gbSockAddrPort(&a) == 7, "localhost resolved to %s", gbSockAddrString(&a, buf, sizeof(buf)));

  const char* bad[] = {"", "1.2.3.4:99999", "1.2.3.4:", "1.2.3.4:8x", "[::1", "[::1]x", ":80", "name.invalid:1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    gbResult_t r = gbSockAddrParse(bad[i], 1, &a);
    CHECK(r == gbInvalidArgument, "\"%s\" gave %d", bad[i], r);
    CHECK(r == gbSuccess || strlen(gbErrorLast()) > 0, "no message for \"%s\"", bad[i]);
  }
  CHECK(gbSockAddrParse("1.2.3.4", -1, &a) == gbInvalidArgument, "no port and no default accepted");
}

/* ------------------------------------------------------------- interfaces */

/* What the test expects, from getifaddrs read here: the first up interface
 * with a usable address of family fam whose name passes keep(). */
static int findHere(int fam, int (*keep)(const char*), char* name, size_t len) {
  struct ifaddrs* all;
  int found = 0;
  if (getifaddrs(&all) != 0) return 0;
  for (struct ifaddrs* a = all; a && !found; a = a->ifa_next) {
    if (!(a->ifa_flags & IFF_UP) || a->ifa_addr == NULL || a->ifa_addr->sa_family != fam) continue;
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6*)a->ifa_addr)->sin6_addr)) continue;
    if (keep(a->ifa_name)) {
      snprintf(name, len, "%s", a->ifa_name);
      found = 1;
    }
  }
  freeifaddrs(all);
  return found;
}
static int notLo(const char* n) { return strncmp(n, "lo", 2) != 0; }
static int notLoNotDocker(const char* n) { return notLo(n) && strncmp(n, "docker", 6) != 0; }

static void testInterfaces(void) {
  gbSockAddr_t a;
  char name[64], buf[80];
  const unsigned char lo4[4] = {127, 0, 0, 1};
  const char* loSpecs[] = {"lo", "=lo", "l", "nosuch0,lo"};
  for (size_t i = 0; i < 4; i++) {
    name[0] = '\0';
    CHECK(gbSockFindInterface(loSpecs[i], &a, name, sizeof(name)) == gbSuccess, "spec %s: %s", loSpecs[i], gbErrorLast());
    CHECK(strcmp(name, "lo") == 0, "spec %s picked %s", loSpecs[i], name);
    /* IPv4 preferred over lo's ::1. */
    CHECK(a.sa.ss_family == AF_INET && memcmp(&((struct sockaddr_in*)&a.sa)->sin_addr, lo4, 4) == 0,
          "spec %s gave %s", loSpecs[i], gbSockAddrString(&a, buf, sizeof(buf)));
  }

  char expect[64];
  int other = findHere(AF_INET, notLo, expect, sizeof(expect)) || findHere(AF_INET6, notLo, expect, sizeof(expect));
  gbResult_t r = gbSockFindInterface("^lo", &a, name, sizeof(name));
  if (other) {
    CHECK(r == gbSuccess && strcmp(name, expect) == 0, "^lo: got %s (%s), expected %s", name, gbErrorLast(), expect);
  } else {
    CHECK(r != gbSuccess, "^lo succeeded with only lo present");
  }

  int def = findHere(AF_INET, notLoNotDocker, expect, sizeof(expect)) ||
            findHere(AF_INET6, notLoNotDocker, expect, sizeof(expect));
  if (!def) snprintf(expect, sizeof(expect), "lo");
  CHECK(gbSockFindInterface("", &a, name, sizeof(name)) == gbSuccess && strcmp(name, expect) == 0,
        "empty spec picked %s, expected %s", name, expect);
  CHECK(gbSockAddrPort(&a) == 0, "interface address has port %d", gbSockAddrPort(&a));

  /* Nothing matches: the error names what exists and the variable to set. */
  const char* none[] = {"=l", "nosuchif0", "^lo,e,d,i,w,b,t,v,n,a,c,f,g,h,j,k,m,o,p,q,r,s,u,x,y,z,^"};
  for (size_t i = 0; i < 3; i++) {
    r = gbSockFindInterface(none[i], &a, name, sizeof(name));
    const char* msg = gbErrorLast();
    CHECK(r != gbSuccess, "spec %s matched %s", none[i], name);
    CHECK(strstr(msg, "lo (") != NULL, "spec %s: error does not list lo: %s", none[i], msg);
    CHECK(strstr(msg, "GPUBRIDGE_SOCKET_IFNAME") != NULL, "spec %s: error does not name the variable: %s", none[i], msg);
  }
}

/* --------------------------------------------------- listen/connect/accept */

static int acceptOne(int lfd, gbSockAddr_t* peer) {
  gbDeadline_t d = gbDeadlineIn(5.0);
  int fd = -1;
  while (fd < 0 && !gbDeadlinePassed(d)) {
    if (gbSockAccept(lfd, &fd, peer) != gbSuccess) return -1;
    if (fd < 0) {
      struct pollfd p = {lfd, POLLIN, 0};
      poll(&p, 1, gbDeadlineRemainingMs(d, 100));
    }
  }
  return fd;
}

static void testLoopback(void) {
  gbSockAddr_t any, bound, peer;
  char buf[80];
  CHECK(gbSockAddrParse("127.0.0.1:0", 0, &any) == gbSuccess, "%s", gbErrorLast());
  int lfd = -1;
  CHECK(gbSockListen(&any, &lfd, &bound) == gbSuccess, "%s", gbErrorLast());
  if (lfd < 0) return;
  CHECK(gbSockAddrPort(&bound) > 0, "bound to port %d", gbSockAddrPort(&bound));
  int fd0 = -1;
  CHECK(gbSockAccept(lfd, &fd0, &peer) == gbSuccess && fd0 == -1, "accept with nobody there gave fd %d", fd0);

  int cfd = -1;
  CHECK(gbSockConnect(&bound, gbDeadlineIn(5.0), NULL, &cfd) == gbSuccess, "%s", gbErrorLast());
  int sfd = acceptOne(lfd, &peer);
  CHECK(sfd >= 0, "accept: nothing within 5 s");
  if (cfd < 0 || sfd < 0) return;
  gbSockAddrString(&peer, buf, sizeof(buf));
  CHECK(strncmp(buf, "127.0.0.1:", 10) == 0, "peer %s", buf);

  /* 3 MiB each way, more than the socket buffers hold, so the loops poll. */
  size_t n = 3u << 20;
  unsigned char* out = malloc(n);
  unsigned char* in = malloc(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    out[i] = (unsigned char)(x >> 24);
  }
  /* Sender and receiver in one thread: send in halves, draining between. */
  int64_t t0 = gbClockNowNs();
  size_t sent = 0, got = 0;
  char err[128];
  while (got < n && secondsSince(t0) < 10) {
    if (sent < n) {
      ssize_t k = gbSockTrySend(cfd, out + sent, n - sent, err, sizeof(err));
      CHECK(k >= 0, "TrySend: %s", err);
      if (k < 0) break;
      sent += (size_t)k;
    }
    ssize_t k = gbSockTryRecv(sfd, in + got, n - got, err, sizeof(err));
    CHECK(k >= 0, "TryRecv: %s", err);
    if (k < 0) break;
    got += (size_t)k;
  }
  CHECK(got == n && memcmp(in, out, n) == 0, "TrySend/TryRecv moved %zu of %zu bytes or changed them", got, n);

  /* SendAll/RecvAll of a small message. */
  CHECK(gbSockSendAll(sfd, out, 1000, gbDeadlineIn(5), NULL, "reply") == gbSuccess, "%s", gbErrorLast());
  memset(in, 0, 1000);
  CHECK(gbSockRecvAll(cfd, in, 1000, gbDeadlineIn(5), NULL, "reply") == gbSuccess && memcmp(in, out, 1000) == 0,
        "RecvAll: %s", gbErrorLast());

  /* Nothing to read: TryRecv says 0; RecvAll times out with what in the message. */
  CHECK(gbSockTryRecv(cfd, in, 10, err, sizeof(err)) == 0, "TryRecv with no data did not return 0");
  t0 = gbClockNowNs();
  gbResult_t r = gbSockRecvAll(cfd, in, 10, gbDeadlineIn(0.3), NULL, "the test's probe");
  double el = secondsSince(t0);
  CHECK(r == gbTimeout, "RecvAll without data gave %d", r);
  CHECK(el >= 0.3 && el < 1.3, "RecvAll timed out after %.3f s, deadline 0.3 s", el);
  CHECK(strstr(gbErrorLast(), "the test's probe") != NULL, "message lacks what: %s", gbErrorLast());

  /* Abort flag: noticed within a poll slice. */
  atomic_int abortFlag = 1;
  t0 = gbClockNowNs();
  r = gbSockRecvAll(cfd, in, 10, gbDeadlineIn(10), &abortFlag, "aborted probe");
  CHECK(r == gbRemoteError && secondsSince(t0) < 1.0, "aborted RecvAll gave %d after %.3f s", r, secondsSince(t0));

  /* The peer closes: partial data then EOF -> gbRemoteError; TryRecv -1. */
  CHECK(gbSockSendAll(sfd, out, 5, gbDeadlineIn(5), NULL, "tail") == gbSuccess, "%s", gbErrorLast());
  gbSockClose(sfd);
  r = gbSockRecvAll(cfd, in, 10, gbDeadlineIn(5), NULL, "after close");
  CHECK(r == gbRemoteError, "RecvAll from a closed peer gave %d", r);
  CHECK(strstr(gbErrorLast(), "after close") != NULL, "message lacks what: %s", gbErrorLast());
  ssize_t k = gbSockTryRecv(cfd, in, 10, err, sizeof(err));
  CHECK(k == -1 && strstr(err, "peer closed") != NULL, "TryRecv after close: %zd (%s)", k, err);
  gbSockClose(cfd);
  free(in);
  free(out);

  /* A closed port: connect retries until the deadline, not less, not much more. */
  gbSockAddr_t closed = bound;
  gbSockClose(lfd);
  double dl = 1.0;
  t0 = gbClockNowNs();
  cfd = -1;
  r = gbSockConnect(&closed, gbDeadlineIn(dl), NULL, &cfd);
  el = secondsSince(t0);
  CHECK(r == gbTimeout && cfd == -1, "connect to a closed port gave %d, fd %d", r, cfd);
  CHECK(el >= dl && el <= dl + 1.0, "connect gave up after %.3f s, deadline %.1f s", el, dl);
  gbSockAddrString(&closed, buf, sizeof(buf));
  CHECK(strstr(gbErrorLast(), buf) != NULL, "message lacks the address %s: %s", buf, gbErrorLast());
  CHECK(strstr(gbErrorLast(), strerror(ECONNREFUSED)) != NULL, "message lacks the errno text: %s", gbErrorLast());

  abortFlag = 1;
  t0 = gbClockNowNs();
  r = gbSockConnect(&closed, gbDeadlineIn(10), &abortFlag, &cfd);
  CHECK(r == gbRemoteError && secondsSince(t0) < 1.0, "aborted connect gave %d after %.3f s", r, secondsSince(t0));
}

/* ----------------------------------------------------------- host, random */

static uint64_t fnv(uint64_t h, const char* s) {
  while (*s) {
    h ^= (unsigned char)*s++;
    h *= 1099511628211ull; /* the 64-bit FNV prime */
  }
  return h;
}

static void testHost(void) {
  unsetenv("GPUBRIDGE_SIM_HOST");
  gbParamReset();
  char host[256] = "";
  gethostname(host, sizeof(host));
  CHECK(strcmp(gbHostName(), host) == 0, "host name %s, gethostname %s", gbHostName(), host);
  char mid[128] = "";
  FILE* f = fopen("/etc/machine-id", "r");
  if (f) {
    if (!fgets(mid, sizeof(mid), f)) mid[0] = '\0';
    fclose(f);
    mid[strcspn(mid, "\r\n \t")] = '\0';
  }
  const uint64_t basis = 14695981039346656037ull;
  CHECK(gbHostId() == fnv(fnv(basis, host), mid), "host id %016llx", (unsigned long long)gbHostId());
  CHECK(gbHostId() == gbHostId(), "host id not stable");

  setenv("GPUBRIDGE_SIM_HOST", "simnode7", 1);
  gbParamReset();
  CHECK(strcmp(gbHostName(), "simnode7") == 0, "simulated host name %s", gbHostName());
  CHECK(gbHostId() == fnv(basis, "simnode7"), "simulated host id %016llx", (unsigned long long)gbHostId());
  setenv("GPUBRIDGE_SIM_HOST", "simnode8", 1);
  gbParamReset();
  CHECK(gbHostId() == fnv(basis, "simnode8") && gbHostId() != fnv(basis, "simnode7"), "ids of two simulated hosts");
  unsetenv("GPUBRIDGE_SIM_HOST");
  gbParamReset();

  unsigned char a[64], b[64], zero[64] = {0};
  memset(a, 0, sizeof(a));
  memset(b, 0, sizeof(b));
  CHECK(gbRandomBytes(a, sizeof(a)) == gbSuccess && gbRandomBytes(b, sizeof(b)) == gbSuccess, "%s", gbErrorLast());
  CHECK(memcmp(a, b, sizeof(a)) != 0 && memcmp(a, zero, sizeof(a)) != 0, "random bytes repeat or are zero");
}

int main(void) {
  testParse();
  testInterfaces();
  testLoopback();
  testHost();
  if (failures) {
    fprintf(stderr, "test_os_socket: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_os_socket: all checks passed\n");
  return 0;
}
