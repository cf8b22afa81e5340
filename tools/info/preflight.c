/* gpubridge-info --preflight: what a node needs before a job, checked in
 * seconds: the library, this process's device, the settings, the transport
 * (UCX loads where GPUBRIDGE_TRANSPORT=ucx asks for it), the interface
 * communicators would listen on, the limits (locked memory for pinned and
 * registered buffers, open files for sockets), the clock, and with --peers
 * whether every other node is reachable on that interface and reaches this
 * one. Each node runs the same command with the same peer list (this node's
 * own entry is skipped); each listens on its interface at --port and
 * connects to every peer until --wait runs out. One line per check, then
 * one verdict line: "preflight: PASS (N checks, W warnings)" or
 * "preflight: FAIL (N checks, F failed, W warnings): <first failure>".
 * Public API and POSIX only. */
#include "preflight.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include "gpubridge/gpubridge.h"
#include "version.h"

#define MAX_PEERS 64
#define HELLO "gbpflt01"
#define HELLO_BYTES 8

typedef struct {
  int checks, warnings, failures;
  char first[1024];
} tally_t;

static void report(tally_t* t, const char* check, const char* status, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report(tally_t* t, const char* check, const char* status, const char* fmt, ...) {
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  t->checks++;
  if (strcmp(status, "WARN") == 0) t->warnings++;
  if (strcmp(status, "FAIL") == 0 && t->failures++ == 0) snprintf(t->first, sizeof(t->first), "%s: %s", check, text);
  printf("%-10s %-4s %s\n", check, status, text);
  fflush(stdout);
}

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GPUBRIDGE_TRANSPORT=ucx: UCX must load here, as the library will load it
 * (GPUBRIDGE_UCX_LIBRARY, else libucp.so.0). */
static void checkTransport(tally_t* t) {
  const char* tr = getenv("GPUBRIDGE_TRANSPORT");
  if (tr == NULL || strcasecmp(tr, "ucx") != 0) {
    report(t, "transport", "ok", "%s", tr && *tr ? tr : "tcp");
    return;
  }
  const char* name = getenv("GPUBRIDGE_UCX_LIBRARY");
  if (name == NULL || *name == '\0') name = "libucp.so.0";
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char* e = dlerror();
    report(t, "transport", "FAIL", "GPUBRIDGE_TRANSPORT=ucx, but UCX did not load: %s (%s); install UCX (Debian, "
           "Ubuntu: apt-get install libucx0; RHEL: dnf install ucx) or set GPUBRIDGE_TRANSPORT=tcp", name,
           e ? e : "unknown error");
    return;
  }
  void (*version)(unsigned*, unsigned*, unsigned*) = NULL;
  *(void**)&version = dlsym(h, "ucp_get_version");
  unsigned v[3] = {0, 0, 0};
  if (version) version(&v[0], &v[1], &v[2]);
  const char *tls = getenv("UCX_TLS"), *devs = getenv("UCX_NET_DEVICES");
  report(t, "transport", version ? "ok" : "FAIL", "ucx: UCX %u.%u.%u from %s; UCX_TLS=%s UCX_NET_DEVICES=%s", v[0], v[1],
         v[2], name, tls ? tls : "(unset: UCX picks)", devs ? devs : "(unset: all)");
  dlclose(h);
}

static void checkLibrary(tally_t* t) {
  int code = 0;
  if (gbGetVersion(&code) != gbSuccess) {
    report(t, "library", "FAIL", "version unavailable: %s", gbGetLastError(NULL));
    return;
  }
  if (code != GB_VERSION_CODE)
    report(t, "library", "FAIL", "libgpubridge %d.%d.%d does not match this tool's header %s: reinstall one build",
           code / 10000, code / 100 % 100, code % 100, GB_VERSION_STRING);
  else
    report(t, "library", "ok", "libgpubridge %s", GB_VERSION_STRING);
}

static void checkDevice(tally_t* t) {
  gbDeviceInfo_t d;
  if (gbGetDeviceInfo(&d) != gbSuccess) {
    report(t, "device", "FAIL", "%s", gbGetLastError(NULL));
    return;
  }
  const char* kind = d.runKind == gbRunReal ? "a real GPU" : d.runKind == gbRunSimulated ? "simulated" : "CPU only";
  report(t, "device", "ok", "%s, island %s (%s)", d.backend, d.vendor[0] ? d.vendor : "-", kind);
}

static void checkSettings(tally_t* t) {
  const char* errors = NULL;
  if (gbGetParamErrors(&errors) != gbSuccess) {
    report(t, "settings", "FAIL", "unavailable: %s", gbGetLastError(NULL));
    return;
  }
  if (errors[0]) {
    size_t n = strcspn(errors, "\n");
    report(t, "settings", "FAIL", "%.*s (gpubridge-info -c lists every one)", (int)n, errors);
    return;
  }
  report(t, "settings", "ok", "every GPUBRIDGE_* value is valid");
}

/* Fills ifname/address; 0 when there is no usable interface. */
static int checkInterface(tally_t* t, int peers, char* ifname, size_t ifLen, char* address, size_t addrLen) {
  if (gbGetNetInterface(ifname, ifLen, address, addrLen) != gbSuccess) {
    report(t, "interface", "FAIL", "%s", gbGetLastError(NULL));
    return 0;
  }
  int loop = strcmp(ifname, "lo") == 0 || strncmp(address, "127.", 4) == 0 || strcmp(address, "[::1]") == 0;
  if (loop && peers)
    report(t, "interface", "FAIL", "%s %s is loopback: other nodes cannot reach it; set GPUBRIDGE_SOCKET_IFNAME to "
           "the interface they share", ifname, address);
  else
    report(t, "interface", "ok", "%s %s%s", ifname, address,
           getenv("GPUBRIDGE_SOCKET_IFNAME") ? " (GPUBRIDGE_SOCKET_IFNAME)" : " (the first one up; "
           "GPUBRIDGE_SOCKET_IFNAME picks another)");
  return 1;
}

static void limitText(rlim_t v, char* buf, size_t len) {
  if (v == RLIM_INFINITY) snprintf(buf, len, "unlimited");
  else snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void checkLimits(tally_t* t) {
  struct rlimit r;
  char cur[32];
  if (getrlimit(RLIMIT_MEMLOCK, &r) == 0) {
    limitText(r.rlim_cur, cur, sizeof(cur));
    if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < (64u << 20))
      report(t, "memlock", "WARN", "%s bytes: pinned and registered buffers (RDMA) may fail; set memlock unlimited "
             "(/etc/security/limits.conf, or the launcher's limits)", cur);
    else
      report(t, "memlock", "ok", "%s%s", cur, r.rlim_cur == RLIM_INFINITY ? "" : " bytes");
  }
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    limitText(r.rlim_cur, cur, sizeof(cur));
    if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < 4096)
      report(t, "open files", "WARN", "%s: a rank holds about 2 sockets per peer rank plus its listener; jobs of more "
             "than %llu ranks need more (ulimit -n)", cur, (unsigned long long)(r.rlim_cur / 4));
    else
      report(t, "open files", "ok", "%s", cur);
  }
}

static void checkClock(tally_t* t) {
  struct timex tx;
  memset(&tx, 0, sizeof(tx));
  int state = adjtimex(&tx);
  if (state < 0)
    report(t, "clock", "WARN", "cannot read its synchronization (adjtimex: %s)", strerror(errno));
  else if (state == TIME_ERROR || (tx.status & STA_UNSYNC))
    report(t, "clock", "WARN", "not synchronized (no NTP or chrony?): flight-recorder dumps of different nodes "
           "will not line up in time");
  else
    report(t, "clock", "ok", "synchronized (estimated error %ld us)", (long)tx.esterror);
}

typedef struct {
  char text[160];          /* as given, with the port */
  struct sockaddr_storage addr;
  socklen_t len;
  int fd;                  /* a connect in flight, or -1 */
  int reached, sent;
  double at, nextTry;
  char why[128];
} peer_t;

static int resolve(const char* host, int port, peer_t* p) {
  char ps[16];
  snprintf(ps, sizeof(ps), "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, ps, &hints, &res);
  if (rc != 0 || !res) {
    snprintf(p->why, sizeof(p->why), "cannot resolve %s: %s", host, gai_strerror(rc));
    return 0;
  }
  memcpy(&p->addr, res->ai_addr, res->ai_addrlen);
  p->len = res->ai_addrlen;
  freeaddrinfo(res);
  return 1;
}

static void addrOnly(const struct sockaddr_storage* a, char* buf, size_t len) {
  void* in = a->ss_family == AF_INET6 ? (void*)&((struct sockaddr_in6*)a)->sin6_addr
                                      : (void*)&((struct sockaddr_in*)a)->sin_addr;
  if (!inet_ntop(a->ss_family, in, buf, (socklen_t)len)) snprintf(buf, len, "?");
}

/* Whether a is one of this host's own addresses (loopback included): a
 * --peers entry naming this node by a name that resolves elsewhere than its
 * interface (127.0.1.1 in /etc/hosts, another network). */
static int isOwnAddress(const struct sockaddr_storage* a) {
  if (a->ss_family == AF_INET && (ntohl(((const struct sockaddr_in*)a)->sin_addr.s_addr) >> 24) == 127) return 1;
  struct ifaddrs* all = NULL;
  if (getifaddrs(&all) != 0) return 0;
  int own = 0;
  for (struct ifaddrs* i = all; i && !own; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != a->ss_family) continue;
    if (a->ss_family == AF_INET)
      own = memcmp(&((struct sockaddr_in*)i->ifa_addr)->sin_addr, &((const struct sockaddr_in*)a)->sin_addr,
                   sizeof(struct in_addr)) == 0;
    else if (a->ss_family == AF_INET6)
      own = memcmp(&((struct sockaddr_in6*)i->ifa_addr)->sin6_addr, &((const struct sockaddr_in6*)a)->sin6_addr,
                   sizeof(struct in6_addr)) == 0;
  }
  freeifaddrs(all);
  return own;
}

static int openListener(const char* address, int port, char* why, size_t len) {
  peer_t me;
  memset(&me, 0, sizeof(me));
  char host[96];
  snprintf(host, sizeof(host), "%s", address);
  if (host[0] == '[') { /* "[fe80::1]" */
    memmove(host, host + 1, strlen(host));
    host[strcspn(host, "]")] = '\0';
  }
  if (!resolve(host, port, &me)) {
    snprintf(why, len, "%s", me.why);
    return -1;
  }
  int fd = socket(me.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, (struct sockaddr*)&me.addr, me.len) != 0 || listen(fd, 64) != 0) {
    snprintf(why, len, "cannot listen on %s port %d: %s (--port picks another)", address, port, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static void tryConnect(peer_t* p, double now) {
  p->fd = socket(p->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p->fd < 0) {
    snprintf(p->why, sizeof(p->why), "socket: %s", strerror(errno));
    p->nextTry = now + 0.2;
    return;
  }
  if (connect(p->fd, (struct sockaddr*)&p->addr, p->len) == 0 || errno == EINPROGRESS) return;
  snprintf(p->why, sizeof(p->why), "%s", strerror(errno));
  close(p->fd);
  p->fd = -1;
  p->nextTry = now + 0.2;
}

/* A connect finished: reached, or retried later (the peer may not listen yet). */
static void connectDone(peer_t* p, double now, double start) {
  int err = 0;
  socklen_t el = sizeof(err);
  if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
  if (err == 0 && send(p->fd, HELLO, HELLO_BYTES, MSG_NOSIGNAL) == HELLO_BYTES) {
    p->reached = 1;
    p->at = now - start;
  } else {
    snprintf(p->why, sizeof(p->why), "%s", strerror(err ? err : errno));
    p->nextTry = now + 0.2;
  }
  close(p->fd);
  p->fd = -1;
}

/* Counts the peers that reached this node (a full hello on an accepted socket). */
static void serveListener(int lfd, int* accepted, int* fds, int* nfds) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (*nfds < MAX_PEERS * 2) fds[(*nfds)++] = fd;
    else close(fd);
  }
  for (int i = 0; i < *nfds;) {
    char b[HELLO_BYTES];
    ssize_t n = recv(fds[i], b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
    if (n == HELLO_BYTES || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      if (n == HELLO_BYTES && memcmp(b, HELLO, HELLO_BYTES) == 0) (*accepted)++;
      close(fds[i]);
      fds[i] = fds[--(*nfds)];
    } else {
      i++;
    }
  }
}

static void checkPeers(tally_t* t, const char* list, int port, double waitS, const char* myAddress) {
  peer_t peers[MAX_PEERS];
  int n = 0, skipped = 0;
  char copy[4096];
  snprintf(copy, sizeof(copy), "%s", list);
  for (char* save = NULL, *tok = strtok_r(copy, ",", &save); tok && n < MAX_PEERS; tok = strtok_r(NULL, ",", &save)) {
    peer_t* p = &peers[n];
    memset(p, 0, sizeof(*p));
    p->fd = -1;
    snprintf(p->text, sizeof(p->text), "%s:%d", tok, port);
    if (!resolve(tok, port, p)) {
      report(t, "peer", "FAIL", "%s: %s", tok, p->why);
      continue;
    }
    char a[64];
    addrOnly(&p->addr, a, sizeof(a));
    if (strcmp(a, myAddress) == 0 || isOwnAddress(&p->addr)) {
      skipped++;
      continue;
    }
    n++;
  }
  char why[256];
  int lfd = openListener(myAddress, port, why, sizeof(why));
  if (lfd < 0) {
    report(t, "listen", "FAIL", "%s", why);
    return;
  }
  report(t, "listen", "ok", "%s port %d, for %d peer%s (%d entr%s of --peers %s this node), up to %.0f s", myAddress,
         port, n, n == 1 ? "" : "s", skipped, skipped == 1 ? "y" : "ies", skipped == 1 ? "is" : "are", waitS);
  int accepted = 0, fds[MAX_PEERS * 2], nfds = 0;
  double start = nowS(), end = start + waitS;
  for (;;) {
    double now = nowS();
    int reached = 0;
    for (int i = 0; i < n; i++) reached += peers[i].reached;
    if ((reached == n && accepted >= n) || now >= end) break;
    struct pollfd pf[MAX_PEERS + 1];
    int idx[MAX_PEERS + 1], m = 0;
    pf[m] = (struct pollfd){lfd, POLLIN, 0};
    idx[m++] = -1;
    for (int i = 0; i < n; i++) {
      peer_t* p = &peers[i];
      if (p->reached) continue;
      if (p->fd < 0 && now >= p->nextTry) tryConnect(p, now);
      if (p->fd >= 0) {
        pf[m] = (struct pollfd){p->fd, POLLOUT, 0};
        idx[m++] = i;
      }
    }
    int ms = (int)((end - now) * 1000) + 1;
    poll(pf, (nfds_t)m, ms < 50 ? ms : 50);
    now = nowS();
    for (int k = 1; k < m; k++)
      if (pf[k].revents) connectDone(&peers[idx[k]], now, start);
    serveListener(lfd, &accepted, fds, &nfds);
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  close(lfd);
  for (int i = 0; i < n; i++) {
    peer_t* p = &peers[i];
    if (p->fd >= 0) close(p->fd);
    if (p->reached)
      report(t, "peer", "ok", "%s reached after %.0f ms", p->text, p->at * 1000);
    else
      report(t, "peer", "FAIL", "%s not reached within %.0f s (last: %s): is gpubridge-info --preflight running there "
             "with the same --port, and does a firewall or the interface (GPUBRIDGE_SOCKET_IFNAME) stand between?",
             p->text, waitS, p->why[0] ? p->why : "no answer");
  }
  if (accepted < n)
    report(t, "peers in", "FAIL", "%d of %d peers reached this node at %s port %d within %.0f s", accepted, n,
           myAddress, port, waitS);
  else
    report(t, "peers in", "ok", "all %d peers reached this node", n);
}

int preflightMain(const char* peers, int port, double waitS) {
  tally_t t;
  memset(&t, 0, sizeof(t));
  checkLibrary(&t);
  checkDevice(&t);
  checkSettings(&t);
  checkTransport(&t);
  char ifname[64] = "", address[96] = "";
  int haveIf = checkInterface(&t, peers != NULL, ifname, sizeof(ifname), address, sizeof(address));
  checkLimits(&t);
  checkClock(&t);
  if (peers && haveIf) checkPeers(&t, peers, port, waitS, address);
  if (t.failures)
    printf("preflight: FAIL (%d checks, %d failed, %d warnings): %s\n", t.checks, t.failures, t.warnings, t.first);
  else
    printf("preflight: PASS (%d checks, %d warnings)\n", t.checks, t.warnings);
  return fflush(stdout) == 0 && t.failures == 0 ? 0 : 1;
}
