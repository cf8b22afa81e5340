/* Host-side flag signalling: the proxy thread and the host device's streams
 * hand work over through gbFlag_t words in host memory. */
#include "device/device.h"

#include <linux/futex.h>
#include <stdatomic.h>
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
 * word (little-endian hosts; elsewhere the sleep alone bounds the wait). */
static uint32_t* futexWord(gbFlag_t* flag) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return (uint32_t*)(void*)&flag->value;
#else
  (void)flag;
  return NULL;
#endif
}

/* Host waiters asleep, counted per bucket of flag addresses (so a setter
 * makes a call only when someone sleeps on a flag of its bucket). The
 * counts live outside the flags on purpose: the store that releases a waiter may let it free the
 * flag at once (gbCommSplit's, teardown's), so a setter must not read the
 * flag after that store, and a count in the flag would have to be read
 * then. This one outlives every flag; a setter that sees it at 0 makes no
 * call, else it wakes the flag's address: a private futex wake reads no
 * memory, and on an address freed and reused meanwhile it is at worst a
 * spurious wake-up, which every futex waiter (ours, libc's) tolerates. */
#define SLEEPER_BUCKETS 64
static atomic_int sleepers[SLEEPER_BUCKETS];

/* The count for word: from its address alone, never its memory. */
static atomic_int* sleepersOf(const uint32_t* word) {
  uint64_t h = (uint64_t)(uintptr_t)word * 0x9E3779B97F4A7C15ull;
  return &sleepers[h >> 58]; /* the top 6 bits: SLEEPER_BUCKETS = 64 */
}

static void sleepOn(gbFlag_t* flag, uint64_t seen, int64_t waitedNs) {
  gbOsLowTimerSlack();
  const struct timespec interval = {0, (long)gbOsSleepNs(waitedNs, flag->pollNs)};
  uint32_t* word = futexWord(flag);
  if (!word) {
    nanosleep(&interval, NULL);
    return;
  }
  /* Counted before the kernel compares the word with seen, and the setter
   * stores before it reads the count (both seq_cst): either the setter sees
   * this sleeper and wakes it, or the kernel sees the new value and does
   * not sleep. */
  atomic_int* count = sleepersOf(word);
  atomic_fetch_add_explicit(count, 1, memory_order_seq_cst);
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, (uint32_t)seen, &interval, NULL, 0);
  atomic_fetch_sub_explicit(count, 1, memory_order_seq_cst);
}

double gbFlagStreamWaitSec(const gbFlag_t* flag, double fallbackSec) {
  return flag->timeoutSec > 0 ? (double)flag->timeoutSec + GB_FLAG_WAIT_MARGIN_SEC : fallbackSec;
}

void gbFlagSetHost(gbFlag_t* flag, uint64_t value, int error) {
  /* The error goes first so that a waiter that sees the new value also sees
   * it; with errorValue, so that the error alone does not release a waiter
   * (which might free the flag before the store of value below). */
  if (error != 0) {
    atomic_store_explicit(&flag->errorValue, value, memory_order_relaxed);
    atomic_store_explicit(&flag->error, error, memory_order_release);
  }
  /* The address is taken before the store: after it, flag may be freed. */
  uint32_t* word = futexWord(flag);
  atomic_store_explicit(&flag->value, value, memory_order_seq_cst);
  /* From here on nothing reads or writes *flag (see sleepers). */
  if (word && atomic_load_explicit(sleepersOf(word), memory_order_seq_cst) > 0)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

/* 1 when the wait is over; *res says how. */
static int check(gbFlag_t* flag, uint64_t target, const atomic_int* abortFlag, gbResult_t* res) {
  /* Value before error: the setter stores the error first, so reading the
   * value with acquire makes an error stored with it visible. */
  uint64_t v = atomic_load_explicit(&flag->value, memory_order_acquire);
  int e = atomic_load_explicit(&flag->error, memory_order_acquire);
  /* An error set with a value is final once the value is in (its setter is
   * then done with the flag); until then the setter's next store is due. */
  if (e != 0 && v >= atomic_load_explicit(&flag->errorValue, memory_order_relaxed)) {
    *res = (gbResult_t)e;
    return 1;
  }
  if (e == 0 && v >= target) {
    *res = gbSuccess;
    return 1;
  }
  /* An abort ends the wait also while an error's value is due: a writer
   * that does not look may have lowered a released flag again. */
  if (abortFlag && atomic_load_explicit(abortFlag, memory_order_acquire)) {
    *res = gbErrorSet(gbRemoteError,
                      "aborted while waiting for a flag to reach %llu (it holds %llu): "
                      "the communicator was aborted",
                      (unsigned long long)target, (unsigned long long)v);
    return 1;
  }
  return 0;
}

int gbFlagTestHost(gbFlag_t* flag, uint64_t value, const atomic_int* abortFlag, gbResult_t* res) {
  return check(flag, value, abortFlag, res);
}

gbResult_t gbFlagWaitHost(gbFlag_t* flag, uint64_t value, double timeoutSec,
                          const atomic_int* abortFlag) {
  gbResult_t res = gbSuccess;
  gbDeadline_t deadline = gbDeadlineIn(timeoutSec);
  int64_t start = gbClockNowNs();
  /* A GPU's write wakes nobody: such a flag is looked at every sleep. */
  for (int64_t waited = 0; waited < GB_OS_YIELD_WOKEN_NS; waited = gbClockNowNs() - start) {
    if (check(flag, value, abortFlag, &res)) return res;
    gbOsBackoff(waited, GB_OS_YIELD_WOKEN_NS, flag->pollNs);
  }
  for (;;) {
    uint64_t seen = atomic_load_explicit(&flag->value, memory_order_seq_cst);
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
                    (unsigned long long)atomic_load_explicit(&flag->value, memory_order_acquire));
}
