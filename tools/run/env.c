/* The rendezvous environment every rank shares (torchrun's names), set once in
 * the launcher's own environment so that each rank inherits it. The per-rank
 * variables (RANK, LOCAL_RANK, GPUBRIDGE_VENDOR) are set in spawn.c. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
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

/* A port free now on 127.0.0.1: the kernel picks it for a bound socket, which
 * is then closed (never listened on, so nothing lingers in TIME_WAIT). */
static gbResult_t pickFreePort(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return gbRunFail(gbSystemError, "socket() for MASTER_PORT: %s", strerror(errno));
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, (struct sockaddr*)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
    int err = errno;
    close(fd);
    return gbRunFail(gbSystemError, "cannot find a free port on 127.0.0.1: %s (give one with --port)",
                     strerror(err));
  }
  close(fd);
  *port = ntohs(a.sin_port);
  return gbSuccess;
}

gbResult_t gbRunEnvPrepare(const gbRunOptions_t* opts) {
  int port = opts->port;
  if (port == 0) GB_RUN_CHECK(pickFreePort(&port));
  GB_RUN_CHECK(setIntVar("WORLD_SIZE", opts->nranks));
  GB_RUN_CHECK(setIntVar("LOCAL_WORLD_SIZE", opts->nranks));
  GB_RUN_CHECK(setVar("GROUP_RANK", "0"));
  GB_RUN_CHECK(setVar("MASTER_ADDR", "127.0.0.1"));
  GB_RUN_CHECK(setIntVar("MASTER_PORT", port));
  /* A secret already set is the caller's (e.g. several launchers of one job): keep it. */
  const char* given = getenv("GPUBRIDGE_JOB_SECRET");
  if (given == NULL || given[0] == '\0') {
    char hex[2 * SECRET_BYTES + 1];
    GB_RUN_CHECK(makeSecret(hex));
    GB_RUN_CHECK(setVar("GPUBRIDGE_JOB_SECRET", hex));
  }
  return gbSuccess;
}
