/* The wire formats' names and constants, which base/wire.h describes and
 * both the portable codec (base/wire.c) and the AVX-512 one
 * (base/wire_avx512.c) build on. */
#ifndef GB_BASE_WIRE_FORMAT_H
#define GB_BASE_WIRE_FORMAT_H

typedef enum { GB_WIRE_PLAIN = 0, GB_WIRE_BF16 = 1, GB_WIRE_FP8 = 2, GB_NUM_WIRES } gbWire_t;

#define GB_WIRE_FP8_BLOCK 256 /* elements per scale */
#define GB_WIRE_FP8_INF 0x7e  /* a code: infinity, with its sign bit */

#endif
