/* What every rank program of tests/mp needs first: failing with a message
 * that names the rank (DIE), checking a gpubridge call (CHECK_GB), and a
 * monotonic clock in seconds. Header only: static, marked unused. */
#ifndef GB_TESTS_MP_RANK_DIE_H
#define GB_TESTS_MP_RANK_DIE_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpubridge/gpubridge.h"

static int gRank __attribute__((unused)) = -1;

#define DIE(...)                               \
  do {                                         \
    fprintf(stdout, "rank %d: FAIL: ", gRank); \
    fprintf(stdout, __VA_ARGS__);              \
    fprintf(stdout, "\n");                     \
    fflush(stdout);                            \
    exit(1);                                   \
  } while (0)

#define CHECK_GB(call)                                                                              \
  do {                                                                                              \
    gbResult_t r_ = (call);                                                                         \
    if (r_ != gbSuccess)                                                                            \
      DIE("%s returned %d (%s): %s", #call, (int)r_, gbGetErrorString(r_), gbGetLastError(NULL)); \
  } while (0)

static inline double nowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
