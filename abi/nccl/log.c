/* libgpubridge-nccl's log lines. The library sees only gpubridge's public
 * header, so it reads the same GPUBRIDGE_DEBUG* variables itself and writes
 * lines shaped like libgpubridge's ("host:pid:tid [rank] gpubridge[ mode]
 * LEVEL INIT text"), each with one write() so lines never interleave. Its
 * lines count as subsystem INIT for GPUBRIDGE_DEBUG_SUBSYS. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "abi.h"

#define LINE_BYTES 4096
#define PATH_BYTES 1024

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int level = GB_NCCL_LOG_WARN;
static int initSelected = 1; /* GPUBRIDGE_DEBUG_SUBSYS lets INIT lines through */
static char host[64] = "unknown";
static char mode[64];
static char path[PATH_BYTES];
static atomic_int rankShown = -1;
static pthread_mutex_t fdLock = PTHREAD_MUTEX_INITIALIZER;
static int fd = -1;

/* Whether a comma list ("INIT,NET", "^PROXY", "ALL") selects INIT. */
static int selectsInit(const char* list) {
  int negate = list[0] == '^';
  if (negate) list++;
  int named = 0;
  while (*list) {
    size_t n = strcspn(list, ",");
    if ((n == 4 && strncasecmp(list, "INIT", 4) == 0) || (n == 3 && strncasecmp(list, "ALL", 3) == 0)) named = 1;
    list += n;
    if (*list == ',') list++;
  }
  return negate ? !named : named;
}

/* %h host, %p pid, %% a percent sign, as GPUBRIDGE_DEBUG_FILE documents. */
static void expand(const char* tmpl) {
  size_t o = 0;
  for (const char* p = tmpl; *p && o + 1 < sizeof(path); p++) {
    int w = -1;
    if (p[0] == '%' && p[1] == 'h') w = snprintf(path + o, sizeof(path) - o, "%s", host);
    else if (p[0] == '%' && p[1] == 'p') w = snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
    else if (p[0] == '%' && p[1] == '%') w = snprintf(path + o, sizeof(path) - o, "%%");
    if (w < 0) {
      path[o++] = *p;
      continue;
    }
    o += (size_t)w;
    if (o >= sizeof(path)) o = sizeof(path) - 1;
    p++;
  }
  path[o] = '\0';
}

static void readSettings(void) {
  static const char* const names[] = {"NONE", "WARN", "INFO", "TRACE"};
  const char* v = getenv("GPUBRIDGE_DEBUG");
  if (v && v[0])
    for (int i = 0; i < 4; i++)
      if (strcasecmp(v, names[i]) == 0) level = i;
  v = getenv("GPUBRIDGE_DEBUG_SUBSYS");
  if (v && v[0]) initSelected = selectsInit(v);
  v = getenv("GPUBRIDGE_SIM_HOST");
  if (v && v[0]) snprintf(host, sizeof(host), "%s", v);
  else if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  v = getenv("GPUBRIDGE_VENDOR");
  if (v && v[0]) snprintf(mode, sizeof(mode), " simulated %.40s", v);
  v = getenv("GPUBRIDGE_DEBUG_FILE");
  if (v && v[0]) expand(v);
}

int gbNcclLogEnabled(int lvl) {
  pthread_once(&once, readSettings);
  if (lvl == GB_NCCL_LOG_NONE || lvl > level) return 0;
  return lvl == GB_NCCL_LOG_WARN || initSelected;
}

void gbNcclLogSetRank(int rank) { atomic_store(&rankShown, rank < 0 ? -1 : rank); }

/* The file is opened on the first line, so a quiet process creates none;
 * if it cannot be opened the lines go to stderr. */
static int output(void) {
  pthread_mutex_lock(&fdLock);
  if (fd < 0) {
    fd = STDERR_FILENO;
    if (path[0]) {
      int f = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (f >= 0) fd = f;
    }
  }
  int out = fd;
  pthread_mutex_unlock(&fdLock);
  return out;
}

void gbNcclLogWrite(int lvl, const char* fmt, ...) {
  static const char* const names[] = {"NONE", "WARN", "INFO", "TRACE"};
  if (!gbNcclLogEnabled(lvl)) return;
  char line[LINE_BYTES];
  char rankText[16] = "-";
  int rank = atomic_load(&rankShown);
  if (rank >= 0) snprintf(rankText, sizeof(rankText), "%d", rank);
  int n = snprintf(line, sizeof(line), "%s:%d:%ld [%s] gpubridge%s %s INIT ", host, (int)getpid(),
                   (long)syscall(SYS_gettid), rankText, mode, names[lvl]);
  if (n < 0) return;
  size_t used = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
  va_list ap;
  va_start(ap, fmt);
  n = vsnprintf(line + used, sizeof(line) - used, fmt, ap);
  va_end(ap);
  if (n > 0) used += (size_t)n < sizeof(line) - used ? (size_t)n : sizeof(line) - used - 1;
  if (used > sizeof(line) - 2) used = sizeof(line) - 2;
  line[used++] = '\n';
  int out = output();
  const char* p = line;
  while (used > 0) {
    ssize_t w = write(out, p, used);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    used -= (size_t)w;
  }
}
