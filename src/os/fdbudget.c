/* The descriptors of os/fdbudget.h: process-wide counters, no lock. */
#include "os/fdbudget.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>

#include "base/clock.h"

static atomic_int held;         /* waiting connections in every listener */
static atomic_int wanted;       /* of them, to be dropped for our sockets */
static atomic_llong askedAt;    /* gbClockNowNs() of the last request */

static long long softLimit(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > (rlim_t)1 << 30) return 1 << 30;
  return (long long)r.rlim_cur;
}

int gbFdStrangerBudget(void) {
  long long half = softLimit() / 2;
  if (half > GB_FD_STRANGERS_MAX) half = GB_FD_STRANGERS_MAX;
  if (half < GB_FD_STRANGERS_MIN) half = GB_FD_STRANGERS_MIN;
  return (int)half;
}

void gbFdStrangersHeld(int delta) { atomic_fetch_add_explicit(&held, delta, memory_order_relaxed); }

int gbFdStrangersCount(void) { return atomic_load_explicit(&held, memory_order_relaxed); }

int gbFdAskRelief(int err) {
  if (err != EMFILE && err != ENFILE) return 0;
  int have = gbFdStrangersCount();
  if (have <= 0) return 0;
  atomic_store_explicit(&askedAt, (long long)gbClockNowNs(), memory_order_relaxed);
  /* One batch at a time: a caller that looks again before the listeners
   * served it only keeps it fresh, so strangers go only as fast as needed. */
  int none = 0;
  (void)atomic_compare_exchange_strong_explicit(&wanted, &none, have < GB_FD_RELIEF_BATCH ? have : GB_FD_RELIEF_BATCH,
                                                memory_order_relaxed, memory_order_relaxed);
  return 1;
}

int gbFdReliefTake(void) {
  int want = atomic_load_explicit(&wanted, memory_order_relaxed);
  if (want <= 0) return 0;
  if (gbClockNowNs() - atomic_load_explicit(&askedAt, memory_order_relaxed) > GB_FD_RELIEF_TTL_NS) {
    atomic_store_explicit(&wanted, 0, memory_order_relaxed); /* stale: nobody waits for it any more */
    return 0;
  }
  while (want > 0 && !atomic_compare_exchange_weak_explicit(&wanted, &want, want - 1, memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
  return want > 0;
}

void gbFdReliefReturn(void) { atomic_fetch_add_explicit(&wanted, 1, memory_order_relaxed); }

const char* gbFdLimitText(char* buf, unsigned len) {
  long long lim = softLimit();
  if (lim >= 1 << 30) snprintf(buf, len, "the open-file limit is unlimited");
  else snprintf(buf, len, "the open-file limit (ulimit -n) is %lld", lim);
  return buf;
}
