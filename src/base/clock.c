/* Monotonic time and deadlines: wall-clock jumps must not end or stretch a wait. */
#include "base/clock.h"

#include <limits.h>
#include <time.h>

int64_t gbClockNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

gbDeadline_t gbDeadlineIn(double seconds) {
  gbDeadline_t d;
  int64_t now = gbClockNowNs();
  double ns = seconds * 1e9;
  /* Clamp so a huge timeout cannot overflow into the past. */
  if (ns >= (double)(INT64_MAX - now)) d.ns = INT64_MAX;
  else if (ns <= 0) d.ns = now;
  else d.ns = now + (int64_t)ns;
  return d;
}

int gbDeadlinePassed(gbDeadline_t d) { return gbClockNowNs() >= d.ns; }

int gbDeadlineRemainingMs(gbDeadline_t d, int capMs) {
  if (capMs < 0) capMs = 0;
  int64_t left = d.ns - gbClockNowNs();
  if (left <= 0) return 0;
  /* Round up so a poll() does not wake just before the deadline and spin. */
  int64_t ms = (left + 999999) / 1000000;
  return ms > capMs ? capMs : (int)ms;
}
