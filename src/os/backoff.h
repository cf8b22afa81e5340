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
/* The sleep between looks once the yield phase is over. */
#define GB_OS_SLEEP_NS 20000

/* One pause of a waiter that has waited waitedNs: a yield while waitedNs <
 * yieldNs, else a sleep of GB_OS_SLEEP_NS. */
void gbOsBackoff(int64_t waitedNs, int64_t yieldNs);

/* Cuts this thread's timer slack to 1 us (once per thread), so that its
 * short sleeps last what they ask and not Linux's default 50 us more. */
void gbOsLowTimerSlack(void);

#endif
