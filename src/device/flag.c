/* Host-side flag signalling: the proxy thread and the host device's streams
 * hand work over through gbFlag_t words in host memory. */
#include "device/device.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/result.h"
#include "os/backoff.h"

/* Waits yield, then sleep (os/backoff.h); the sleep here is on the
 * flag's futex, so a flag set on the host wakes the waiter at once, and a flag
 * a GPU writes (which wakes nobody) is looked at after each sleep, whose
 * length grows with the wait (gbOsSleepNs). */

/* The flag's low 32 bits of value, which every store changes, as a futex
 * word (little-endian hosts; elsewhere the sleep alone bounds the wait).
 * flag->sleepers counts sleeping waiters, so a setter without any makes no call. */
static uint32_t* futexWord(gbFlag_t* flag) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return (uint32_t*)(void*)&flag->value;
#else
  (void)flag;
  return NULL;
#endif
}

static void sleepOn(gbFlag_t* flag, uint64_t seen, int64_t waitedNs) {
  gbOsLowTimerSlack();
  const struct timespec interval = {0, (long)gbOsSleepNs(waitedNs)};
  uint32_t* word = futexWord(flag);
  if (!word) {
    nanosleep(&interval, NULL);
    return;
  }
  __atomic_add_fetch(&flag->sleepers, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, (uint32_t)seen, &interval, NULL, 0);
  __atomic_sub_fetch(&flag->sleepers, 1, __ATOMIC_SEQ_CST);
}

double gbFlagStreamWaitSec(const gbFlag_t* flag, double fallbackSec) {
  return flag->timeoutSec > 0 ? (double)flag->timeoutSec + GB_FLAG_WAIT_MARGIN_SEC : fallbackSec;
}

void gbFlagSetHost(gbFlag_t* flag, uint64_t value, int error) {
  /* The error goes first so that a waiter that sees the new value also sees it. */
  if (error != 0) __atomic_store_n(&flag->error, error, __ATOMIC_RELEASE);
  __atomic_store_n(&flag->value, value, __ATOMIC_SEQ_CST);
  uint32_t* word = futexWord(flag);
  if (word && __atomic_load_n(&flag->sleepers, __ATOMIC_SEQ_CST) > 0)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

/* 1 when the wait is over; *res says how. */
static int check(gbFlag_t* flag, uint64_t target, const volatile int* abortFlag, gbResult_t* res) {
  /* Value before error: the setter stores the error first, so reading the
   * value with acquire makes an error stored with it visible. */
  uint64_t v = __atomic_load_n(&flag->value, __ATOMIC_ACQUIRE);
  int e = __atomic_load_n(&flag->error, __ATOMIC_ACQUIRE);
  if (e != 0) {
    *res = (gbResult_t)e;
    return 1;
  }
  if (v >= target) {
    *res = gbSuccess;
    return 1;
  }
  if (abortFlag && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE)) {
    *res = gbErrorSet(gbRemoteError,
                      "aborted while waiting for a flag to reach %llu (it holds %llu): "
                      "the communicator was aborted",
                      (unsigned long long)target, (unsigned long long)v);
    return 1;
  }
  return 0;
}

gbResult_t gbFlagWaitHost(gbFlag_t* flag, uint64_t value, double timeoutSec,
                          const volatile int* abortFlag) {
  gbResult_t res = gbSuccess;
  gbDeadline_t deadline = gbDeadlineIn(timeoutSec);
  int64_t start = gbClockNowNs();
  /* A GPU's write wakes nobody: such a flag is looked at every sleep. */
  for (int64_t waited = 0; waited < GB_OS_YIELD_WOKEN_NS; waited = gbClockNowNs() - start) {
    if (check(flag, value, abortFlag, &res)) return res;
    gbOsBackoff(waited, GB_OS_YIELD_WOKEN_NS);
  }
  for (;;) {
    uint64_t seen = __atomic_load_n(&flag->value, __ATOMIC_SEQ_CST);
    if (check(flag, value, abortFlag, &res)) return res;
    if (gbDeadlinePassed(deadline)) break;
    sleepOn(flag, seen, gbClockNowNs() - start);
  }
  /* One last look: the release may have landed during the final interval. */
  if (check(flag, value, abortFlag, &res)) return res;
  return gbErrorSet(gbTimeout,
                    "waited %g s for a flag to reach %llu (it holds %llu): the work that "
                    "releases it did not finish; look for an earlier error on this or another "
                    "rank, or raise GPUBRIDGE_TIMEOUT",
                    timeoutSec, (unsigned long long)value,
                    (unsigned long long)__atomic_load_n(&flag->value, __ATOMIC_ACQUIRE));
}
