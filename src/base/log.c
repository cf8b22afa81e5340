/* Logging: one line per message, written with one write() so that lines of
 * threads and processes sharing a file never interleave. */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/param.h"

#define LINE_MAX_BYTES 8192
#define MODE_LEN 64
#define HOST_LEN 64
#define PATH_LEN 1024

static pthread_once_t initOnce = PTHREAD_ONCE_INIT;
static atomic_int level = GB_LOG_WARN;
static atomic_int subsysMask = GB_LOG_ALL;
static atomic_int rankShown = -1;
static _Atomic(gbLogHook_t) hook = NULL;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* mode, fd */
static char mode[MODE_LEN];
static int modeSetByCaller;
static char host[HOST_LEN] = "unknown";
static char filePath[PATH_LEN]; /* GPUBRIDGE_DEBUG_FILE, already expanded */
static int fd = -1;             /* opened on first write */

/* Messages logged while this thread runs the init (the parameter table warns
 * about unknown names while logging reads it) wait here until the settings
 * are in place; a nested pthread_once would deadlock. */
static _Thread_local int inInit;
#define PENDING_MAX 16
#define PENDING_LEN 512
static struct { int level, subsys; char text[PENDING_LEN]; } pending[PENDING_MAX];
static int npending;
static atomic_int pendingReady;

static const struct { const char* name; int bit; } subsysNames[] = {
    {"INIT", GB_LOG_INIT}, {"BOOT", GB_LOG_BOOT},     {"NET", GB_LOG_NET}, {"COLL", GB_LOG_COLL},
    {"PROXY", GB_LOG_PROXY}, {"DEVICE", GB_LOG_DEVICE}, {"ENV", GB_LOG_ENV}, {"ALL", GB_LOG_ALL},
};
#define NSUBSYS (sizeof(subsysNames) / sizeof(subsysNames[0]))

/* "NET,COLL" or "^PROXY"; unknown names are skipped (the parameter table
 * reports them as invalid). */
static int parseSubsys(const char* text) {
  int negate = 0, mask = 0;
  if (text[0] == '\0') return GB_LOG_ALL;
  if (text[0] == '^') { negate = 1; text++; }
  while (*text) {
    size_t n = strcspn(text, ",");
    for (size_t i = 0; i < NSUBSYS; i++)
      if (strlen(subsysNames[i].name) == n && strncasecmp(text, subsysNames[i].name, n) == 0)
        mask |= subsysNames[i].bit;
    text += n;
    if (*text == ',') text++;
  }
  return negate ? (GB_LOG_ALL & ~mask) : mask;
}

static const char* subsysName(int subsys) {
  if (subsys == GB_LOG_ALL) return "ALL";
  for (size_t i = 0; i < NSUBSYS; i++)
    if (subsys & subsysNames[i].bit) return subsysNames[i].name;
  return "ALL";
}

/* %h -> host, %p -> pid, %% -> %. */
static void expandPath(const char* tmpl, char* out, size_t len) {
  size_t o = 0;
  for (const char* p = tmpl; *p && o + 1 < len; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p' || p[1] == '%')) {
      int w = (p[1] == 'h') ? snprintf(out + o, len - o, "%s", host)
              : (p[1] == 'p') ? snprintf(out + o, len - o, "%d", (int)getpid())
                              : snprintf(out + o, len - o, "%%");
      if (w < 0) break;
      o += (size_t)w;
      if (o >= len) o = len - 1;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

/* The parameter table's warnings (unknown GPUBRIDGE_* names) are log lines. */
static void paramWarning(const char* line, int len) {
  gbLogWrite(GB_LOG_WARN, GB_LOG_ENV, __FILE__, __LINE__, "%.*s", len, line);
}

static void readSettings(void) {
  inInit = 1;
  gbParamSetWarnSink(paramWarning); /* what the read below warns about waits in `pending` until settings are known */
  gbParamInit();
  const char* simHost = gbParamString(GB_PARAM_SIM_HOST);
  if (simHost[0]) snprintf(host, sizeof(host), "%s", simHost);
  else if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';

  atomic_store(&level, (int)gbParamInt(GB_PARAM_DEBUG));
  atomic_store(&subsysMask, parseSubsys(gbParamString(GB_PARAM_DEBUG_SUBSYS)));
  const char* file = gbParamString(GB_PARAM_DEBUG_FILE);
  if (file[0]) expandPath(file, filePath, sizeof(filePath));

  pthread_mutex_lock(&mu);
  if (!modeSetByCaller) {
    const char* vendor = gbParamString(GB_PARAM_VENDOR);
    if (vendor[0]) snprintf(mode, sizeof(mode), "simulated %s", vendor);
  }
  pthread_mutex_unlock(&mu);
  inInit = 0;
  atomic_store(&pendingReady, 1);
}

void gbLogInit(void) {
  if (inInit) return;
  pthread_once(&initOnce, readSettings);
  if (atomic_exchange(&pendingReady, 0)) {
    for (int i = 0; i < npending; i++)
      gbLogWrite((gbLogLevel_t)pending[i].level, pending[i].subsys, NULL, 0, "%s", pending[i].text);
    npending = 0;
  }
}

void gbLogSetRank(int rank) { atomic_store(&rankShown, rank < 0 ? -1 : rank); }

void gbLogSetMode(const char* m) {
  pthread_mutex_lock(&mu);
  snprintf(mode, sizeof(mode), "%s", m ? m : "");
  modeSetByCaller = 1;
  pthread_mutex_unlock(&mu);
}

int gbLogEnabled(gbLogLevel_t lvl, int subsys) {
  if (inInit) return lvl == GB_LOG_WARN; /* kept until the settings are known */
  gbLogInit();
  if (lvl == GB_LOG_NONE || (int)lvl > atomic_load(&level)) return 0;
  return lvl == GB_LOG_WARN || (atomic_load(&subsysMask) & subsys) != 0;
}

void gbLogSetHook(gbLogHook_t h) {
  atomic_store(&hook, h);
  gbParamSetWarnSink(paramWarning);
}

static void writeAll(int f, const char* buf, size_t len) {
  while (len > 0) {
    ssize_t w = write(f, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    buf += w;
    len -= (size_t)w;
  }
}

/* The output descriptor; the file is opened on first use so that a process
 * that never logs creates no file. Called with mu held. */
static int outputFd(void) {
  if (fd >= 0) return fd;
  fd = STDERR_FILENO;
  if (filePath[0]) {
    int f = open(filePath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f >= 0) {
      fd = f;
    } else {
      char msg[PATH_LEN + 256];
      int n = snprintf(msg, sizeof(msg),
                       "gpubridge: cannot open GPUBRIDGE_DEBUG_FILE %s (%s); logging to stderr\n",
                       filePath, strerror(errno));
      if (n > 0) writeAll(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    }
  }
  return fd;
}

static const char* levelName(gbLogLevel_t lvl) {
  return lvl == GB_LOG_WARN ? "WARN" : lvl == GB_LOG_INFO ? "INFO" : lvl == GB_LOG_TRACE ? "TRACE" : "NONE";
}

void gbLogWrite(gbLogLevel_t lvl, int subsys, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  if (inInit) {
    if (lvl == GB_LOG_WARN && npending < PENDING_MAX) {
      pending[npending].level = lvl;
      pending[npending].subsys = subsys;
      va_start(ap, fmt);
      vsnprintf(pending[npending].text, PENDING_LEN, fmt, ap);
      va_end(ap);
      npending++;
    }
    return;
  }
  if (!gbLogEnabled(lvl, subsys)) return;

  char buf[LINE_MAX_BYTES];
  size_t n = 0;
  int rank = atomic_load(&rankShown);
  char rankText[16];
  if (rank >= 0) snprintf(rankText, sizeof(rankText), "%d", rank);
  else snprintf(rankText, sizeof(rankText), "-");

  pthread_mutex_lock(&mu);
  int w = snprintf(buf, sizeof(buf), "%s:%d:%ld [%s] gpubridge%s%s %s %s ", host, (int)getpid(),
                   (long)syscall(SYS_gettid), rankText, mode[0] ? " " : "", mode, levelName(lvl),
                   subsysName(subsys));
  pthread_mutex_unlock(&mu);
  if (w > 0) n = (size_t)w < sizeof(buf) ? (size_t)w : sizeof(buf) - 1;
  if (lvl == GB_LOG_TRACE && file && n < sizeof(buf)) {
    const char* base = strrchr(file, '/');
    w = snprintf(buf + n, sizeof(buf) - n, "%s:%d ", base ? base + 1 : file, line);
    if (w > 0) n += (size_t)w < sizeof(buf) - n ? (size_t)w : sizeof(buf) - n - 1;
  }
  va_start(ap, fmt);
  w = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
  va_end(ap);
  if (w > 0) n += (size_t)w < sizeof(buf) - n ? (size_t)w : sizeof(buf) - n - 1;
  /* Always end with one newline, even when the message was cut. */
  if (n >= sizeof(buf) - 1) n = sizeof(buf) - 2;
  while (n > 0 && buf[n - 1] == '\n') n--;
  buf[n] = '\n';
  buf[n + 1] = '\0';

  pthread_mutex_lock(&mu);
  int out = outputFd();
  pthread_mutex_unlock(&mu);
  writeAll(out, buf, n + 1);

  gbLogHook_t h = atomic_load(&hook);
  if (h) {
    buf[n] = '\0'; /* the hook gets the line without its newline */
    h((int)lvl, buf);
  }
}
