/* The fp8 wire's hot loops written for AVX-512 (F, BW, VL), which base/wire.c
 * calls where the CPU has it: the same bits as its portable loops, in about
 * half the time (docs/PERFORMANCE.md "The fp8 codec by hand"). Private to
 * base/wire.c. */
#ifndef GB_BASE_WIRE_AVX512_H
#define GB_BASE_WIRE_AVX512_H

#include <stddef.h>
#include <stdint.h>

/* Whether this build has the loops and this CPU runs them. */
int gbWireAvx512Usable(void);

/* ks[b] and codes[0..count) of count floats in blocks of GB_WIRE_FP8_BLOCK. */
void gbWireEncodeFp8Avx512(int32_t* ks, uint8_t* codes, const float* src, size_t count);

/* acc[0..n) = (first) or += codes[0..n) decoded, the block of element j
 * scaled by 2^ks[j / GB_WIRE_FP8_BLOCK]. */
void gbWireFoldFp8Avx512(float* acc, const int32_t* ks, const uint8_t* codes, size_t n, int first);

#endif
