/* The bytes of a test message, from a seed (xorshift64*): test_net_tcp and
 * test_net_ucx send them and check every byte received against them. */
#ifndef GB_TESTS_UNIT_NET_PATTERN_H
#define GB_TESTS_UNIT_NET_PATTERN_H

#include <stddef.h>
#include <stdint.h>

static void pattern(uint64_t seed, unsigned char* buf, size_t n) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    buf[i] = (unsigned char)((x * 0x2545f4914f6cdd1dull) >> 56);
  }
}

#endif
