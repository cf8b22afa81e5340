/* The wire formats' names and constants, which base/wire.h describes and
 * both the portable codec (base/wire.c) and the AVX-512 one
 * (base/wire_avx512.c) build on. */
#ifndef GB_BASE_WIRE_FORMAT_H
#define GB_BASE_WIRE_FORMAT_H

typedef enum { GB_WIRE_PLAIN = 0, GB_WIRE_BF16 = 1, GB_WIRE_FP8 = 2, GB_NUM_WIRES } gbWire_t;

#define GB_WIRE_FP8_BLOCK 256 /* elements per scale */
#define GB_WIRE_FP8_INF 0x7e  /* a code: infinity, with its sign bit */

/* The scale exponent k of an fp8 block whose largest finite magnitude has
 * the float bits `bits` (sign clear; 0: none): the magnitude m lies in
 * [2^(e-127), 2^(e-126)), so m / 2^k lies in [2^7, 2^8); k is at least -126. */
static inline int gbWireFp8ExponentOfBits(unsigned bits) {
  int k = (int)(bits >> 23) - 134;
  return k < -126 ? -126 : k;
}

#endif
