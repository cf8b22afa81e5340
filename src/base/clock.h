/* Monotonic clock and deadlines. Every blocking wait in gpubridge takes one. */
#ifndef GB_BASE_CLOCK_H
#define GB_BASE_CLOCK_H

#include <stdint.h>

typedef struct {
  int64_t ns; /* CLOCK_MONOTONIC time at which the wait gives up */
} gbDeadline_t;

int64_t gbClockNowNs(void);
gbDeadline_t gbDeadlineIn(double seconds);
int gbDeadlinePassed(gbDeadline_t d);
/* Milliseconds left, clamped to [0, capMs]; for poll(). */
int gbDeadlineRemainingMs(gbDeadline_t d, int capMs);

#endif
