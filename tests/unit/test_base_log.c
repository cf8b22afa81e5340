/* base/log: each case runs in a child process (logging reads its settings
 * once per process) and writes to GPUBRIDGE_DEBUG_FILE; the parent checks the
 * file line by line against the expected text. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"

#include "unit/check.h"

static char dir[256];

/* Runs body in a child with a clean GPUBRIDGE_* environment plus the given
 * assignments; returns the child's pid after it exited with 0. */
static pid_t runChild(const char* const* env, int (*body)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    static const char* names[] = {"GPUBRIDGE_DEBUG", "GPUBRIDGE_DEBUG_SUBSYS", "GPUBRIDGE_DEBUG_FILE",
                                  "GPUBRIDGE_VENDOR", "GPUBRIDGE_SIM_HOST"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) unsetenv(names[i]);
    for (int i = 0; env[i]; i += 2) setenv(env[i], env[i + 1], 1);
    _exit(body());
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait: %s", strerror(errno));
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed (status %d)", (int)pid, status);
  return pid;
}

static char* readFile(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[8 << 20];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int childInfoNet(void) {
  gbLogSetRank(3);
  if (!gbLogEnabled(GB_LOG_INFO, GB_LOG_NET) || gbLogEnabled(GB_LOG_INFO, GB_LOG_COLL)) return 10;
  if (gbLogEnabled(GB_LOG_TRACE, GB_LOG_NET)) return 11;
  GB_INFO(GB_LOG_NET, "net info %d", 42);
  GB_INFO(GB_LOG_COLL, "coll info hidden");
  GB_TRACE(GB_LOG_NET, "trace hidden");
  GB_WARN("a warning %s", "always");
  /* WARN is written whatever the subsystem mask. */
  gbLogWrite(GB_LOG_WARN, GB_LOG_COLL, __FILE__, __LINE__, "coll warning");
  return 0;
}

static void testInfoBySubsys(void) {
  char tmpl[300];
  snprintf(tmpl, sizeof(tmpl), "%s/a.%%h.%%p.log", dir);
  const char* env[] = {"GPUBRIDGE_DEBUG", "info", "GPUBRIDGE_DEBUG_SUBSYS", "NET,BOOT", "GPUBRIDGE_DEBUG_FILE", tmpl,
                       "GPUBRIDGE_VENDOR", "nvidia", "GPUBRIDGE_SIM_HOST", "simhost1", NULL};
  pid_t pid = runChild(env, childInfoNet);
  char path[300], want[512];
  snprintf(path, sizeof(path), "%s/a.simhost1.%d.log", dir, (int)pid);
  char* text = readFile(path);
  CHECK(text != NULL, "%s was not written", path);
  if (!text) return;
  /* The child is single-threaded: its thread id is its pid. */
  snprintf(want, sizeof(want),
           "simhost1:%d:%d [3] gpubridge simulated nvidia INFO NET net info 42\n"
           "simhost1:%d:%d [3] gpubridge simulated nvidia WARN ALL a warning always\n"
           "simhost1:%d:%d [3] gpubridge simulated nvidia WARN COLL coll warning\n",
           (int)pid, (int)pid, (int)pid, (int)pid, (int)pid, (int)pid);
  CHECK(strcmp(text, want) == 0, "log file:\n%s--- want:\n%s---", text, want);
}

static int childDefault(void) {
  if (gbLogEnabled(GB_LOG_INFO, GB_LOG_ALL)) return 10;
  GB_INFO(GB_LOG_INIT, "hidden at the default level");
  GB_WARN("shown");
  return 0;
}

static void testDefaultHidesInfo(void) {
  char tmpl[300];
  snprintf(tmpl, sizeof(tmpl), "%s/b.%%p.log", dir);
  const char* env[] = {"GPUBRIDGE_DEBUG_FILE", tmpl, "GPUBRIDGE_SIM_HOST", "h2", NULL};
  pid_t pid = runChild(env, childDefault);
  char path[300], want[256];
  snprintf(path, sizeof(path), "%s/b.%d.log", dir, (int)pid);
  char* text = readFile(path);
  CHECK(text != NULL, "%s was not written", path);
  if (!text) return;
  snprintf(want, sizeof(want), "h2:%d:%d [-] gpubridge WARN ALL shown\n", (int)pid, (int)pid);
  CHECK(strcmp(text, want) == 0, "log file:\n%s--- want:\n%s---", text, want);
}

static int childNegate(void) {
  gbLogSetMode("real amd");
  GB_INFO(GB_LOG_COLL, "coll hidden");
  GB_TRACE(GB_LOG_PROXY, "proxy trace");
  GB_INFO(GB_LOG_DEVICE, "device info");
  return 0;
}

static void testNegateAndMode(void) {
  char tmpl[300];
  snprintf(tmpl, sizeof(tmpl), "%s/c.%%p.log", dir);
  const char* env[] = {"GPUBRIDGE_DEBUG", "TRACE", "GPUBRIDGE_DEBUG_SUBSYS", "^coll", "GPUBRIDGE_DEBUG_FILE", tmpl,
                       "GPUBRIDGE_VENDOR", "nvidia", "GPUBRIDGE_SIM_HOST", "h3", NULL};
  pid_t pid = runChild(env, childNegate);
  char path[300], want1[256], want2[256];
  snprintf(path, sizeof(path), "%s/c.%d.log", dir, (int)pid);
  char* text = readFile(path);
  CHECK(text != NULL, "%s was not written", path);
  if (!text) return;
  /* TRACE lines carry file:line before the message. */
  snprintf(want1, sizeof(want1), "h3:%d:%d [-] gpubridge real amd TRACE PROXY test_base_log.c:", (int)pid, (int)pid);
  snprintf(want2, sizeof(want2), "h3:%d:%d [-] gpubridge real amd INFO DEVICE device info\n", (int)pid, (int)pid);
  char* nl = strchr(text, '\n');
  CHECK(strncmp(text, want1, strlen(want1)) == 0 && nl && strncmp(nl - 12, " proxy trace", 12) == 0,
        "first line: %s", text);
  CHECK(nl && strcmp(nl + 1, want2) == 0, "second line: %s want %s", nl ? nl + 1 : "(none)", want2);
  CHECK(strstr(text, "coll hidden") == NULL, "COLL is excluded by ^coll");
}

/* Threads writing long lines at once: every line must come out whole. */
#define THREADS 4
#define LINES 300
static void* writer(void* arg) {
  long id = (long)arg;
  char payload[1500];
  memset(payload, 'a' + (int)id, sizeof(payload) - 1);
  payload[sizeof(payload) - 1] = '\0';
  for (int i = 0; i < LINES; i++) GB_INFO(GB_LOG_COLL, "T%ld %d %s END", id, i, payload);
  return NULL;
}
static int childThreads(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    if (pthread_create(&t[i], NULL, writer, (void*)i) != 0) return 10;
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  return 0;
}
static void testWholeLines(void) {
  char tmpl[300];
  snprintf(tmpl, sizeof(tmpl), "%s/d.%%p.log", dir);
  const char* env[] = {"GPUBRIDGE_DEBUG", "INFO", "GPUBRIDGE_DEBUG_FILE", tmpl, "GPUBRIDGE_SIM_HOST", "h4", NULL};
  pid_t pid = runChild(env, childThreads);
  char path[300];
  snprintf(path, sizeof(path), "%s/d.%d.log", dir, (int)pid);
  char* text = readFile(path);
  CHECK(text != NULL, "%s was not written", path);
  if (!text) return;
  int count[THREADS] = {0}, bad = 0;
  for (char* line = text; *line;) {
    char* end = strchr(line, '\n');
    if (!end) { bad++; break; }
    *end = '\0';
    long id = -1;
    char* t = strstr(line, " INFO COLL T");
    if (t) id = strtol(t + 12, NULL, 10);
    int ok = strncmp(line, "h4:", 3) == 0 && id >= 0 && id < THREADS && strlen(end - 4) == 4 &&
             strcmp(end - 4, " END") == 0;
    if (ok) {
      /* The payload is one letter, all of it. */
      char* p = strchr(strchr(t + 12, ' ') + 1, ' ') + 1;
      for (int k = 0; k < 1499; k++) ok &= (p[k] == 'a' + id);
    }
    if (ok) count[id]++;
    else bad++;
    line = end + 1;
  }
  CHECK(bad == 0, "%d malformed lines", bad);
  for (int i = 0; i < THREADS; i++) CHECK(count[i] == LINES, "thread %d: %d lines of %d", i, count[i], LINES);
}

/* The hook gets each written line, without its newline; filtered ones not. */
static int hookCalls, hookBad;
static void hook(int level, const char* line) {
  hookCalls++;
  if (level != GB_LOG_WARN || strchr(line, '\n') || !strstr(line, " WARN ALL hooked 7")) hookBad++;
}
static int childHook(void) {
  gbLogSetHook(hook);
  GB_INFO(GB_LOG_NET, "not written, not hooked");
  GB_WARN("hooked %d", 7);
  gbLogSetHook(NULL);
  GB_WARN("after the hook was removed");
  return (hookCalls == 1 && hookBad == 0) ? 0 : 10;
}
static void testHook(void) {
  char tmpl[300];
  snprintf(tmpl, sizeof(tmpl), "%s/e.%%p.log", dir);
  const char* env[] = {"GPUBRIDGE_DEBUG_FILE", tmpl, NULL};
  runChild(env, childHook); /* the child's exit status carries the verdict */
}

/* A file that cannot be opened: one warning on stderr, then lines go to stderr. */
static char errPath[300];
static int childBadFile(void) {
  FILE* f = freopen(errPath, "w", stderr);
  if (!f) return 10;
  GB_WARN("first");
  GB_WARN("second");
  return 0;
}
static void testBadFile(void) {
  snprintf(errPath, sizeof(errPath), "%s/stderr.txt", dir);
  const char* env[] = {"GPUBRIDGE_DEBUG_FILE", "/nonexistent-gpubridge-dir/x.log", "GPUBRIDGE_SIM_HOST", "h5", NULL};
  pid_t pid = runChild(env, childBadFile);
  char* text = readFile(errPath);
  CHECK(text != NULL, "no stderr capture");
  if (!text) return;
  char want[256];
  snprintf(want, sizeof(want), "h5:%d:%d [-] gpubridge WARN ALL first\nh5:%d:%d [-] gpubridge WARN ALL second\n",
           (int)pid, (int)pid, (int)pid, (int)pid);
  char* first = strstr(text, "cannot open GPUBRIDGE_DEBUG_FILE /nonexistent-gpubridge-dir/x.log");
  CHECK(first != NULL && strstr(first + 1, "cannot open") == NULL, "one open warning: %s", text);
  CHECK(strstr(text, want) != NULL, "lines on stderr:\n%s--- want:\n%s", text, want);
}

int main(void) {
  snprintf(dir, sizeof(dir), "/tmp/gb_test_log_XXXXXX");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "FAIL: mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  testInfoBySubsys();
  testDefaultHidesInfo();
  testNegateAndMode();
  testWholeLines();
  testHook();
  testBadFile();
  if (failures) {
    fprintf(stderr, "test_base_log: %d failures (files kept in %s)\n", failures, dir);
    return 1;
  }
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
  printf("test_base_log: ok\n");
  return 0;
}
