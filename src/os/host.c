/* This host's identity (name, 64-bit id) and random bytes. */
#include "os/socket.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/param.h"
#include "base/result.h"

static pthread_once_t hostOnce = PTHREAD_ONCE_INIT;
static char hostName[256];
static char machineId[128];
static pthread_mutex_t simMu = PTHREAD_MUTEX_INITIALIZER;
static char simName[256];

static void readHost(void) {
  if (gethostname(hostName, sizeof(hostName)) != 0 || hostName[0] == '\0')
    snprintf(hostName, sizeof(hostName), "unknown-host");
  hostName[sizeof(hostName) - 1] = '\0';
  /* Two machines may share a hostname (containers, clones); machine-id tells them apart. */
  FILE* f = fopen("/etc/machine-id", "r");
  if (f != NULL) {
    if (fgets(machineId, sizeof(machineId), f) == NULL) machineId[0] = '\0';
    fclose(f);
    machineId[strcspn(machineId, " \t\r\n")] = '\0';
  }
}

const char* gbHostName(void) {
  const char* sim = gbParamString(GB_PARAM_SIM_HOST);
  if (sim != NULL && sim[0] != '\0') {
    /* A copy: the parameter's text goes away when the table is re-read. */
    pthread_mutex_lock(&simMu);
    if (strcmp(simName, sim) != 0) snprintf(simName, sizeof(simName), "%s", sim);
    pthread_mutex_unlock(&simMu);
    return simName;
  }
  pthread_once(&hostOnce, readHost);
  return hostName;
}

static uint64_t fnv1a(uint64_t h, const char* s) {
  for (; *s; s++) {
    h ^= (uint8_t)*s;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t gbHostId(void) {
  uint64_t h = 0xcbf29ce484222325ull;
  const char* sim = gbParamString(GB_PARAM_SIM_HOST);
  /* A simulated host is its name alone, so simulated hosts differ on one machine. */
  if (sim != NULL && sim[0] != '\0') return fnv1a(h, sim);
  pthread_once(&hostOnce, readHost);
  return fnv1a(fnv1a(h, hostName), machineId);
}

static gbResult_t urandomBytes(uint8_t* p, size_t len) {
  char eb[128];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return gbErrorSet(gbSystemError, "cannot open /dev/urandom: %s", strerror_r(errno, eb, sizeof(eb)));
  size_t done = 0;
  while (done < len) {
    ssize_t n = read(fd, p + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      close(fd);
      return gbErrorSet(gbSystemError, "reading /dev/urandom: %s", strerror_r(e, eb, sizeof(eb)));
    }
    done += (size_t)n;
  }
  close(fd);
  return gbSuccess;
}

gbResult_t gbRandomBytes(void* buf, size_t len) {
  uint8_t* p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = getrandom(p + done, len - done, 0);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    /* Old kernels or seccomp filters: the device file still works. */
    return urandomBytes(p + done, len - done);
  }
  return gbSuccess;
}
