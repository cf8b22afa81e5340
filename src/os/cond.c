/* Timed condition-variable waits on CLOCK_MONOTONIC (cond.h). */
#include "os/cond.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

int gbCondInit(pthread_cond_t* cond) {
  pthread_condattr_t ca;
  int err = pthread_condattr_init(&ca);
  if (err != 0) return err;
  err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (err == 0) err = pthread_cond_init(cond, &ca);
  pthread_condattr_destroy(&ca);
  return err;
}

int gbCondWaitUntil(pthread_cond_t* cond, pthread_mutex_t* mutex, gbDeadline_t deadline) {
  struct timespec ts = {(time_t)(deadline.ns / 1000000000LL), (long)(deadline.ns % 1000000000LL)};
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
  /* Names the clock itself, so it holds also for a condition variable made
   * with the default (realtime) clock. */
  int err = pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &ts);
#else
  int err = pthread_cond_timedwait(cond, mutex, &ts);
#endif
  return err == ETIMEDOUT;
}

int gbCondWaitMs(pthread_cond_t* cond, pthread_mutex_t* mutex, int ms) {
  gbDeadline_t d = {gbClockNowNs() + (int64_t)(ms > 0 ? ms : 0) * 1000000LL};
  return gbCondWaitUntil(cond, mutex, d);
}
