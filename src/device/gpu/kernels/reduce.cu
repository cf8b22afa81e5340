/* The reduction kernels a GPU runs for reduceAsync (device/device.h), loaded
 * at run time: as PTX through the CUDA driver, or compiled by hiprtc on AMD
 * (embed.py embeds this file both ways). CUDA C++ that is also HIP; no header.
 *
 * dst = the fold of src[0..nsrc-1] with gbReduceOrdered's order and bits
 * (src/base/dtype.c, docs/REDUCTION_ORDER.md): left to right; with ring and
 * nsrc >= 3, ring slice j = [floor(j*count/n), floor((j+1)*count/n)) folded
 * from member (j+1) mod n. float16/bfloat16 and the fp8 types widen to float
 * with the host's bit conversions (base/dtype.c, base/fp8.h) and round back
 * at every step; integers wrap (sum, prod in the
 * unsigned type; max, min compare signed); avg is sum, then one division
 * (floats only). No contraction (built with -fmad=false / -ffp-contract=off),
 * no flushing of subnormals, IEEE division.
 * NaN: GPUs give a canonical NaN of their own where the host keeps an
 * operand's, so each op decides NaN results as the host's FPU does
 * (nanRule, set by the caller from the host architecture): a NaN operand
 * comes back quieted (the left one first; with GB_NAN_SIGNALING_FIRST a
 * signaling one first), and an invalid operation gives the default NaN
 * (negative on x86-64; GB_NAN_DEFAULT_POSITIVE on Arm).
 *
 * One kernel per type and op, gb_reduce_<type>_<op>, taking gbReduceKernelArgs
 * by value (its C twin is in device/gpu/reduce.c). Grid-stride over each
 * slice; a thread folds GB_REDUCE_UNROLL elements a block apart, loading them
 * from one source together, so loads stay in flight while others wait
 * (sources may be host memory read over PCIe; the caller launches enough
 * blocks to fill the GPU), and a warp's loads are contiguous. A thread reads
 * the elements it writes and no others, so dst may be one of the sources.
 *
 * Exchange mode (flags[me] set: device/device.h's gbExchangeArgs_t): the
 * kernel is an all-reduce among the members of a shared host segment on its
 * own. Range r of R holds elements [count*r/R, count*(r+1)/R); thread block
 * b of the G takes ranges b, b+G, ...: once every member read this buffer's
 * last use (it began the use after), for each of its ranges in turn it
 * copies my input's range into my part (mapped host memory), folds its
 * last range (below), and sets this range's full flag in every member's
 * flags; folding a range waits for every member's flag of it and folds it
 * as above (ring slices included); at the end it folds its last range and
 * sets my done flags of the indices it owns (index modulo R modulo G is b).
 * A block waits only on other members, never on a block of its own grid. Flags are the first 64-bit word of a
 * gbFlag_t, written after a system-wide fence and read with volatile loads;
 * a member's part is read with volatile loads too, never from a cache that
 * may hold its last use. */

#define GB_REDUCE_MAX_SRCS 8
#define GB_REDUCE_THREADS 256 /* the block size the caller launches with */
#define GB_REDUCE_UNROLL 2
#define GB_NAN_SIGNALING_FIRST 1u
#define GB_NAN_DEFAULT_POSITIVE 2u
#define GB_FLAG_BYTES 32 /* sizeof(gbFlag_t), its value first */
#ifndef GB_SPIN_NAP_NS
#define GB_SPIN_NAP_NS 200
#endif

#ifndef GB_LAUNCH_BOUNDS
#define GB_LAUNCH_BOUNDS __launch_bounds__(GB_REDUCE_THREADS)
#endif
/* The 16-bit conversions are called, not inlined at every use: smaller code,
 * and the kernels wait on memory, not on instructions. */
#ifndef GB_NOINLINE
#define GB_NOINLINE __noinline__
#endif

typedef unsigned char gbU8;
typedef signed char gbI8;
typedef unsigned short gbU16;
typedef unsigned int gbU32;
typedef unsigned long long gbU64;
typedef long long gbI64;

struct gbReduceKernelArgs {
  void* dst;
  const void* src[GB_REDUCE_MAX_SRCS];
  int nsrc;
  gbU64 count;
  int divisor;      /* > 0: divide every finished element (floating types) */
  int ring;         /* ring order when nsrc >= 3 */
  gbU32 nanRule;    /* GB_NAN_* */
  /* Exchange mode (flags[me] != 0): */
  int me;
  int maxBlocks;    /* flags per member */
  gbU64 use;
  void* mine;       /* my part (host memory) */
  char* flags[GB_REDUCE_MAX_SRCS]; /* member m's flags: full[k][b] */
  char* ready;      /* set to use when the kernel starts */
  char* done;       /* my own flags: done[i] = use once the block that owns index i ended */
  int* stop;        /* set when my flags were released: every wait ends */
  int ranges;       /* the ranges with flags of their own (at least the grid's blocks) */
};

/* ------------------------------------------------------------ bit casts */

static __device__ inline gbU32 fbits(float f) {
  union { float f; gbU32 u; } v;
  v.f = f;
  return v.u;
}
static __device__ inline float bitsf(gbU32 u) {
  union { float f; gbU32 u; } v;
  v.u = u;
  return v.f;
}
static __device__ inline gbU64 dbits(double d) {
  union { double d; gbU64 u; } v;
  v.d = d;
  return v.u;
}
static __device__ inline double bitsd(gbU64 u) {
  union { double d; gbU64 u; } v;
  v.u = u;
  return v.d;
}

/* ------------------------------------------- NaN as the host's FPU gives it */

static __device__ inline float quiet(float x) { return bitsf(fbits(x) | 0x00400000u); }
static __device__ inline double quiet(double x) { return bitsd(dbits(x) | 0x0008000000000000ull); }
static __device__ inline bool signaling(float x) { return x != x && !(fbits(x) & 0x00400000u); }
static __device__ inline bool signaling(double x) { return x != x && !(dbits(x) & 0x0008000000000000ull); }
static __device__ inline float defaultNaN(float, gbU32 rule) {
  return bitsf(rule & GB_NAN_DEFAULT_POSITIVE ? 0x7fc00000u : 0xffc00000u);
}
static __device__ inline double defaultNaN(double, gbU32 rule) {
  return bitsd(rule & GB_NAN_DEFAULT_POSITIVE ? 0x7ff8000000000000ull : 0xfff8000000000000ull);
}

/* x or y is NaN: the one the host returns. */
template <typename F>
static __device__ inline F pickNaN(F x, F y, gbU32 rule) {
  if (rule & GB_NAN_SIGNALING_FIRST) {
    if (signaling(x)) return quiet(x);
    if (signaling(y)) return quiet(y);
  }
  return x != x ? quiet(x) : quiet(y);
}

template <typename F>
static __device__ inline F nanAdd(F x, F y, gbU32 rule) {
  if (x != x || y != y) return pickNaN(x, y, rule);
  F r = x + y;
  return r != r ? defaultNaN(r, rule) : r;
}

template <typename F>
static __device__ inline F nanMul(F x, F y, gbU32 rule) {
  if (x != x || y != y) return pickNaN(x, y, rule);
  F r = x * y;
  return r != r ? defaultNaN(r, rule) : r;
}

/* Divisor > 0 and finite: only a NaN dividend gives NaN. */
template <typename F>
static __device__ inline F nanDiv(F x, F d) {
  return x != x ? quiet(x) : x / d;
}

/* base/dtype.c's FMAX/FMIN: a NaN operand as it is (left first), else the
 * compare with the right operand on a tie. */
template <typename F>
static __device__ inline F hostMax(F a, F b) {
  return a != a ? a : b != b ? b : a > b ? a : b;
}
template <typename F>
static __device__ inline F hostMin(F a, F b) {
  return a != a ? a : b != b ? b : a < b ? a : b;
}

/* ------------------------------ float16 / bfloat16 (base/dtype.c, ported) */
/* The two called ones have external linkage: nvcc names a static function
 * after the file's path, and the embedded PTX must not depend on where the
 * checkout lives. */

__device__ GB_NOINLINE float reduceHalfToFloat(gbU16 h) {
  gbU32 sign = (gbU32)(h & 0x8000) << 16;
  gbU32 exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bitsf(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0));
  if (exp == 0) {
    if (mant == 0) return bitsf(sign);
    int e = -14;
    while (!(mant & 0x400)) {
      mant <<= 1;
      e--;
    }
    return bitsf(sign | (gbU32)(e + 127) << 23 | (mant & 0x3ff) << 13);
  }
  return bitsf(sign | (exp - 15 + 127) << 23 | mant << 13);
}

__device__ GB_NOINLINE gbU16 reduceFloatToHalf(float f) {
  gbU32 x = fbits(f);
  gbU16 sign = (gbU16)((x >> 16) & 0x8000);
  gbU32 a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (gbU16)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  if (a >= 0x47800000u) return (gbU16)(sign | 0x7c00);
  if (a >= 0x38800000u) {
    gbU32 h = (a >> 13) - ((127 - 15) << 10), rest = a & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (gbU16)(sign | h);
  }
  gbU32 shift = 126 - (a >> 23);
  if (shift > 24) return sign;
  gbU32 mant = (a & 0x7fffff) | 0x800000;
  gbU32 h = mant >> shift, rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1))) h++;
  return (gbU16)(sign | h);
}

static __device__ inline float bf16ToFloat(gbU16 b) {
  gbU32 x = (gbU32)b << 16;
  if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x00400000u;
  return bitsf(x);
}

static __device__ inline gbU16 floatToBf16(float f) {
  gbU32 x = fbits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (gbU16)((x >> 16) | 0x0040);
  x += 0x7fffu + ((x >> 16) & 1);
  return (gbU16)(x >> 16);
}

/* ------------------------------------------ float8e4m3 / float8e5m2 (base/fp8.h) */
/* Exact to float (a NaN quiet, with its sign); from float, round to nearest
 * even: e4m3 saturates to +-448 (infinities too), e5m2 overflows to inf; NaN
 * is sign | 0x7f. Not CUDA's __nv_fp8 types: the bits are the host's. */

static __device__ inline float e4m3ToFloat(gbU8 b) {
  gbU32 sign = (gbU32)(b & 0x80) << 24;
  gbU32 exp = (b >> 3) & 0xf, mant = b & 0x7;
  if ((b & 0x7f) == 0x7f) return bitsf(sign | 0x7fc00000u);
  if (exp == 0) return bitsf(sign | fbits((float)mant * 0.001953125f));
  return bitsf(sign | (exp - 7 + 127) << 23 | mant << 20);
}

static __device__ inline float e5m2ToFloat(gbU8 b) {
  gbU32 sign = (gbU32)(b & 0x80) << 24;
  gbU32 exp = (b >> 2) & 0x1f, mant = b & 0x3;
  if (exp == 0x1f) return bitsf(sign | 0x7f800000u | mant << 21 | (mant ? 0x00400000u : 0));
  if (exp == 0) return bitsf(sign | fbits((float)mant * 1.52587890625e-05f));
  return bitsf(sign | (exp - 15 + 127) << 23 | mant << 21);
}

static __device__ inline gbU8 fp8Subnormal(gbU32 a, gbU32 shift) {
  if (shift > 24) return 0;
  gbU32 mant = (a & 0x7fffff) | 0x800000;
  gbU32 r = mant >> shift, rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (r & 1))) r++;
  return (gbU8)r;
}

__device__ GB_NOINLINE gbU8 reduceFloatToE4m3(float f) {
  gbU32 x = fbits(f);
  gbU8 sign = (gbU8)((x >> 24) & 0x80);
  gbU32 a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (gbU8)(sign | 0x7f);
  if (a > 0x43e80000u) return (gbU8)(sign | 0x7e);
  if (a >= 0x3c800000u) {
    gbU32 r = (a >> 20) - ((127 - 7) << 3), rest = a & 0xfffff;
    if (rest > 0x80000 || (rest == 0x80000 && (r & 1))) r++;
    return (gbU8)(sign | r);
  }
  return (gbU8)(sign | fp8Subnormal(a, 141 - (a >> 23)));
}

__device__ GB_NOINLINE gbU8 reduceFloatToE5m2(float f) {
  gbU32 x = fbits(f);
  gbU8 sign = (gbU8)((x >> 24) & 0x80);
  gbU32 a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (gbU8)(sign | 0x7f);
  if (a >= 0x47800000u) return (gbU8)(sign | 0x7c);
  if (a >= 0x38800000u) {
    gbU32 r = (a >> 21) - ((127 - 15) << 2), rest = a & 0x1fffff;
    if (rest > 0x100000 || (rest == 0x100000 && (r & 1))) r++;
    return (gbU8)(sign | r);
  }
  return (gbU8)(sign | fp8Subnormal(a, 134 - (a >> 23)));
}

/* ------------------------------------------------------------------- ops */
/* Each: T apply(T acc, T in, rule) and T finish(T acc, divisor, rule). */

template <typename T>
struct IntSum {
  static __device__ inline T apply(T x, T y, gbU32) { return (T)(x + y); }
  static __device__ inline T finish(T x, int, gbU32) { return x; }
};
template <typename T>
struct IntProd {
  static __device__ inline T apply(T x, T y, gbU32) { return (T)(x * y); }
  static __device__ inline T finish(T x, int, gbU32) { return x; }
};
template <typename T>
struct IntMax {
  static __device__ inline T apply(T x, T y, gbU32) { return x > y ? x : y; }
  static __device__ inline T finish(T x, int, gbU32) { return x; }
};
template <typename T>
struct IntMin {
  static __device__ inline T apply(T x, T y, gbU32) { return x < y ? x : y; }
  static __device__ inline T finish(T x, int, gbU32) { return x; }
};

/* float and double: divide by the divisor in the type, as gbDivideBy. */
template <typename F>
static __device__ inline F divideBy(F x, int divisor) {
  return divisor > 0 ? nanDiv(x, (F)divisor) : x;
}
template <typename F>
struct FSum {
  static __device__ inline F apply(F x, F y, gbU32 r) { return nanAdd(x, y, r); }
  static __device__ inline F finish(F x, int d, gbU32) { return divideBy(x, d); }
};
template <typename F>
struct FProd {
  static __device__ inline F apply(F x, F y, gbU32 r) { return nanMul(x, y, r); }
  static __device__ inline F finish(F x, int d, gbU32) { return divideBy(x, d); }
};
template <typename F>
struct FMax {
  static __device__ inline F apply(F x, F y, gbU32) { return hostMax(x, y); }
  static __device__ inline F finish(F x, int d, gbU32) { return divideBy(x, d); }
};
template <typename F>
struct FMin {
  static __device__ inline F apply(F x, F y, gbU32) { return hostMin(x, y); }
  static __device__ inline F finish(F x, int d, gbU32) { return divideBy(x, d); }
};

/* 16- and 8-bit floats: widen, apply in float, round back (every step, and
 * the division). C::T is the stored type. */
struct Half {
  typedef gbU16 T;
  static __device__ inline float in(gbU16 v) { return reduceHalfToFloat(v); }
  static __device__ inline gbU16 out(float f) { return reduceFloatToHalf(f); }
};
struct Bf16 {
  typedef gbU16 T;
  static __device__ inline float in(gbU16 v) { return bf16ToFloat(v); }
  static __device__ inline gbU16 out(float f) { return floatToBf16(f); }
};
struct E4m3 {
  typedef gbU8 T;
  static __device__ inline float in(gbU8 v) { return e4m3ToFloat(v); }
  static __device__ inline gbU8 out(float f) { return reduceFloatToE4m3(f); }
};
struct E5m2 {
  typedef gbU8 T;
  static __device__ inline float in(gbU8 v) { return e5m2ToFloat(v); }
  static __device__ inline gbU8 out(float f) { return reduceFloatToE5m2(f); }
};
template <typename C, typename FOp>
struct Narrow {
  typedef typename C::T T;
  static __device__ inline T apply(T x, T y, gbU32 r) { return C::out(FOp::apply(C::in(x), C::in(y), r)); }
  static __device__ inline T finish(T x, int d, gbU32) { return d > 0 ? C::out(divideBy(C::in(x), d)) : x; }
};

/* ---------------------------------------------------------------- kernel */

/* Elements [begin, end) folded from member first, going around; the grid's
 * threads share them (grid), or this block's alone. In exchange mode the
 * other members' parts are read with volatile loads. */
template <typename T>
static __device__ inline T load(const T* p, gbU64 i, bool fresh) {
  return fresh ? ((const volatile T*)p)[i] : p[i];
}

template <typename T, typename Op>
__device__ GB_NOINLINE void reduceScalars(const gbReduceKernelArgs& a, int first, gbU64 begin, gbU64 end, bool grid) {
  const int n = a.nsrc;
  const gbU32 rule = a.nanRule;
  T* dst = (T*)a.dst;
  const gbU64 block = (gbU64)blockDim.x;
  const gbU64 step = (grid ? (gbU64)gridDim.x : 1) * block * GB_REDUCE_UNROLL;
  const gbU64 start = begin + (grid ? (gbU64)blockIdx.x * block * GB_REDUCE_UNROLL : 0) + threadIdx.x;
  const bool exchange = !grid;
  for (gbU64 base = start; base < end; base += step) {
    T acc[GB_REDUCE_UNROLL];
    int k = first;
#pragma unroll 1
    for (int s = 0; s < n; s++) {
      const T* p = (const T*)a.src[k];
      const bool fresh = exchange && k != a.me;
      k = k + 1 == n ? 0 : k + 1;
      T v[GB_REDUCE_UNROLL];
#pragma unroll
      for (int u = 0; u < GB_REDUCE_UNROLL; u++) {
        gbU64 i = base + (gbU64)u * block;
        if (i < end) v[u] = load(p, i, fresh);
      }
#pragma unroll
      for (int u = 0; u < GB_REDUCE_UNROLL; u++)
        if (base + (gbU64)u * block < end) acc[u] = s == 0 ? v[u] : Op::apply(acc[u], v[u], rule);
    }
#pragma unroll
    for (int u = 0; u < GB_REDUCE_UNROLL; u++) {
      gbU64 i = base + (gbU64)u * block;
      if (i < end) dst[i] = Op::finish(acc[u], a.divisor, rule);
    }
  }
}

/* ----------------------------------------------------------------- packs */
/* 16 bytes of elements, moved by one load or store: a load from host memory
 * crosses the bus, so each carries as much as it can (4 or 2 bytes a load
 * would leave the link mostly idle). The same elements, the same order, the
 * same ops: only the width of the moves changes. */

template <typename T>
union alignas(16) gbPack {
  gbU32 w[4];
  T e[16 / sizeof(T)];
};

template <typename T>
static __device__ inline gbPack<T> loadPack(const gbPack<T>* p, gbU64 i, bool fresh) {
  gbPack<T> v;
  if (!fresh) return p[i];
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
               : "l"(p + i));
#else
  const volatile gbU32* q = (const volatile gbU32*)(p + i);
  for (int j = 0; j < 4; j++) v.w[j] = q[j];
#endif
  return v;
}

/* fp8's conversions are long, and 16 of them a pack would make its kernels
 * several times larger (the PTX is compiled at start-up): element by element. */
template <typename Op>
struct PacksFor {
  static const bool ok = true;
};
template <typename FOp>
struct PacksFor<Narrow<E4m3, FOp> > {
  static const bool ok = false;
};
template <typename FOp>
struct PacksFor<Narrow<E5m2, FOp> > {
  static const bool ok = false;
};

static __device__ inline bool aligned16(const void* p) { return ((gbU64)p & 15) == 0; }

/* Every source and dst on 16 bytes, so element i lies at the same place in
 * a pack of each. */
static __device__ inline bool packable(const gbReduceKernelArgs& a) {
  bool ok = aligned16(a.dst);
  for (int k = 0; k < a.nsrc; k++) ok = ok && aligned16(a.src[k]);
  return ok;
}

/* Packs [begin, end) as reduceScalars folds elements: one pack a source
 * per thread and step (a pack is already several elements in flight). */
template <typename T, typename Op>
__device__ GB_NOINLINE void reducePacks(const gbReduceKernelArgs& a, int first, gbU64 begin, gbU64 end, bool grid) {
  const int n = a.nsrc;
  const int E = (int)(16 / sizeof(T));
  const gbU32 rule = a.nanRule;
  gbPack<T>* dst = (gbPack<T>*)a.dst;
  const gbU64 step = (grid ? (gbU64)gridDim.x : 1) * blockDim.x;
  const gbU64 start = begin + (grid ? (gbU64)blockIdx.x * blockDim.x : 0) + threadIdx.x;
  const bool exchange = !grid;
  for (gbU64 i = start; i < end; i += step) {
    gbPack<T> acc;
    int k = first;
#pragma unroll 1
    for (int s = 0; s < n; s++) {
      const bool fresh = exchange && k != a.me;
      gbPack<T> v = loadPack((const gbPack<T>*)a.src[k], i, fresh);
      k = k + 1 == n ? 0 : k + 1;
      if (s == 0) acc = v;
      else
        for (int e = 0; e < E; e++) acc.e[e] = Op::apply(acc.e[e], v.e[e], rule);
    }
    for (int e = 0; e < E; e++) acc.e[e] = Op::finish(acc.e[e], a.divisor, rule);
    dst[i] = acc;
  }
}

/* A slice in packs where every pointer allows, its unaligned ends (and any
 * slice of under two packs) element by element. */
template <typename T, typename Op>
__device__ GB_NOINLINE void reduceSlice(const gbReduceKernelArgs& a, int first, gbU64 begin, gbU64 end, bool grid) {
  const gbU64 E = 16 / sizeof(T);
  if (!PacksFor<Op>::ok || end - begin < 2 * E || !packable(a)) {
    reduceScalars<T, Op>(a, first, begin, end, grid);
    return;
  }
  const gbU64 vb = (begin + E - 1) / E, ve = end / E;
  reduceScalars<T, Op>(a, first, begin, vb * E, grid);
  reducePacks<T, Op>(a, first, vb, ve, grid);
  reduceScalars<T, Op>(a, first, ve * E, end, grid);
}

/* [lo, hi) of in into out: packs where both allow. */
template <typename T>
static __device__ inline void copyRange(T* out, const T* in, gbU64 lo, gbU64 hi) {
  const gbU64 E = 16 / sizeof(T);
  gbU64 vb = lo, ve = lo;
  if (hi - lo >= 2 * E && aligned16(out) && aligned16(in)) {
    vb = (lo + E - 1) / E;
    ve = hi / E;
    for (gbU64 i = vb + threadIdx.x; i < ve; i += blockDim.x) ((gbPack<T>*)out)[i] = ((const gbPack<T>*)in)[i];
    vb *= E;
    ve *= E;
  }
  for (gbU64 i = lo + threadIdx.x; i < vb; i += blockDim.x) out[i] = in[i];
  for (gbU64 i = (ve > lo ? ve : lo) + threadIdx.x; i < hi; i += blockDim.x) out[i] = in[i];
}

/* Without ring order (or under 3 sources) the whole range is one slice from
 * member 0; slice j ends where slice j + 1 begins. The part of [lo, hi) in
 * each slice: grid, the whole range over the grid; else this block's range. */
template <typename T, typename Op>
static __device__ inline void reduceRange(const gbReduceKernelArgs& a, gbU64 lo, gbU64 hi, bool grid) {
  const int n = a.nsrc;
  const gbU64 slices = a.ring && n >= 3 ? (gbU64)n : 1;
  gbU64 b = 0;
#pragma unroll 1
  for (gbU64 j = 0; j < slices; j++) {
    gbU64 e = a.count * (j + 1) / slices;
    gbU64 from = b > lo ? b : lo, to = e < hi ? e : hi;
    if (from < to) reduceSlice<T, Op>(a, slices == 1 || j + 1 == slices ? 0 : (int)j + 1, from, to, grid);
    b = e;
  }
}

/* ---------------------------------------------------------------- exchange */

/* Member `member`'s full flag of block in one member's flags. */
static __device__ inline volatile gbU64* flagAt(char* flags, int member, int block, int maxBlocks) {
  return (volatile gbU64*)(flags + (gbU64)(member * maxBlocks + block) * GB_FLAG_BYTES);
}

/* Each look is a read across the bus: between looks a waiting thread naps
 * briefly, so many waiting blocks leave the bus to the data. Once the flag
 * is seen, the acquire: with the barrier that follows every wait, the
 * block's later reads of the member's data are ordered after the flag (the
 * writer's release is below; a volatile read alone is no acquire). On CUDA
 * sm_70+ a relaxed read and fence.acq_rel.sys (PTX's acquire pattern);
 * elsewhere a full system fence. */
static __device__ inline void spin(const gbReduceKernelArgs& a, volatile gbU64* f, gbU64 value) {
  while (*f < value && *(volatile int*)a.stop == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(GB_SPIN_NAP_NS);
#endif
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __threadfence_system();
#endif
}

/* Every member read this buffer's use - 2: a member's exchanges run one
 * after the other, so its use - 1 began (block 0's full flag) only once
 * its use - 2 ended. Thread k looks at member k's. */
static __device__ inline void awaitRead(const gbReduceKernelArgs& a) {
  const int k = (int)threadIdx.x;
  if (a.use > 2 && k < a.nsrc && k != a.me) spin(a, flagAt(a.flags[a.me], k, 0, a.maxBlocks), a.use - 1);
  __syncthreads();
}

/* The release, in two parts: every thread's stores are ordered before any
 * flag of the block (blockStored), then a flag writer's own fence
 * (releaseFlag) before its flag's store. On CUDA sm_70+ the barrier orders
 * the block's stores before the writer's fence.acq_rel.sys, which is
 * cumulative (as NCCL posts a step): one fence per flag, where a system
 * fence in every thread before and after the barrier cost 3-4 us per
 * exchange at 8 B and 4 at 1 MiB (H100, MPS, docs/PERFORMANCE.md).
 * Elsewhere every thread fences before and after the barrier. */
static __device__ inline void blockStored() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  __syncthreads();
#else
  __threadfence_system();
  __syncthreads();
  __threadfence_system();
#endif
}

static __device__ inline void releaseFlag(volatile gbU64* flag, gbU64 value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#endif
  *flag = value;
}

/* This block staged range r: thread k sets its full flag in member k's flags. */
static __device__ inline void tellFull(const gbReduceKernelArgs& a, int r) {
  blockStored();
  const int k = (int)threadIdx.x;
  if (k < a.nsrc && k != a.me) releaseFlag(flagAt(a.flags[k], a.me, r, a.maxBlocks), a.use);
}

/* Thread k waits until member k staged range r. */
static __device__ inline void awaitFull(const gbReduceKernelArgs& a, int r) {
  const int k = (int)threadIdx.x;
  if (k < a.nsrc && k != a.me) spin(a, flagAt(a.flags[a.me], k, r, a.maxBlocks), a.use);
  __syncthreads();
}

/* This block ended: my done flags of the indices it owns (those whose
 * range, the index modulo the ranges, it took), for a later exchange on
 * another stream. */
static __device__ inline void tellDone(const gbReduceKernelArgs& a) {
  blockStored();
  for (int i = (int)threadIdx.x; i < a.maxBlocks; i += (int)blockDim.x)
    if (i % a.ranges % (int)gridDim.x == (int)blockIdx.x) releaseFlag((volatile gbU64*)(a.done + (gbU64)i * GB_FLAG_BYTES), a.use);
}

/* Element where range r of the exchange's ranges begins. */
static __device__ inline gbU64 rangeAt(const gbReduceKernelArgs& a, int r) {
  return a.count * (gbU64)r / (gbU64)a.ranges;
}

/* Thread block b takes ranges b, b + G, ... in turn. It copies range r out
 * before it folds range r - G, so its stores to host memory cross the bus
 * while its loads come back the other way, and only then tells range r. */
template <typename T, typename Op>
static __device__ inline void exchangeBlock(const gbReduceKernelArgs& a) {
  const int G = (int)gridDim.x;
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.ready) *(volatile gbU64*)a.ready = a.use;
  awaitRead(a);
  int last = -1;
  for (int r = (int)blockIdx.x; r < a.ranges; r += G) {
    copyRange((T*)a.mine, (const T*)a.src[a.me], rangeAt(a, r), rangeAt(a, r + 1));
    if (last >= 0) {
      awaitFull(a, last);
      reduceRange<T, Op>(a, rangeAt(a, last), rangeAt(a, last + 1), false);
    }
    tellFull(a, r);
    last = r;
  }
  if (last >= 0) {
    awaitFull(a, last);
    reduceRange<T, Op>(a, rangeAt(a, last), rangeAt(a, last + 1), false);
  }
  tellDone(a);
}

template <typename T, typename Op>
static __device__ inline void reduceAll(const gbReduceKernelArgs& a) {
  const int n = a.nsrc;
  if (n < 1 || n > GB_REDUCE_MAX_SRCS) return;
  if (a.me >= 0 && a.me < n && a.flags[a.me] != 0) exchangeBlock<T, Op>(a);
  else reduceRange<T, Op>(a, 0, a.count, true);
}

/* The op is the variadic part: its template arguments hold commas. */
#define GB_KERNEL(NAME, T, ...) \
  extern "C" __global__ void GB_LAUNCH_BOUNDS gb_reduce_##NAME(gbReduceKernelArgs a) { reduceAll<T, __VA_ARGS__>(a); }

#define GB_INT_KERNELS(NAME, T, UT)        \
  GB_KERNEL(NAME##_sum, UT, IntSum<UT>)    \
  GB_KERNEL(NAME##_prod, UT, IntProd<UT>)  \
  GB_KERNEL(NAME##_max, T, IntMax<T>)      \
  GB_KERNEL(NAME##_min, T, IntMin<T>)

#define GB_FLOAT_KERNELS(NAME, F)         \
  GB_KERNEL(NAME##_sum, F, FSum<F>)       \
  GB_KERNEL(NAME##_prod, F, FProd<F>)     \
  GB_KERNEL(NAME##_max, F, FMax<F>)       \
  GB_KERNEL(NAME##_min, F, FMin<F>)

#define GB_NARROW_KERNELS(NAME, C)                      \
  GB_KERNEL(NAME##_sum, C::T, Narrow<C, FSum<float> >)   \
  GB_KERNEL(NAME##_prod, C::T, Narrow<C, FProd<float> >) \
  GB_KERNEL(NAME##_max, C::T, Narrow<C, FMax<float> >)   \
  GB_KERNEL(NAME##_min, C::T, Narrow<C, FMin<float> >)

GB_INT_KERNELS(i8, gbI8, gbU8)
GB_INT_KERNELS(u8, gbU8, gbU8)
GB_INT_KERNELS(i32, int, gbU32)
GB_INT_KERNELS(u32, gbU32, gbU32)
GB_INT_KERNELS(i64, gbI64, gbU64)
GB_INT_KERNELS(u64, gbU64, gbU64)
GB_NARROW_KERNELS(f16, Half)
GB_FLOAT_KERNELS(f32, float)
GB_FLOAT_KERNELS(f64, double)
GB_NARROW_KERNELS(bf16, Bf16)
GB_NARROW_KERNELS(f8e4m3, E4m3)
GB_NARROW_KERNELS(f8e5m2, E5m2)

/* ------------------------------------------------------------ wire formats */
/* The bridge's compressed wire (base/wire.h, bit for bit): encoders,
 * gb_encode_<wire>_<type>, and folds, gb_fold_<wire>_<type>, for bf16 from
 * f32 and fp8 from f32, f16 and bf16. An fp8 encoder's thread block is one
 * scale block (GB_WIRE_FP8_BLOCK == GB_REDUCE_THREADS elements); a fold
 * decodes every part (a code times a power of two: exact), adds in float
 * from part 0 on (the host's NaN rules), divides, rounds once. */

#define GB_WIRE_FP8_BLOCK 256
#define GB_WIRE_FP8_INF 0x7e

struct gbWireKernelArgs {
  void* dst;
  const void* src[GB_REDUCE_MAX_SRCS]; /* fold: the parts; encode: src[0] */
  int nsrc;
  gbU64 count;
  int divisor;
  gbU32 nanRule;
};

static __device__ inline gbU64 round16(gbU64 b) { return (b + 15) / 16 * 16; }
static __device__ inline gbU64 fp8CodesAt(gbU64 count) {
  return round16((count + GB_WIRE_FP8_BLOCK - 1) / GB_WIRE_FP8_BLOCK * 4);
}

struct F32 {
  typedef float T;
  static __device__ inline float in(float v) { return v; }
  static __device__ inline float out(float f) { return f; }
};

static __device__ inline int wireFp8Exponent(gbU32 maxBits) {
  int k = (int)(maxBits >> 23) - 134;
  return k < -126 ? -126 : k;
}

static __device__ inline gbU8 wireToFp8(float x, float inv) {
  gbU32 u = fbits(x), a = u & 0x7fffffffu;
  gbU8 sign = (gbU8)((u >> 24) & 0x80);
  if (a > 0x7f800000u) return (gbU8)(sign | 0x7f);
  if (a == 0x7f800000u) return (gbU8)(sign | GB_WIRE_FP8_INF);
  return reduceFloatToE4m3(x * inv);
}

static __device__ inline float wireFromFp8(gbU8 c, float scale) {
  if ((c & 0x7f) == 0x7f) return bitsf((gbU32)(c & 0x80) << 24 | 0x7fc00000u);
  if ((c & 0x7f) == GB_WIRE_FP8_INF) return bitsf((gbU32)(c & 0x80) << 24 | 0x7f800000u);
  return e4m3ToFloat(c) * scale;
}

template <typename C>
static __device__ inline void encodeBf16(const gbWireKernelArgs& a) {
  const typename C::T* src = (const typename C::T*)a.src[0];
  gbU16* dst = (gbU16*)a.dst;
  for (gbU64 i = (gbU64)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += (gbU64)gridDim.x * blockDim.x)
    dst[i] = floatToBf16(C::in(src[i]));
}

/* External linkage: nvcc names a static function's shared variable after
 * the file's path, and the embedded PTX must not depend on it. */
template <typename C>
__device__ inline void encodeFp8(const gbWireKernelArgs& a) {
  __shared__ gbU32 blockMax;
  const typename C::T* src = (const typename C::T*)a.src[0];
  int* ks = (int*)a.dst;
  gbU8* codes = (gbU8*)a.dst + fp8CodesAt(a.count);
  const gbU64 blocks = (a.count + GB_WIRE_FP8_BLOCK - 1) / GB_WIRE_FP8_BLOCK;
  for (gbU64 b = blockIdx.x; b < blocks; b += gridDim.x) {
    const gbU64 i = b * GB_WIRE_FP8_BLOCK + threadIdx.x;
    const bool in = threadIdx.x < GB_WIRE_FP8_BLOCK && i < a.count;
    const float x = in ? C::in(src[i]) : 0.0f;
    gbU32 m = fbits(x) & 0x7fffffffu;
    if (m >= 0x7f800000u) m = 0;
    if (threadIdx.x == 0) blockMax = 0;
    __syncthreads();
    atomicMax(&blockMax, m);
    __syncthreads();
    const int k = wireFp8Exponent(blockMax);
    if (in) codes[i] = wireToFp8(x, bitsf((gbU32)(127 - k) << 23));
    if (threadIdx.x == 0) ks[b] = k;
    __syncthreads(); /* blockMax is read by all before the next block resets it */
  }
}

/* Part s's element i, decoded. */
template <int W>
static __device__ inline float wirePart(const gbWireKernelArgs& a, int s, gbU64 i) {
  if (W == 1) return bf16ToFloat(((const gbU16*)a.src[s])[i]);
  const int k = ((const int*)a.src[s])[i / GB_WIRE_FP8_BLOCK];
  return wireFromFp8(((const gbU8*)a.src[s] + fp8CodesAt(a.count))[i], bitsf((gbU32)(k + 127) << 23));
}

template <int W, typename C>
static __device__ inline void wireFold(const gbWireKernelArgs& a) {
  typename C::T* dst = (typename C::T*)a.dst;
  for (gbU64 i = (gbU64)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += (gbU64)gridDim.x * blockDim.x) {
    float acc = wirePart<W>(a, 0, i);
#pragma unroll 1
    for (int s = 1; s < a.nsrc; s++) acc = nanAdd(acc, wirePart<W>(a, s, i), a.nanRule);
    if (a.divisor > 0) acc = nanDiv(acc, (float)a.divisor);
    dst[i] = C::out(acc);
  }
}

#define GB_WIRE_KERNELS(NAME, C)                                                                         \
  extern "C" __global__ void GB_LAUNCH_BOUNDS gb_encode_fp8_##NAME(gbWireKernelArgs a) { encodeFp8<C>(a); } \
  extern "C" __global__ void GB_LAUNCH_BOUNDS gb_fold_fp8_##NAME(gbWireKernelArgs a) { wireFold<2, C>(a); }

GB_WIRE_KERNELS(f32, F32)
GB_WIRE_KERNELS(f16, Half)
GB_WIRE_KERNELS(bf16, Bf16)
extern "C" __global__ void GB_LAUNCH_BOUNDS gb_encode_bf16_f32(gbWireKernelArgs a) { encodeBf16<F32>(a); }
extern "C" __global__ void GB_LAUNCH_BOUNDS gb_fold_bf16_f32(gbWireKernelArgs a) { wireFold<1, F32>(a); }
