/* Condition-variable waits with a deadline on the monotonic clock: a wall-clock
 * jump (NTP, an administrator) must not end a wait early or stretch it. Every
 * condition variable a timed wait uses is created by gbCondInit, so its clock
 * is the one the deadline is on. */
#ifndef GB_OS_COND_H
#define GB_OS_COND_H

#include <pthread.h>

#include "base/clock.h"

/* pthread_cond_init with CLOCK_MONOTONIC; returns pthread's error number. */
int gbCondInit(pthread_cond_t* cond);

/* Waits on cond (mutex held) until it is signalled or the deadline passes;
 * 1 when the deadline passed, else 0 (a wake-up may be spurious: callers
 * look at their condition again). */
int gbCondWaitUntil(pthread_cond_t* cond, pthread_mutex_t* mutex, gbDeadline_t deadline);

/* The same, for at most ms milliseconds from now. */
int gbCondWaitMs(pthread_cond_t* cond, pthread_mutex_t* mutex, int ms);

#endif
