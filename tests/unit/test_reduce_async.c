/* reduceAsync (device/device.h) against gbReduceOrdered (base/dtype.h), bit
 * for bit, on this process's device (gbDeviceGet): the host device on a CPU
 * machine; a GPU where there is one, or where tests/gpu/test_gpu_reduce.py
 * points it (CUDA, and HIP on the emulated-AMD rig). Every type and op (avg
 * too), 1 to 4 sources, with and without ring order, each count given;
 * sources in device memory, in registered host memory (malloc'd, page
 * aligned: hostRegister), the two mixed, and in place; each source and the
 * result at their own element offsets. Floating inputs carry NaN, infinities,
 * signed zeros and subnormals (sum, prod and avg see only the host's default
 * NaN, so no result depends on which of two NaNs an FPU keeps). The elements
 * around each result must stay as they were. Also: argument errors, count 0.
 * The bridge's compressed wire too (base/wire.h): encodeAsync of every type
 * a wire narrows, into device memory and into registered host memory,
 * against gbWireEncode, and reduceAsync of 1 to 4 encoded parts (sum, avg)
 * against gbWireFold, bit for bit.
 * Usage: test_reduce_async [count ...]   (default: 1 7 1003) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/dtype.h"
#include "base/fp8.h"
#include "base/result.h"
#include "base/wire.h"
#include "device/device.h"

#define NSRC 4 /* the most sources tested */
#define PAD 8  /* elements around every buffer's used range */
#define SHOWN 20

#define CHECK_OK(call)                                                                                           \
  do {                                                                                                           \
    gbResult_t r_ = (call);                                                                                      \
    if (r_ != gbSuccess) {                                                                                       \
      fprintf(stderr, "FAIL %s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #call, r_, gbErrorLast());      \
      exit(1);                                                                                                   \
    }                                                                                                            \
  } while (0)

enum { KIND_DEVICE, KIND_HOST, KIND_MIXED, KIND_IN_PLACE, KINDS };
static const char* const kindNames[KINDS] = {"device", "host", "mixed", "in place"};

static const gbDeviceOps* dev;
static void* stream;
static size_t cap; /* elements per buffer */
static char *host[NSRC], *mapped[NSRC], *devIn[NSRC], *devOut, *scratch;
static char *want, *got;
static long cases, failures;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* ------------------------------------------------------------ inputs */

static int isNaN32(uint32_t v) { return (v & 0x7f800000u) == 0x7f800000u && (v & 0x7fffffu); }
static int isNaN64(uint64_t v) { return (v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (v << 12); }

/* One element of dt: random bits for integers; for floats a mix of ordinary
 * values, specials and random bits. anyNaN 0: every NaN is defaultNaN. */
static void element(char* e, gbDataType_t dt, int anyNaN, float defaultNaN) {
  uint64_t r = next();
  int pick = (int)(next() % 16);
  float f = (float)((int64_t)(r % 2001) - 1000) / 7.0f;
  uint32_t dn32, f32;
  memcpy(&dn32, &defaultNaN, 4);
  if (dt == gbFloat32 || dt == gbFloat16 || dt == gbBfloat16 || gbDtypeIsFp8(dt)) {
    static const uint32_t special[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fc12345u, 0x7f800000u, 0xff800000u,
                                       0x00000000u, 0x80000000u, 0x00000001u, 0x80000003u, 0x007fffffu, 0x7f7fffffu,
                                       0x38800000u, 0x33800000u, 0x477fe000u, 0x00800000u};
    memcpy(&f32, &f, 4);
    if (pick < 5) f32 = special[r % 16];
    else if (pick == 5) f32 = (uint32_t)r;
    else if (pick == 6) f32 = (uint32_t)(r % 0x00800000u) | ((uint32_t)r & 0x80000000u); /* subnormal */
    if (!anyNaN && isNaN32(f32)) f32 = dn32;
    memcpy(&f, &f32, 4);
    if (dt == gbFloat32) {
      memcpy(e, &f32, 4);
    } else if (gbDtypeIsFp8(dt)) {
      uint8_t (*to)(float) = dt == gbFloat8e4m3 ? gbFloatToE4m3 : gbFloatToE5m2;
      uint8_t b = to(f);
      if (pick == 7) b = (uint8_t)r; /* any 8 bits, NaN payloads and subnormals included */
      if (!anyNaN && (dt == gbFloat8e4m3 ? (b & 0x7f) == 0x7f : (b & 0x7f) > 0x7c)) b = to(defaultNaN);
      memcpy(e, &b, 1);
    } else {
      uint16_t h = dt == gbFloat16 ? gbFloatToHalf(f) : gbFloatToBf16(f);
      if (pick == 7) h = (uint16_t)r; /* any 16 bits, NaN payloads and subnormals included */
      if (!anyNaN && (dt == gbFloat16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f)))
        h = dt == gbFloat16 ? gbFloatToHalf(defaultNaN) : gbFloatToBf16(defaultNaN);
      memcpy(e, &h, 2);
    }
  } else if (dt == gbFloat64) {
    static const uint64_t special[] = {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                                       0x7ff8000000012345ull, 0x7ff0000000000000ull, 0xfff0000000000000ull, 0, 1,
                                       0x8000000000000000ull, 0x800000000000000full, 0x7fefffffffffffffull,
                                       0x000fffffffffffffull};
    double d = (double)f;
    uint64_t v;
    memcpy(&v, &d, 8);
    if (pick < 5) v = special[r % 12];
    else if (pick == 5) v = r;
    if (!anyNaN && isNaN64(v)) {
      double dn = (double)defaultNaN; /* the same sign and quiet bit */
      memcpy(&v, &dn, 8);
    }
    memcpy(e, &v, 8);
  } else {
    memcpy(e, &r, gbDtypeSize(dt));
  }
}

/* The host's default NaN (inf - inf): what its FPU gives an invalid operation. */
static float hostDefaultNaN(void) {
  volatile float inf = INFINITY;
  return inf - inf;
}

/* Every source of dt, on the host and copied to the device. */
static void fillSources(gbDataType_t dt, int anyNaN) {
  size_t es = gbDtypeSize(dt);
  float dn = hostDefaultNaN();
  for (int s = 0; s < NSRC; s++) {
    for (size_t i = 0; i < cap; i++) element(host[s] + i * es, dt, anyNaN, dn);
    CHECK_OK(dev->memcpyToDevice(devIn[s], host[s], cap * es));
  }
}

/* ------------------------------------------------------------- cases */

static void report(const char* what, gbDataType_t dt, int op, int n, int ring, int kind, size_t count, size_t i,
                   const void* gotElement, const void* wantElement) {
  size_t es = gbDtypeSize(dt);
  uint64_t g = 0, w = 0;
  memcpy(&g, gotElement, es);
  memcpy(&w, wantElement, es);
  if (failures++ < SHOWN)
    fprintf(stderr, "FAIL %s %s, %d source%s, ring %d, %s, count %zu: %s at element %zu: got 0x%llx, want 0x%llx\n",
            gbDtypeName(dt), gbOpName(op), n, n > 1 ? "s" : "", ring, kindNames[kind], count, what, i,
            (unsigned long long)g, (unsigned long long)w);
}

static void runCase(gbDataType_t dt, int op, int n, int ring, int kind, size_t count) {
  size_t es = gbDtypeSize(dt), outOff = 2;
  int divisor = op == gbAvg ? 2 * n + 1 : 0;
  const void* ref[NSRC];
  gbReduceArgs_t a = {.nsrc = n, .count = count, .dtype = dt, .op = op, .divisor = divisor, .ring = ring};
  for (int s = 0; s < n; s++) {
    size_t off = (size_t)(s + 1) * es; /* every source at its own element offset */
    ref[s] = host[s] + off;
    int onHost = kind == KIND_HOST || (kind == KIND_MIXED && s % 2 == 1);
    a.src[s] = (onHost ? mapped[s] : devIn[s]) + off;
  }
  char* base = devOut; /* the buffer the result lands in, and where */
  size_t at = outOff;
  if (kind == KIND_IN_PLACE) {
    CHECK_OK(dev->copyAsync(scratch, devIn[0], cap * es, stream));
    base = scratch;
    at = 1;
    a.src[0] = scratch + es;
  } else {
    /* Guards: the elements around the result hold a copy of source 0's. */
    CHECK_OK(dev->memcpyToDevice(devOut + (outOff - 1) * es, host[0] + (outOff - 1) * es, es));
    CHECK_OK(dev->memcpyToDevice(devOut + (outOff + count) * es, host[0] + (outOff + count) * es, es));
  }
  a.dst = base + at * es;
  gbReduceOrdered(want, ref, n, count, dt, op, divisor, ring);
  CHECK_OK(dev->reduceAsync(&a, stream));
  CHECK_OK(dev->streamSynchronize(stream));
  CHECK_OK(dev->memcpyToHost(got, base + (at - 1) * es, (count + 2) * es));
  cases++;
  const char* guard = kind == KIND_IN_PLACE ? host[0] + (at - 1) * es : host[0] + (outOff - 1) * es;
  if (memcmp(got, guard, es) != 0)
    report("element before the result changed", dt, op, n, ring, kind, count, 0, got, guard);
  if (memcmp(got + (count + 1) * es, guard + (count + 1) * es, es) != 0)
    report("element after the result changed", dt, op, n, ring, kind, count, count, got + (count + 1) * es,
           guard + (count + 1) * es);
  if (memcmp(got + es, want, count * es) != 0) {
    size_t i = 0;
    while (!memcmp(got + (i + 1) * es, want + i * es, es)) i++;
    report("wrong bits", dt, op, n, ring, kind, count, i, got + (i + 1) * es, want + i * es);
  }
}

static void runType(gbDataType_t dt, const size_t* counts, int ncounts) {
  long before = failures;
  /* max and min may see any NaN (their result is an operand's bits); sum,
   * prod and avg only the default NaN. */
  for (int cls = 0; cls < 2; cls++) {
    fillSources(dt, cls);
    static const int ops[2][3] = {{gbSum, gbProd, gbAvg}, {gbMax, gbMin, -1}};
    for (int o = 0; o < 3 && ops[cls][o] >= 0; o++)
      for (int n = 1; n <= NSRC; n++)
        for (int ring = 0; ring < 2; ring++)
          for (int kind = 0; kind < KINDS; kind++)
            for (int c = 0; c < ncounts; c++) runCase(dt, ops[cls][o], n, ring, kind, counts[c]);
  }
  printf("%-8s %s\n", gbDtypeName(dt), failures == before ? "ok" : "FAILED");
  fflush(stdout);
}

/* ----------------------------------------------- the compressed wire */

static long wireCases, wireFailures;

static void wireReport(const char* what, int wire, gbDataType_t dt, size_t count, size_t at) {
  if (wireFailures++ < SHOWN)
    fprintf(stderr, "FAIL wire %s of %s, %zu elements: %s (first at byte %zu)\n", gbWireName(wire), gbDtypeName(dt),
            count, what, at);
}

/* The first byte where two encodings of count elements differ (count's
 * bytes: the padding to 16 bytes is nobody's), or SIZE_MAX. fp8: the
 * blocks' exponents, then the codes. */
static size_t wireDiff(const char* a, const char* b, int wire, gbDataType_t dt, size_t count) {
  size_t blocks = (count + GB_WIRE_FP8_BLOCK - 1) / GB_WIRE_FP8_BLOCK;
  size_t ranges[2][2] = {{0, wire == GB_WIRE_BF16 ? 2 * count : 4 * blocks}, {0, 0}};
  if (wire == GB_WIRE_FP8) ranges[1][0] = gbWireBytes(wire, dt, count) - (count + 15) / 16 * 16, ranges[1][1] = count;
  for (int r = 0; r < 2; r++)
    for (size_t i = ranges[r][0]; i < ranges[r][0] + ranges[r][1]; i++)
      if (a[i] != b[i]) return i;
  return SIZE_MAX;
}

/* Source s of dt encoded by the device, into device memory and into mapped
 * host memory, against the host's encoding; then folds of 1..NSRC parts. */
static void runWire(int wire, gbDataType_t dt, size_t count) {
  size_t es = gbDtypeSize(dt), wb = gbWireBytes(wire, dt, count);
  char* hostWire[NSRC];
  for (int s = 0; s < NSRC; s++) {
    hostWire[s] = malloc(wb);
    if (!hostWire[s]) exit(1);
    gbWireEncode(hostWire[s], host[s], count, dt, wire);
    /* device memory (scratch, at an offset of 16 bytes: parts lie 16 apart) */
    gbEncodeArgs_t e = {.dst = scratch + 16, .src = devIn[s], .count = count, .dtype = dt, .wire = wire};
    CHECK_OK(dev->encodeAsync(&e, stream));
    CHECK_OK(dev->streamSynchronize(stream));
    CHECK_OK(dev->memcpyToHost(got, scratch + 16, wb));
    wireCases++;
    size_t d = wireDiff(got, hostWire[s], wire, dt, count);
    if (d != SIZE_MAX) wireReport("encoding into device memory differs", wire, dt, count, d);
    /* mapped host memory: source 0's host buffer after its elements */
    size_t at = (cap * es + 15) / 16 * 16;
    if (s == 0 && at + wb <= cap * 8) {
      e.dst = mapped[0] + at;
      CHECK_OK(dev->encodeAsync(&e, stream));
      CHECK_OK(dev->streamSynchronize(stream));
      wireCases++;
      d = wireDiff(host[0] + at, hostWire[0], wire, dt, count);
      if (d != SIZE_MAX) wireReport("encoding into mapped host memory differs", wire, dt, count, d);
    }
  }
  /* The parts in device memory, 16-byte aligned, wb apart (rounded). */
  size_t stride = (wb + 15) / 16 * 16;
  for (int s = 0; s < NSRC; s++) CHECK_OK(dev->memcpyToDevice(scratch + (size_t)s * stride, hostWire[s], wb));
  for (int n = 1; n <= NSRC; n++)
    for (int avg = 0; avg < 2; avg++) {
      const void* parts[NSRC];
      gbReduceArgs_t a = {.dst = devOut, .nsrc = n, .count = count, .dtype = dt, .op = avg ? gbAvg : gbSum,
                          .divisor = avg ? n + 2 : 0, .wire = wire};
      for (int s = 0; s < n; s++) parts[s] = hostWire[s], a.src[s] = scratch + (size_t)s * stride;
      gbWireFold(want, parts, n, count, dt, wire, a.divisor);
      CHECK_OK(dev->reduceAsync(&a, stream));
      CHECK_OK(dev->streamSynchronize(stream));
      CHECK_OK(dev->memcpyToHost(got, devOut, count * es));
      wireCases++;
      if (memcmp(got, want, count * es) != 0)
        wireReport(avg ? "avg fold differs" : "sum fold differs", wire, dt, count, 0);
    }
  for (int s = 0; s < NSRC; s++) free(hostWire[s]);
}

static void runWires(const size_t* counts, int ncounts) {
  for (int wire = GB_WIRE_PLAIN + 1; wire < GB_NUM_WIRES; wire++)
    for (int dt = 0; dt < gbNumTypes; dt++) {
      if (!gbWireNarrows(wire, (gbDataType_t)dt)) continue;
      fillSources((gbDataType_t)dt, 0);
      for (int c = 0; c < ncounts; c++) runWire(wire, (gbDataType_t)dt, counts[c]);
    }
  printf("encodeAsync and wire folds on %s (vendor %s): %ld cases, %ld failures\n", dev->name, dev->vendor,
         wireCases, wireFailures);
}

static void checkErrors(void) {
  static const char zero[8];
  gbReduceArgs_t a = {.dst = devOut, .src = {devIn[0]}, .nsrc = 0, .count = 1, .dtype = gbFloat32, .op = gbSum};
  if (dev->reduceAsync(&a, stream) == gbSuccess)
    report("0 sources accepted", gbFloat32, gbSum, 0, 0, 0, 1, 0, zero, zero);
  a.nsrc = GB_REDUCE_MAX_SRCS + 1;
  if (dev->reduceAsync(&a, stream) == gbSuccess)
    report("9 sources accepted", gbFloat32, gbSum, 9, 0, 0, 1, 0, zero, zero);
  a.nsrc = 1;
  a.count = 0;
  CHECK_OK(dev->reduceAsync(&a, stream));
  CHECK_OK(dev->streamSynchronize(stream));
}

int main(int argc, char** argv) {
  size_t counts[16] = {1, 7, 1003};
  int ncounts = 3;
  if (argc > 1) ncounts = 0;
  for (int i = 1; i < argc && ncounts < 16; i++) counts[ncounts++] = strtoull(argv[i], NULL, 10);
  size_t maxCount = 0;
  for (int i = 0; i < ncounts; i++) maxCount = counts[i] > maxCount ? counts[i] : maxCount;
  cap = maxCount + 2 * PAD;
  CHECK_OK(gbDeviceGet(&dev));
  printf("device %s (vendor %s), counts", dev->name, dev->vendor);
  for (int i = 0; i < ncounts; i++) printf(" %zu", counts[i]);
  printf("\n");
  if (dev->reduceAsync == NULL || dev->hostRegister == NULL || dev->hostUnregister == NULL) {
    fprintf(stderr, "FAIL: device %s has no reduceAsync, hostRegister or hostUnregister\n", dev->name);
    return 1;
  }
  size_t bytes = cap * 8, page = (size_t)sysconf(_SC_PAGESIZE);
  size_t hostBytes = (bytes + page - 1) / page * page;
  for (int s = 0; s < NSRC; s++) {
    if (posix_memalign((void**)&host[s], page, hostBytes) != 0) return 1;
    CHECK_OK(dev->hostRegister(host[s], hostBytes, (void**)&mapped[s]));
    CHECK_OK(dev->memAlloc((void**)&devIn[s], bytes));
  }
  CHECK_OK(dev->memAlloc((void**)&devOut, bytes));
  CHECK_OK(dev->memAlloc((void**)&scratch, bytes));
  CHECK_OK(dev->streamCreate(&stream));
  want = malloc(bytes);
  got = malloc(bytes);
  if (want == NULL || got == NULL) return 1;

  checkErrors();
  for (int dt = 0; dt < gbNumTypes; dt++) runType(dt, counts, ncounts);
  if (dev->encodeAsync == NULL) {
    fprintf(stderr, "FAIL: device %s has no encodeAsync\n", dev->name);
    return 1;
  }
  runWires(counts, ncounts);

  CHECK_OK(dev->streamDestroy(stream));
  for (int s = 0; s < NSRC; s++) {
    CHECK_OK(dev->hostUnregister(host[s]));
    CHECK_OK(dev->memFree(devIn[s]));
    free(host[s]);
  }
  CHECK_OK(dev->memFree(devOut));
  CHECK_OK(dev->memFree(scratch));
  free(want);
  free(got);
  printf("reduceAsync on %s (vendor %s): %ld cases, %ld failures\n", dev->name, dev->vendor, cases, failures);
  return failures || wireFailures ? 1 : 0;
}
