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

/* base/wire.h's gbWireFold of n fp8 parts into float32 dst: each part's
 * codes start codesAt bytes in, after its blocks' k; stream: write dst with
 * streaming stores. */
void gbWireFoldFp8Avx512(float* dst, const void* const* parts, int n, size_t count, size_t codesAt, int divisor,
                         int stream);

#endif
