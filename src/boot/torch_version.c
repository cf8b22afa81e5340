/* torch's version from an ancestor's mappings: /proc/PID/maps names
 * .../site-packages/torch/lib/libtorch*.so, and .../torch/version.py beside
 * it holds "__version__ = '2.13.0+cpu'". */
#include "boot/torch_version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GENERATIONS 4
#define LIB_MARK "/torch/lib/libtorch"

/* The parent of pid from /proc/PID/stat, or 0. */
static int parentOf(int pid) {
  char path[64], line[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (!f) return 0;
  int ppid = 0;
  if (fgets(line, sizeof(line), f)) {
    const char* end = strrchr(line, ')'); /* the command may hold spaces and parentheses */
    if (end) (void)sscanf(end + 1, " %*c %d", &ppid);
  }
  fclose(f);
  return ppid;
}

/* The torch folder (".../torch/") whose libraries pid has mapped, into dir. */
static int torchDirOf(int pid, char* dir, size_t len) {
  char path[64], line[4096];
  snprintf(path, sizeof(path), "/proc/%d/maps", pid);
  FILE* f = fopen(path, "re");
  if (!f) return 0;
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) {
    char* mark = strstr(line, LIB_MARK);
    char* start = strchr(line, '/');
    if (!mark || !start || start > mark) continue;
    size_t n = (size_t)(mark - start) + strlen("/torch/");
    if (n < len) {
      memcpy(dir, start, n);
      dir[n] = '\0';
      found = 1;
    }
  }
  fclose(f);
  return found;
}

static int versionIn(const char* dir, char* out, size_t len) {
  char path[4200], line[256];
  snprintf(path, sizeof(path), "%sversion.py", dir);
  FILE* f = fopen(path, "re");
  if (!f) return 0;
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) {
    if (strncmp(line, "__version__", strlen("__version__")) != 0) continue;
    const char* q = strpbrk(line, "'\"");
    const char* e = q ? strchr(q + 1, *q) : NULL;
    if (!e || e - q - 1 <= 0) continue;
    snprintf(out, len, "%.*s", (int)(e - q - 1), q + 1);
    found = 1;
  }
  fclose(f);
  return found;
}

int gbBootTorchVersion(char* out, size_t len) {
  char dir[4096];
  int pid = (int)getppid();
  for (int g = 0; g < GENERATIONS && pid > 1; g++, pid = parentOf(pid))
    if (torchDirOf(pid, dir, sizeof(dir)) && versionIn(dir, out, len)) return 1;
  snprintf(out, len, "unknown");
  return 0;
}
