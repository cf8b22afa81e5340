/* The failure counter and CHECK macro the unit tests share: a failed check
 * prints "FAIL file:line: <message>" to stderr (the first 30; a test that
 * sweeps every pair of values does not flood the log) and counts, so a test
 * exits nonzero at the end when `failures` is not 0. */
#ifndef GB_TESTS_UNIT_CHECK_H
#define GB_TESTS_UNIT_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      if (failures < 30) {                                 \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                      \
        fprintf(stderr, "\n");                             \
      }                                                    \
      failures++;                                          \
    }                                                      \
  } while (0)

#endif
