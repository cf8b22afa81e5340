/* The bridge's compressed wire formats (GPUBRIDGE_BRIDGE_COMPRESSION,
 * docs/REDUCTION_ORDER.md "Bridge compression"): how a floating-point part
 * of a reduction lies in host memory when it crosses the bridge narrowed,
 * and the host's encoder and fold. The GPU kernels
 * (device/gpu/kernels/reduce.cu) carry the same code, bit for bit.
 *
 * - bf16: each element rounded to bfloat16 (nearest even; NaN stays NaN,
 *   quieted; what rounds beyond bfloat16's range becomes infinity), 2 bytes.
 * - fp8: blocks of GB_WIRE_FP8_BLOCK elements, each with a power-of-two
 *   scale 2^k: the block's largest finite magnitude m lies in
 *   [2^(k+7), 2^(k+8)), so every finite x / 2^k is at most 256 and is
 *   rounded to float8e4m3 (nearest even; 3 mantissa bits); k is at least
 *   -126. Infinities are the code 0x7e with their sign, NaN 0x7f with its.
 *   Layout: the blocks' k as int32, then the codes, each rounded up to 16
 *   bytes.
 * A compressed fold decodes every member's part (exactly: a code times a
 * power of two) and adds them in float from member 0 to member n - 1, then
 * divides by the divisor (avg) and rounds once to the destination type, so
 * every rank that folds the same parts has the same bits. */
#ifndef GB_BASE_WIRE_H
#define GB_BASE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "base/wire_format.h" /* gbWire_t, GB_WIRE_FP8_BLOCK, GB_WIRE_FP8_INF */
#include "gpubridge/gpubridge.h"

const char* gbWireName(int wire); /* "off", "bf16", "fp8" */

/* Whether wire narrows dt (bf16: float32; fp8: float32, float16, bfloat16):
 * other types cross as they are. */
int gbWireNarrows(int wire, gbDataType_t dt);

/* The bytes count elements of dt take on the wire (plain: count * size). */
size_t gbWireBytes(int wire, gbDataType_t dt, size_t count);

/* Host encoder: dst (gbWireBytes) = src's count elements of dt in wire. */
void gbWireEncode(void* dst, const void* src, size_t count, gbDataType_t dt, int wire);

/* Host fold: dst (count elements of dt) = the sum of the n parts in src
 * (each count elements in wire), decoded, added in float from src[0] on,
 * divided by divisor when > 0, rounded once to dt. dst may not overlap a
 * part. */
void gbWireFold(void* dst, const void* const* src, int n, size_t count, gbDataType_t dt, int wire, int divisor);

/* Tests: 1 keeps the host codec to its portable loops (where the CPU has
 * AVX-512, base/wire_avx512.c's run otherwise), 0 lifts that. */
void gbWirePortableOnly(int on);

/* One element's round trip, for tests and the docs' error bound: x as the
 * wire carries it (fp8: with the scale exponent k of its block). */
float gbWireBf16(float x);
float gbWireFp8(float x, int k);
/* The scale exponent of a block whose largest finite magnitude is m (0: none). */
int gbWireFp8Exponent(float m);

#endif
