/* Monotonic time for the launcher's deadlines (the timeout, the SIGTERM grace). */
#include <limits.h>
#include <time.h>
#include "run.h"

int64_t gbRunClockNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int gbRunClockMsUntil(int64_t deadlineNs) {
  int64_t left = deadlineNs - gbRunClockNowNs();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000; /* round up: never wake just before the deadline */
  return ms > INT_MAX ? INT_MAX : (int)ms;
}
