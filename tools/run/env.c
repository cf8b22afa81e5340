/* The rendezvous environment every rank shares (torchrun's names), and
 * OMP_NUM_THREADS, set once in the launcher's own environment so that each
 * rank inherits it. The per-rank variables (RANK, LOCAL_RANK,
 * GPUBRIDGE_VENDOR) are set in spawn.c. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "run.h"

#define SECRET_BYTES 32 /* 64 hex digits */

static gbResult_t setVar(const char* name, const char* value) {
  if (setenv(name, value, 1) != 0)
    return gbRunFail(gbSystemError, "cannot set %s: %s", name, strerror(errno));
  return gbSuccess;
}

static gbResult_t setIntVar(const char* name, int value) {
  char text[16];
  snprintf(text, sizeof(text), "%d", value);
  return setVar(name, text);
}

static gbResult_t makeSecret(char hex[2 * SECRET_BYTES + 1]) {
  unsigned char bytes[SECRET_BYTES];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return gbRunFail(gbSystemError, "getrandom failed making GPUBRIDGE_JOB_SECRET: %s "
                       "(set GPUBRIDGE_JOB_SECRET yourself to skip it)", strerror(errno));
    }
    got += (size_t)n;
  }
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof(bytes); i++) {
    hex[2 * i] = digits[bytes[i] >> 4];
    hex[2 * i + 1] = digits[bytes[i] & 15];
  }
  hex[2 * SECRET_BYTES] = '\0';
  return gbSuccess;
}

/* Ports below this stay clear of well-known services. */
#define LOW_PORT 20000
#define PORT_TRIES 64

/* The lower end of the range the kernel hands out for outgoing connections
 * and bind(0) (32768 where it cannot be read). */
static int ephemeralLow(void) {
  int lo = 32768, hi = 60999;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
    fclose(f);
  }
  return lo;
}

/* Whether port (0: any) can be bound on 127.0.0.1 now; *got is the port,
 * *err the errno of a failure. reuse: with SO_REUSEADDR, as rank 0's root
 * binds (connections of an earlier job lingering in TIME_WAIT do not count). */
static int bindable(int port, int reuse, int* got, int* err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return 0;
  }
  if (reuse) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  socklen_t len = sizeof(a);
  int ok = bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr*)&a, &len) == 0;
  *err = errno;
  close(fd); /* never listened on, so nothing lingers in TIME_WAIT */
  if (ok) *got = ntohs(a.sin_port);
  return ok;
}

/* A port free now on 127.0.0.1, for rank 0 to listen on a moment later. It is
 * drawn at random below the ephemeral range: a port the kernel picked there
 * could go to another process's outgoing connection in that moment (jobs run
 * side by side did hit it). bind(0) only when that range is full. */
static gbResult_t pickFreePort(int* port) {
  int lo = LOW_PORT, hi = ephemeralLow() - 1, err = 0;
  for (int i = 0; hi > lo && i < PORT_TRIES; i++) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) break;
    if (bindable(lo + (int)(r % (uint32_t)(hi - lo + 1)), 0, port, &err)) return gbSuccess;
  }
  if (bindable(0, 0, port, &err)) return gbSuccess;
  return gbRunFail(gbSystemError, "cannot find a free port on 127.0.0.1: %s (give one with --port)",
                   strerror(err));
}

/* --port P: rank 0 must be able to listen on 127.0.0.1:P, so it is checked
 * before any rank starts (a rank 0 that cannot would fail, and the others
 * with it). */
static gbResult_t checkGivenPort(int port) {
  int got = 0, err = 0;
  if (bindable(port, 1, &got, &err)) return gbSuccess;
  if (err == EADDRINUSE)
    return gbRunFail(gbSystemError, "--port %d: the port is in use on 127.0.0.1 (MASTER_ADDR), where rank 0 must "
                     "listen; no rank was started. Choose another port, leave --port out for a free one, or "
                     "find the process holding it: ss -ltnp 'sport = :%d'", port, port);
  return gbRunFail(gbSystemError, "--port %d: cannot listen on 127.0.0.1:%d: %s; no rank was started. Choose another "
                   "port, or leave --port out for a free one", port, port, strerror(err));
}

/* The cores this launcher (and so each rank) may run on. */
static long usableCores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return sysconf(_SC_NPROCESSORS_ONLN);
}

/* INFO lines are asked for as the library's log asks: GPUBRIDGE_DEBUG=INFO or TRACE. */
static int infoWanted(void) {
  const char* level = getenv("GPUBRIDGE_DEBUG");
  return level && (strcasecmp(level, "INFO") == 0 || strcasecmp(level, "TRACE") == 0);
}

/* N ranks that each start an OpenMP (or torch intra-op) thread per core
 * oversubscribe the machine N times: 50 DDP steps of a small model took 4-10 s
 * instead of 0.2 s. As torchrun does, one thread per rank unless the user
 * chose: said at INFO only, since nothing is wrong then. A choice of more
 * than one thread that gives the ranks more threads than cores is the real
 * problem, and is warned of.
 * A single rank keeps the runtime's default. */
static gbResult_t limitOpenMpThreads(int nranks) {
  const char* given = getenv("OMP_NUM_THREADS");
  long cores = usableCores();
  if (nranks < 2) return gbSuccess;
  if (given != NULL && given[0] != '\0') { /* OpenMP ignores an empty one */
    char* end;
    long threads = strtol(given, &end, 10); /* the first level of a nested list ("4,2") */
    if (threads > 1 && cores > 0 && threads * nranks > cores) /* 1 each is the default's count */
      fprintf(stderr,
              "gpubridge-run: warning: OMP_NUM_THREADS=%s gives %d ranks %ld threads on %ld cores, so they slow each "
              "other down; set OMP_NUM_THREADS=%ld (cores / ranks) or unset it (1 per rank)\n",
              given, nranks, threads * nranks, cores, cores / nranks > 1 ? cores / nranks : 1);
    return gbSuccess;
  }
  GB_RUN_CHECK(setVar("OMP_NUM_THREADS", "1"));
  if (infoWanted())
    fprintf(stderr,
            "gpubridge-run: setting OMP_NUM_THREADS=1 for each rank, so that %d ranks do not each start a "
            "thread per core (%ld here); set OMP_NUM_THREADS yourself to choose another value\n",
            nranks, cores);
  return gbSuccess;
}

gbResult_t gbRunEnvPrepare(const gbRunOptions_t* opts) {
  int port = opts->port;
  if (port == 0) GB_RUN_CHECK(pickFreePort(&port));
  else GB_RUN_CHECK(checkGivenPort(port));
  GB_RUN_CHECK(setIntVar("WORLD_SIZE", opts->nranks));
  GB_RUN_CHECK(setIntVar("LOCAL_WORLD_SIZE", opts->nranks));
  GB_RUN_CHECK(setVar("GROUP_RANK", "0"));
  GB_RUN_CHECK(setVar("GPUBRIDGE_LAUNCHER", "gpubridge-run")); /* for the ranks' log lines */
  GB_RUN_CHECK(setVar("MASTER_ADDR", "127.0.0.1"));
  GB_RUN_CHECK(setIntVar("MASTER_PORT", port));
  GB_RUN_CHECK(limitOpenMpThreads(opts->nranks));
  /* A secret already set is the caller's (e.g. several launchers of one job): keep it. */
  const char* given = getenv("GPUBRIDGE_JOB_SECRET");
  if (given == NULL || given[0] == '\0') {
    char hex[2 * SECRET_BYTES + 1];
    GB_RUN_CHECK(makeSecret(hex));
    GB_RUN_CHECK(setVar("GPUBRIDGE_JOB_SECRET", hex));
  }
  return gbSuccess;
}
