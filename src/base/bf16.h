/* bfloat16 and float, both ways, without a branch (so loops over them
 * vectorise): to float exact, a NaN quieted; from float, round to nearest
 * even, a NaN quieted with its top payload bits, overflow carrying into
 * infinity. Header-only: the host kernels (base/dtype.c) and the wire
 * formats (base/wire.c) inline it; the GPU kernels carry the same code. */
#ifndef GB_BASE_BF16_H
#define GB_BASE_BF16_H

#include <stdint.h>
#include <string.h>

static inline float gbBf16Widen(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  x = (x & 0x7fffffffu) > 0x7f800000u ? x | 0x00400000u : x;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline uint16_t gbBf16Round(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t nan = (x & 0x7fffffffu) > 0x7f800000u;
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1)) >> 16;
  return (uint16_t)(nan ? (x >> 16) | 0x0040 : rounded);
}

#endif
