#include "os/backoff.h"

#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#define TIMER_SLACK_NS 1000

void gbOsLowTimerSlack(void) {
  static _Thread_local int done;
  if (done) return;
  (void)prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0); /* best effort: only the sleeps' length */
  done = 1;
}

int64_t gbOsSleepNs(int64_t waitedNs, int64_t maxNs) {
  int64_t cap = maxNs > 0 ? maxNs : GB_OS_SLEEP_MAX_NS;
  int64_t ns = waitedNs / 4;
  if (ns < GB_OS_SLEEP_NS) ns = GB_OS_SLEEP_NS;
  return ns < cap ? ns : cap;
}

void gbOsBackoff(int64_t waitedNs, int64_t yieldNs, int64_t maxSleepNs) {
  if (waitedNs < yieldNs) {
    sched_yield();
    return;
  }
  gbOsLowTimerSlack();
  const struct timespec ts = {0, (long)gbOsSleepNs(waitedNs, maxSleepNs)};
  nanosleep(&ts, NULL);
}
