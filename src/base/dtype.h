/* Data types and the host reduction kernels. Every reduction in gpubridge that
 * runs on the host goes through gbReduceInto, so every rank computes the same
 * bits: float16, bfloat16 and the two fp8 types are widened to float,
 * combined, and rounded back (round to nearest even; fp8 as base/fp8.h says)
 * at every application of the op. */
#ifndef GB_BASE_DTYPE_H
#define GB_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "gpubridge/gpubridge.h"

size_t gbDtypeSize(gbDataType_t dt);          /* 0 for an unknown type */
const char* gbDtypeName(gbDataType_t dt);     /* "float32"; "unknown" */
int gbDtypeIsFloat(gbDataType_t dt);
int gbDtypeIsFp8(gbDataType_t dt);            /* float8e4m3, float8e5m2 */
const char* gbOpName(gbRedOp_t op);           /* "sum"; "unknown" */

/* acc[i] = acc[i] op in[i] for i < count. op is sum, prod, max or min (avg is
 * sum here; the caller divides once with gbDivideBy). Integers wrap. max/min
 * return NaN when either side is NaN. */
void gbReduceInto(void* acc, const void* in, size_t count, gbDataType_t dt, gbRedOp_t op);

/* dst[i] = left[i] op right[i], as gbReduceInto; dst may be left or right
 * (or neither), never a partial overlap. */
void gbReduceTo(void* dst, const void* left, const void* right, size_t count, gbDataType_t dt, gbRedOp_t op);

/* dst = the fold of src[0..n-1] (1 <= n), element by element, in the order
 * of docs/REDUCTION_ORDER.md: left to right, x_0 op x_1 op ... op x_(n-1);
 * with ring (n >= 3) the elements of ring slice j = [floor(j*count/n),
 * floor((j+1)*count/n)) are folded starting at member (j+1) mod n, as the
 * host ring folds them. Then each element is divided by divisor when it is
 * > 0 (avg). dst may be one of src (in place). The GPU reduction kernel
 * (device/gpu/kernels) computes exactly these bits. */
void gbReduceOrdered(void* dst, const void* const* src, int n, size_t count, gbDataType_t dt, gbRedOp_t op,
                     int divisor, int ring);

/* buf[i] /= divisor, for a floating type (in float for f16/bf16/fp8, then rounded). */
void gbDivideBy(void* buf, size_t count, gbDataType_t dt, int divisor);

/* buf[i] = scalar * buf[i]; scalar is one element of dt (PreMulSum). f16,
 * bf16 and fp8 multiply in float and round once; integers wrap. */
void gbScaleBy(void* buf, size_t count, gbDataType_t dt, const void* scalar);

/* Conversions used by the kernels (exposed for tests and tools). */
float gbHalfToFloat(uint16_t h);
uint16_t gbFloatToHalf(float f);
float gbBf16ToFloat(uint16_t b);
uint16_t gbFloatToBf16(float f);

#endif
