/* Reference values of the collective tests (test_algo, test_algo_coll),
 * written from definitions rather than taken from the library: a 64-bit
 * mixer (splitmix64's finaliser) for seeded data, and bfloat16 from and to
 * float (round to nearest even, NaN kept quiet). */
#ifndef GB_TESTS_UNIT_REF_VALUES_H
#define GB_TESTS_UNIT_REF_VALUES_H

#include <stdint.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint16_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

static float fromBf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#endif
