/* Strangers' waiting connections against this process's open-file limit
 * (os/fdbudget.h, net/pending.c): the budget is half the soft limit (8 to
 * 1,024); a listener holds no more than it; when a socket of ours runs out
 * of descriptors while strangers wait, the listener's thread drops the
 * oldest and our connect succeeds; with none waiting, it fails at once
 * naming the limit. Strangers come from a child process, so their own
 * descriptors count against its limit, not ours. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/result.h"
#include "check.h"
#include "net/net.h"
#include "os/fdbudget.h"
#include "os/socket.h"

#define LIMIT 64 /* the soft limit under test: a budget of 32 */
#define MAX_FILL 4096

static void setSoft(rlim_t soft) {
  struct rlimit r;
  CHECK(getrlimit(RLIMIT_NOFILE, &r) == 0, "getrlimit: %s", strerror(errno));
  r.rlim_cur = soft;
  CHECK(setrlimit(RLIMIT_NOFILE, &r) == 0, "setrlimit(%lu): %s", (unsigned long)soft, strerror(errno));
}

static void budgets(void) {
  struct rlimit was;
  getrlimit(RLIMIT_NOFILE, &was);
  rlim_t softs[] = {10, 96, 200, 1024, 4096};
  int want[] = {8, 48, 100, 512, 1024};
  for (int i = 0; i < 5; i++) {
    if (was.rlim_max != RLIM_INFINITY && softs[i] > was.rlim_max) continue;
    setSoft(softs[i]);
    CHECK(gbFdStrangerBudget() == want[i], "soft limit %lu: budget %d, want %d", (unsigned long)softs[i],
          gbFdStrangerBudget(), want[i]);
  }
  setSoft(was.rlim_cur);
}

/* Polls until the process's count of waiting connections is n (5 s). */
static int awaitCount(int n) {
  gbDeadline_t d = gbDeadlineIn(5);
  while (gbFdStrangersCount() != n && !gbDeadlinePassed(d)) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  return gbFdStrangersCount() == n;
}

/* A child that opens n idle connections to addr, waits (5 s at most) until
 * the listener closed `closed` of them, says so on ready, and holds the
 * rest until hold is closed. Only async-signal-safe calls after fork. */
static pid_t strangers(const gbSockAddr_t* addr, int n, int closed, int* ready, int* hold) {
  int r[2], h[2];
  CHECK(pipe(r) == 0 && pipe(h) == 0, "pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid == 0) {
    close(r[0]);
    close(h[1]);
    struct pollfd p[64];
    int ok = n <= 64;
    for (int i = 0; i < n && ok; i++) {
      p[i] = (struct pollfd){socket(AF_INET, SOCK_STREAM, 0), POLLIN, 0};
      ok = p[i].fd >= 0 && connect(p[i].fd, (const struct sockaddr*)&addr->sa, addr->len) == 0;
    }
    int seen = 0;
    for (int round = 0; ok && seen < closed && round < 500; round++) { /* 500 polls of 10 ms: the deadline */
      (void)poll(p, (nfds_t)n, 10);
      for (int i = 0; i < n; i++)
        if (p[i].fd >= 0 && p[i].revents != 0) {
          close(p[i].fd);
          p[i].fd = -1; /* poll skips it */
          seen++;
        }
    }
    char c = ok && seen == closed ? 'y' : 'n';
    if (write(r[1], &c, 1) != 1) _exit(2);
    while (read(h[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(r[1]);
  close(h[0]);
  *ready = r[0];
  *hold = h[1];
  return pid;
}

/* Opens /dev/null until this process is out of descriptors; returns how many. */
static int fill(int* fds) {
  int n = 0;
  while (n < MAX_FILL) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      CHECK(errno == EMFILE, "filling the descriptor table: %s, want EMFILE", strerror(errno));
      break;
    }
    fds[n++] = fd;
  }
  return n;
}

static void unfill(int* fds, int n) {
  for (int i = 0; i < n; i++) close(fds[i]);
}

static void relief(void) {
  static uint8_t secret[GB_NET_SECRET_BYTES] = {1, 2, 3};
  const gbNetOps_t* net = gbNetGet(gbTransportTcp);
  gbSockAddr_t any, addr;
  gbNetListener_t* l = NULL;
  CHECK(gbSockAddrParse("127.0.0.1:0", 0, &any) == gbSuccess, "%s", gbErrorLast());
  if (net->listen(&any, secret, 7, &l) != gbSuccess || net->listenerAddr(l, &addr) != gbSuccess) {
    CHECK(0, "cannot listen: %s", gbErrorLast());
    return;
  }
  struct rlimit was;
  getrlimit(RLIMIT_NOFILE, &was);
  setSoft(LIMIT);
  int budget = gbFdStrangerBudget();
  CHECK(budget == LIMIT / 2, "budget %d at a soft limit of %d, want %d", budget, LIMIT, LIMIT / 2);

  /* 8 strangers more than the budget: the listener drops the 8 oldest to
   * make room for the last ones and keeps the budget. */
  int ready, hold;
  pid_t child = strangers(&addr, budget + 8, 8, &ready, &hold);
  char c = 0;
  CHECK(read(ready, &c, 1) == 1 && c == 'y', "the child's %d connections: not exactly 8 of them closed within 5 s",
        budget + 8);

  /* Out of descriptors with strangers waiting: connect still succeeds. */
  static int fds[MAX_FILL];
  int n = fill(fds);
  int fd = -1;
  int64_t t0 = gbClockNowNs();
  gbResult_t res = gbSockConnect(&addr, gbDeadlineIn(5), NULL, &fd);
  double took = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(res == gbSuccess, "connect with %d strangers waiting and no descriptor left: %s", budget, gbErrorLast());
  CHECK(took < 1.0, "connect took %.2f s while strangers were dropped for it", took);
  int left = gbFdStrangersCount();
  CHECK(left < budget, "%d connections wait after the relief, want fewer than %d", left, budget);
  printf("relief: connected after %.3f s; %d of %d strangers left\n", took, left, budget);
  gbSockClose(fd);
  unfill(fds, n);

  /* No stranger waits: out of descriptors fails at once, naming the limit. */
  close(hold);
  waitpid(child, NULL, 0);
  close(ready);
  net->listenerClose(l);
  CHECK(awaitCount(0), "%d connections still counted after the listener closed", gbFdStrangersCount());
  n = fill(fds);
  t0 = gbClockNowNs();
  res = gbSockConnect(&addr, gbDeadlineIn(5), NULL, &fd);
  took = (double)(gbClockNowNs() - t0) / 1e9;
  char text[512];
  snprintf(text, sizeof(text), "%s", gbErrorLast());
  unfill(fds, n);
  CHECK(res == gbSystemError, "connect with no descriptor and no stranger: result %d, want gbSystemError", (int)res);
  CHECK(strstr(text, "Too many open files") && strstr(text, "ulimit -n") && strstr(text, "is 64"),
        "its error must name the cause and the limit: %s", text);
  CHECK(took < 0.5, "it failed after %.2f s, want at once", took);
  setSoft(was.rlim_cur);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  budgets();
  relief();
  if (failures) return 1;
  printf("test_net_fd_relief: all checks passed\n");
  return 0;
}
