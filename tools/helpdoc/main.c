/* gpubridge-helpdoc --tool PATH --name NAME --summary TEXT --see-also "A B"
 *                   --license LICENSE --man OUT.1 --completion OUT
 * Runs `PATH --help` and `PATH --version` (each within 60 s), and writes the
 * tool's man page and bash completion from what they print (helpdoc.h).
 * Each output is written to OUT.tmp and renamed, so a failed run leaves no
 * half file. Exit 0, or 1 with the reason on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "helpdoc.h"

#define RUN_SECONDS 60
#define OUTPUT_MAX (1 << 20)

static const char* me = "gpubridge-helpdoc";

static double nowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What `tool flag` printed on stdout, NUL-terminated (malloc'ed), or NULL
 * after saying why on stderr. */
static char* capture(const char* tool, const char* flag) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    fprintf(stderr, "%s: pipe: %s\n", me, strerror(errno));
    return NULL;
  }
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "%s: fork: %s\n", me, strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return NULL;
  }
  if (pid == 0) {
    if (dup2(fds[1], 1) < 0) _exit(127);
    execl(tool, tool, flag, (char*)NULL);
    dprintf(2, "%s: cannot run %s: %s\n", me, tool, strerror(errno));
    _exit(127);
  }
  close(fds[1]);

  char* out = malloc(OUTPUT_MAX + 1);
  size_t len = 0;
  const char* why = out ? NULL : "out of memory";
  double deadline = nowSeconds() + RUN_SECONDS;
  while (!why) {
    int left = (int)((deadline - nowSeconds()) * 1000);
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    int r = left > 0 ? poll(&p, 1, left) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      why = "did not end within 60 s";
      break;
    }
    ssize_t n = read(fds[0], out + len, OUTPUT_MAX - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = strerror(errno);
    if (n <= 0) break;
    len += (size_t)n;
    if (len == OUTPUT_MAX) why = "printed more than 1 MiB";
  }
  close(fds[0]);
  if (why) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!why && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) why = "failed (its exit status is not 0)";
  if (why) {
    fprintf(stderr, "%s: `%s %s` %s\n", me, tool, flag, why);
    free(out);
    return NULL;
  }
  out[len] = '\0';
  return out;
}

/* The LICENSE's first line and its "Copyright" line, or -1 after saying why. */
static int readLicense(const char* path, char* name, char* copyright, size_t size) {
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "%s: cannot read %s: %s\n", me, path, strerror(errno));
    return -1;
  }
  char line[512];
  name[0] = copyright[0] = '\0';
  for (int n = 0; fgets(line, sizeof(line), f); n++) {
    line[strcspn(line, "\r\n")] = '\0';
    if (n == 0) snprintf(name, size, "%s", line);
    if (!copyright[0] && strncmp(line, "Copyright", 9) == 0) snprintf(copyright, size, "%s", line);
  }
  fclose(f);
  if (!name[0] || !copyright[0]) {
    fprintf(stderr, "%s: %s has no %s\n", me, path, name[0] ? "'Copyright' line" : "first line");
    return -1;
  }
  return 0;
}

typedef int (*writer_t)(FILE* f, const gbHelpDoc_t* doc, const gbManInfo_t* info);

static int writeMan(FILE* f, const gbHelpDoc_t* doc, const gbManInfo_t* info) {
  return gbManWrite(f, doc, info);
}

static int writeCompletion(FILE* f, const gbHelpDoc_t* doc, const gbManInfo_t* info) {
  return gbCompletionWrite(f, doc, info->name, info->version);
}

static int writeFile(const char* path, writer_t put, const gbHelpDoc_t* doc, const gbManInfo_t* info) {
  char tmp[4096];
  if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
    fprintf(stderr, "%s: the path %s is too long\n", me, path);
    return -1;
  }
  FILE* f = fopen(tmp, "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", me, tmp, strerror(errno));
    return -1;
  }
  int bad = put(f, doc, info) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    fprintf(stderr, "%s: cannot write %s: %s\n", me, path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

static void usage(void) {
  fprintf(stderr, "usage: %s --tool PATH --name NAME --summary TEXT --see-also \"NAME ...\" --license LICENSE\n"
                  "       %*s --man OUT.1 --completion OUT\n", me, (int)strlen(me), "");
}

int main(int argc, char** argv) {
  const char *tool = NULL, *manPath = NULL, *completionPath = NULL, *licensePath = NULL;
  gbManInfo_t info = {.seeAlso = ""};
  for (int i = 1; i < argc; i++) {
    const char** slot = strcmp(argv[i], "--tool") == 0         ? &tool
                        : strcmp(argv[i], "--name") == 0       ? &info.name
                        : strcmp(argv[i], "--summary") == 0    ? &info.summary
                        : strcmp(argv[i], "--see-also") == 0   ? &info.seeAlso
                        : strcmp(argv[i], "--license") == 0    ? &licensePath
                        : strcmp(argv[i], "--man") == 0        ? &manPath
                        : strcmp(argv[i], "--completion") == 0 ? &completionPath
                                                               : NULL;
    if (!slot || i + 1 >= argc) {
      fprintf(stderr, "%s: %s %s\n", me, slot ? "no value after" : "unknown argument", argv[i]);
      usage();
      return 1;
    }
    *slot = argv[++i];
  }
  if (!tool || !info.name || !info.summary || !licensePath || !manPath || !completionPath) {
    usage();
    return 1;
  }

  char licenseName[512], copyright[512];
  if (readLicense(licensePath, licenseName, copyright, sizeof(licenseName)) != 0) return 1;
  info.license = licenseName;
  info.copyright = copyright;

  char* version = capture(tool, "--version");
  char* help = version ? capture(tool, "--help") : NULL;
  int rc = 1;
  gbHelpDoc_t doc;
  char err[256];
  if (help) {
    version[strcspn(version, "\n")] = '\0';
    info.version = version;
    if (!version[0]) {
      fprintf(stderr, "%s: `%s --version` printed no version\n", me, tool);
    } else if (gbHelpParse(help, &doc, err, sizeof(err)) != 0) {
      fprintf(stderr, "%s: `%s --help`: %s\n", me, tool, err);
    } else {
      if (writeFile(manPath, writeMan, &doc, &info) == 0 && writeFile(completionPath, writeCompletion, &doc, &info) == 0)
        rc = 0;
      gbHelpFree(&doc);
    }
  }
  free(version);
  free(help);
  return rc;
}
