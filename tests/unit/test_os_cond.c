/* os/cond: a timed wait ends at its monotonic deadline (not at once, not
 * never), reports the timeout, and a signal ends it early without one; the
 * same on a condition variable made with the default clock. */
#include <pthread.h>
#include <time.h>
#include <stdio.h>

#include "base/clock.h"
#include "check.h"
#include "os/cond.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int ready;

static void* signaller(void* arg) {
  (void)arg;
  struct timespec ts = {0, 20 * 1000000L};
  nanosleep(&ts, NULL);
  pthread_mutex_lock(&mu);
  ready = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void testTimeout(pthread_cond_t* c, const char* what) {
  pthread_mutex_lock(&mu);
  int64_t t0 = gbClockNowNs();
  gbDeadline_t d = gbDeadlineIn(0.05);
  int timedOut = 0;
  while (!timedOut) timedOut = gbCondWaitUntil(c, &mu, d); /* wake-ups may be spurious */
  double s = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(gbDeadlinePassed(d), "%s: the wait said it timed out before its deadline (%.3f s)", what, s);
  CHECK(s < 5.0, "%s: a 50 ms wait took %.3f s", what, s);
  t0 = gbClockNowNs();
  int r = gbCondWaitMs(c, &mu, 30);
  while (!r && gbClockNowNs() - t0 < 30 * 1000000LL) r = gbCondWaitMs(c, &mu, 30);
  s = (double)(gbClockNowNs() - t0) / 1e9;
  CHECK(r == 1 && s >= 0.029 && s < 5.0, "%s: a 30 ms wait returned %d after %.3f s", what, r, s);
  CHECK(gbCondWaitMs(c, &mu, 0) == 1, "%s: a 0 ms wait did not time out", what);
  pthread_mutex_unlock(&mu);
}

static void testSignal(void) {
  ready = 0;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, signaller, NULL) == 0, "pthread_create");
  pthread_mutex_lock(&mu);
  gbDeadline_t d = gbDeadlineIn(30.0);
  int timedOut = 0;
  while (!ready && !timedOut) timedOut = gbCondWaitUntil(&cv, &mu, d);
  CHECK(ready && !timedOut, "the signalled wait ended with ready %d, timed out %d", ready, timedOut);
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);
}

int main(void) {
  CHECK(gbCondInit(&cv) == 0, "gbCondInit");
  testTimeout(&cv, "monotonic");
  testSignal();
  pthread_cond_destroy(&cv);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
  /* Where the wait names its clock (cond.c), the cond's own clock does not matter. */
  pthread_cond_t plain = PTHREAD_COND_INITIALIZER;
  testTimeout(&plain, "default clock");
#endif
  if (failures) fprintf(stderr, "%d failures\n", failures);
  else printf("test_os_cond: ok\n");
  return failures ? 1 : 0;
}
