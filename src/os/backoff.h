/* Waiting for memory that another thread or process writes (a flag, a
 * shared-memory ring), by how long the waiter has waited: first yield the
 * core between looks (when nothing else wants the core, a yield returns at
 * once, so this is a fast poll; when ranks outnumber cores, the thread that
 * will write runs instead: a busy spin measured 3-6x slower on 2 cores),
 * then sleep. Yielding threads stay runnable, and many of them (ranks
 * outnumbering cores) slow every other process down, so the yield phase is
 * as short as the waiter can afford: a futex sleeper whom the writer wakes
 * (a host flag) yields briefly; a waiter nobody wakes (a shared-memory ring)
 * yields longer, since each sleep adds its length to the wait. */
#ifndef GB_OS_BACKOFF_H
#define GB_OS_BACKOFF_H

#include <stdint.h>

#define GB_OS_YIELD_WOKEN_NS 20000   /* the waiter's sleep ends when the writer wakes it */
#define GB_OS_YIELD_UNWOKEN_NS 200000 /* nobody wakes the waiter: it looks after each sleep */
/* The sleep between looks once the yield phase is over grows with the
 * wait: a quarter of the time waited, at least GB_OS_SLEEP_NS and at most
 * GB_OS_SLEEP_MAX_NS. A write nobody wakes the waiter for is then seen at
 * most 25% (or 20 us) late, and a long wait costs a few wake-ups per
 * millisecond instead of fifty (each one takes a core from the work waited
 * for when ranks fill the cores). */
#define GB_OS_SLEEP_NS 20000
#define GB_OS_SLEEP_MAX_NS 1000000
/* The longest sleep of a waiter whose lateness costs bandwidth, not just
 * time: a GPU bridge's proxy waiting for a GPU's write or a peer process's
 * counter, where each chunk's hand-over waits on the one before (measured on
 * one H200: send/recv at 128 MiB 5-7% faster than with GB_OS_SLEEP_MAX_NS).
 * The cores of a GPU host afford the wake-ups. */
#define GB_OS_SLEEP_POLL_NS 20000

/* How long to sleep after waiting waitedNs (past the yield phase), at most
 * maxNs (0: GB_OS_SLEEP_MAX_NS). */
int64_t gbOsSleepNs(int64_t waitedNs, int64_t maxNs);

/* One pause of a waiter that has waited waitedNs: a yield while waitedNs <
 * yieldNs, else a sleep of gbOsSleepNs(waitedNs, maxSleepNs). */
void gbOsBackoff(int64_t waitedNs, int64_t yieldNs, int64_t maxSleepNs);

/* Cuts this thread's timer slack to 1 us (once per thread), so that its
 * short sleeps last what they ask and not Linux's default 50 us more. */
void gbOsLowTimerSlack(void);

#endif
