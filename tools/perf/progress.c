/* --progress (or, by default, rank 0's stderr being a terminal): where a
 * long sweep stands, on rank 0's stderr: the size k of n and the time left.
 * On a terminal one line is drawn while a size runs and cleared before its
 * row is printed; elsewhere (a launcher's pipe) a line per size. The time left assumes a size costs its
 * bytes plus a fixed 64 KiB's worth per call, scaled by what the sizes so far
 * took. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define PER_SIZE_OVERHEAD_BYTES (64.0 * 1024.0)

static double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cost(size_t bytes) { return (double)bytes + PER_SIZE_OVERHEAD_BYTES; }

void perfProgressStart(perfProgress_t* p, const perfOptions_t* opts, int rank, size_t unit, const char* what) {
  *p = (perfProgress_t){0};
  p->on = rank == 0 && opts->progress != 0 && (opts->progress > 0 || isatty(STDERR_FILENO));
  if (!p->on) return;
  p->terminal = isatty(STDERR_FILENO);
  p->what = what;
  size_t raw = 0, bytes = 0;
  while (perfOptionsNextSize(opts, unit, &raw, &bytes)) {
    p->total++;
    p->costLeft += cost(bytes);
  }
  p->start = nowS();
}

void perfProgressSize(perfProgress_t* p, size_t bytes) {
  if (!p->on) return;
  double elapsed = nowS() - p->start;
  char left[48] = "";
  double leftS = p->costDone > 0 ? elapsed / p->costDone * p->costLeft : -1.0;
  if (leftS >= 1.0) snprintf(left, sizeof(left), ", about %.0f s left", leftS);
  else if (leftS >= 0.0) snprintf(left, sizeof(left), ", under a second left");
  fprintf(stderr, "%sgpubridge-perf: %s: size %d of %d (%zu bytes)%s%s", p->terminal ? "\r\033[K" : "", p->what,
          p->done + 1, p->total, bytes, left, p->terminal ? "" : "\n");
  fflush(stderr);
  p->done++;
  p->costDone += cost(bytes);
  p->costLeft -= cost(bytes);
}

void perfProgressClear(perfProgress_t* p) {
  if (p->on && p->terminal) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
}
