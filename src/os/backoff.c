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

void gbOsBackoff(int64_t waitedNs, int64_t yieldNs) {
  if (waitedNs < yieldNs) {
    sched_yield();
    return;
  }
  gbOsLowTimerSlack();
  const struct timespec ts = {0, GB_OS_SLEEP_NS};
  nanosleep(&ts, NULL);
}
