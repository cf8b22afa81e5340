/* The bridge's GPU work over a CUDA-like runtime: host memory registered
 * (page-locked and mapped) so copies run at full speed and kernels read it,
 * and reduceAsync, a launch of the embedded reduction kernels (kernels/).
 * The kernels are loaded once per process, on first use, through the
 * backend's kernelImage and module entry points (gpu.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/result.h"
#include "base/wire.h"
#include "device/gpu/gpu.h"

/* The block size and unroll of kernels/reduce.cu (GB_REDUCE_THREADS, its
 * __launch_bounds__, and GB_REDUCE_UNROLL); tests/house/test_kernels_embedded.py
 * checks they agree. */
#define THREADS 256
#define UNROLL 2
#define BLOCKS_PER_SM 8 /* blocks of 256 that fill an SM: 2048 threads */

/* NaN results as this host's FPU gives them (GB_NAN_* in reduce.cu), so the
 * GPU's bits equal gbReduceOrdered's on this host: x86-64 returns the first
 * NaN operand and a negative default NaN; Arm prefers a signaling operand and
 * gives a positive default NaN; others here: the first operand, positive. */
#define NAN_SIGNALING_FIRST 1u
#define NAN_DEFAULT_POSITIVE 2u
#if defined(__x86_64__) || defined(__i386__)
#define HOST_NAN_RULE 0u
#elif defined(__aarch64__) || defined(__arm__)
#define HOST_NAN_RULE (NAN_SIGNALING_FIRST | NAN_DEFAULT_POSITIVE)
#else
#define HOST_NAN_RULE NAN_DEFAULT_POSITIVE
#endif

/* gbReduceKernelArgs of reduce.cu, passed by value: the same members in the
 * same order, so the same layout on every 64-bit ABI both compilers use. */
typedef struct {
  void* dst;
  const void* src[GB_REDUCE_MAX_SRCS];
  int nsrc;
  uint64_t count;
  int divisor;
  int ring;
  uint32_t nanRule;
  int me;
  int maxBlocks;
  uint64_t use;
  void* mine;
  void* flags[GB_REDUCE_MAX_SRCS];
  void* ready;
  void* done;
  void* stop;
  int ranges;
} kernelArgs_t;
_Static_assert(GB_REDUCE_MAX_SRCS == 8, "kernels/reduce.cu takes 8 sources: change both");
_Static_assert(sizeof(kernelArgs_t) == 224 && offsetof(kernelArgs_t, ranges) == 216 && offsetof(kernelArgs_t, count) == 80 &&
                   offsetof(kernelArgs_t, nanRule) == 96 && offsetof(kernelArgs_t, use) == 112 &&
                   offsetof(kernelArgs_t, flags) == 128 && offsetof(kernelArgs_t, ready) == 192,
               "kernelArgs_t must match gbReduceKernelArgs in kernels/reduce.cu");
_Static_assert(sizeof(gbFlag_t) == 32, "kernels/reduce.cu's GB_FLAG_BYTES");

/* gbWireKernelArgs of reduce.cu (the wire formats' kernels), the same way. */
typedef struct {
  void* dst;
  const void* src[GB_REDUCE_MAX_SRCS];
  int nsrc;
  uint64_t count;
  int divisor;
  uint32_t nanRule;
} wireArgs_t;
_Static_assert(sizeof(wireArgs_t) == 96 && offsetof(wireArgs_t, count) == 80 && offsetof(wireArgs_t, nanRule) == 92,
               "wireArgs_t must match gbWireKernelArgs in kernels/reduce.cu");
_Static_assert(GB_WIRE_FP8_BLOCK == THREADS, "an fp8 encoder's thread block is one scale block");

/* Kernel name parts by gbDataType_t and by op (sum, prod, max, min). */
static const char* const typeNames[gbNumTypes] = {"i8",  "u8",  "i32", "u32",  "i64",    "u64",
                                                  "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
static const char* const opNames[4] = {"sum", "prod", "max", "min"};

static struct {
  pthread_once_t once;
  gbResult_t result;
  char error[1024]; /* why loading failed, for every later caller */
  void* module;
  void* image; /* the backend's image, kept while the module lives (a runtime may read it after loading) */
  void* functions[gbNumTypes][4];
  void* encode[GB_NUM_WIRES][gbNumTypes]; /* gb_encode_<wire>_<type> where the wire narrows the type */
  void* fold[GB_NUM_WIRES][gbNumTypes];   /* gb_fold_<wire>_<type> */
  int blocksCap; /* the most blocks a launch uses */
} kernels = {.once = PTHREAD_ONCE_INIT};

static void kernelName(char* out, size_t len, int dt, int op) {
  snprintf(out, len, "gb_reduce_%s_%s", typeNames[dt], opNames[op]);
}

/* An entry point the runtime library may lack (HIP binds these optionally). */
static gbResult_t need(const gbGpuRuntime_t* rt, int present, const char* prefix, const char* what) {
  if (present) return gbSuccess;
  return gbErrorSet(gbUnhandledCudaError, "the %s runtime has no %s%s, which the bridge's GPU reduction needs: use a "
                    "newer one", rt->name, prefix, what);
}

/* One kernel of the module by name into *fn; on failure the module is let go. */
static gbResult_t getFunction(const gbGpuRuntime_t* rt, const char* name, void** fn) {
  gbGpuError_t e = rt->moduleGetFunction(fn, kernels.module, name);
  if (e == GB_GPU_SUCCESS) return gbSuccess;
  gbResult_t res = rt->moduleFail(e, "%sModuleGetFunction(%s): the embedded kernels lack it; regenerate "
                                  "src/device/gpu/kernels (make -C src/device/gpu/kernels) and rebuild",
                                  rt->modulePrefix, name);
  if (rt->moduleUnload) (void)rt->moduleUnload(kernels.module);
  kernels.module = NULL;
  free(kernels.image);
  kernels.image = NULL;
  return res;
}

/* The wire formats' kernels: an encoder and a fold per type a wire narrows. */
static gbResult_t loadWireKernels(const gbGpuRuntime_t* rt) {
  for (int w = GB_WIRE_PLAIN + 1; w < GB_NUM_WIRES; w++)
    for (int dt = 0; dt < gbNumTypes; dt++) {
      if (!gbWireNarrows(w, (gbDataType_t)dt)) continue;
      char name[64];
      snprintf(name, sizeof(name), "gb_encode_%s_%s", gbWireName(w), typeNames[dt]);
      GB_CHECK(getFunction(rt, name, &kernels.encode[w][dt]));
      snprintf(name, sizeof(name), "gb_fold_%s_%s", gbWireName(w), typeNames[dt]);
      GB_CHECK(getFunction(rt, name, &kernels.fold[w][dt]));
    }
  return gbSuccess;
}

static gbResult_t loadModule(const gbGpuRuntime_t* rt) {
  GB_CHECK(need(rt, rt->kernelImage != NULL, "", "kernel loader"));
  GB_CHECK(need(rt, rt->moduleLoadData != NULL, rt->modulePrefix, "ModuleLoadData"));
  GB_CHECK(need(rt, rt->moduleGetFunction != NULL, rt->modulePrefix, "ModuleGetFunction"));
  GB_CHECK(need(rt, rt->launchKernel != NULL, "", rt->launchName));
  const void* image = NULL;
  GB_CHECK(rt->kernelImage(&image, &kernels.image));
  gbGpuError_t e = rt->moduleLoadData(&kernels.module, image);
  if (e != GB_GPU_SUCCESS) {
    free(kernels.image);
    kernels.image = NULL;
    return rt->moduleFail(e, "%sModuleLoadData of the bridge's reduction kernels (%s)", rt->modulePrefix,
                          rt->moduleHint);
  }
  for (int dt = 0; dt < gbNumTypes; dt++)
    for (int op = 0; op < 4; op++) {
      char name[64];
      kernelName(name, sizeof(name), dt, op);
      GB_CHECK(getFunction(rt, name, &kernels.functions[dt][op]));
    }
  return loadWireKernels(rt);
}

/* Enough blocks to keep every SM busy; a grid-stride loop does the rest. */
static void sizeGrid(const gbGpuRuntime_t* rt) {
  int sms = 0;
  if (rt->deviceGetAttribute == NULL ||
      rt->deviceGetAttribute(&sms, rt->attrMultiprocessorCount, rt->device) != GB_GPU_SUCCESS || sms <= 0) {
    sms = 128; /* a large GPU's count: too many blocks only costs a little */
    GB_INFO(GB_LOG_DEVICE, "%s: the multiprocessor count of GPU %d is unknown; reduction grids assume %d", rt->name,
            rt->device, sms);
  }
  kernels.blocksCap = sms * BLOCKS_PER_SM;
}

static void load(void) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  kernels.result = loadModule(rt);
  if (kernels.result != gbSuccess) {
    snprintf(kernels.error, sizeof(kernels.error), "%s", gbErrorLast());
    return;
  }
  sizeGrid(rt);
  GB_INFO(GB_LOG_DEVICE | GB_LOG_INIT, "%s: reduction kernels loaded on GPU %d (%d types x 4 ops, up to %d blocks "
          "of %d)", rt->name, rt->device, gbNumTypes, kernels.blocksCap, THREADS);
}

/* The loaded kernels, or the error that stopped them (recorded again, not logged again). */
static gbResult_t kernelsReady(void) {
  pthread_once(&kernels.once, load);
  if (kernels.result != gbSuccess) gbErrorRecord(kernels.error);
  return kernels.result;
}

/* This thread on the runtime's GPU, and the kernels loaded. */
static gbResult_t ready(const gbGpuRuntime_t* rt) {
  GB_CHECK(gbGpuMakeCurrent(rt));
  return kernelsReady();
}

static gbResult_t checkArgs(const gbReduceArgs_t* a) {
  if (a == NULL) return gbErrorSet(gbInvalidArgument, "stream reduction: the arguments are NULL");
  if (a->nsrc < 1 || a->nsrc > GB_REDUCE_MAX_SRCS || a->dst == NULL)
    return gbErrorSet(gbInvalidArgument, "stream reduction of %d sources (1 to %d) into %p", a->nsrc,
                      GB_REDUCE_MAX_SRCS, a->dst);
  for (int s = 0; s < a->nsrc; s++)
    if (a->src[s] == NULL)
      return gbErrorSet(gbInvalidArgument, "stream reduction: source %d of %d is NULL", s, a->nsrc);
  if (a->dtype < 0 || a->dtype >= gbNumTypes || a->op < gbSum || a->op > gbAvg)
    return gbErrorSet(gbInvalidArgument, "stream reduction of type %d (%s) with op %d (%s): not a type and "
                      "sum, prod, max, min or avg", a->dtype, gbDtypeName(a->dtype), a->op, gbOpName(a->op));
  return gbSuccess;
}

static kernelArgs_t kernelArgs(const gbReduceArgs_t* a) {
  kernelArgs_t k = {.dst = a->dst, .nsrc = a->nsrc, .count = a->count, .divisor = a->divisor > 0 ? a->divisor : 0,
                    .ring = a->ring != 0, .nanRule = HOST_NAN_RULE, .me = -1};
  for (int s = 0; s < a->nsrc; s++) k.src[s] = a->src[s];
  return k;
}

static gbResult_t launch(const gbGpuRuntime_t* rt, const gbReduceArgs_t* a, kernelArgs_t* k, uint64_t blocks,
                         void* stream) {
  int op = a->op == gbAvg ? gbSum : a->op;
  void* params[] = {k};
  gbGpuError_t e = rt->launchKernel(kernels.functions[a->dtype][op], (unsigned int)blocks, 1, 1, THREADS, 1, 1, 0,
                                    stream, params, NULL);
  if (e != GB_GPU_SUCCESS) {
    char name[64];
    kernelName(name, sizeof(name), a->dtype, op);
    return rt->moduleFail(e, "%s(%s, %llu blocks of %d) of %zu elements from %d sources on stream %p", rt->launchName,
                          name, (unsigned long long)blocks, THREADS, a->count, a->nsrc, stream);
  }
  return gbSuccess;
}

/* A wire kernel over count elements: blocks of THREADS, enough to fill the
 * GPU (an fp8 encoder: one block per scale block, grid-stride beyond). */
static gbResult_t launchWire(const gbGpuRuntime_t* rt, void* fn, wireArgs_t* w, const char* what, int wire, int dt,
                             void* stream) {
  uint64_t blocks = (w->count + THREADS - 1) / THREADS;
  if (blocks > (uint64_t)kernels.blocksCap) blocks = (uint64_t)kernels.blocksCap;
  void* params[] = {w};
  gbGpuError_t e = rt->launchKernel(fn, (unsigned int)blocks, 1, 1, THREADS, 1, 1, 0, stream, params, NULL);
  if (e != GB_GPU_SUCCESS)
    return rt->moduleFail(e, "%s(gb_%s_%s_%s, %llu blocks of %d) of %llu elements on stream %p", rt->launchName,
                          what, gbWireName(wire), typeNames[dt], (unsigned long long)blocks, THREADS,
                          (unsigned long long)w->count, stream);
  return gbSuccess;
}

static gbResult_t launchFold(const gbGpuRuntime_t* rt, const gbReduceArgs_t* a, void* stream) {
  if (a->wire <= GB_WIRE_PLAIN || a->wire >= GB_NUM_WIRES || !kernels.fold[a->wire][a->dtype] ||
      (a->op != gbSum && a->op != gbAvg))
    return gbErrorSet(gbInvalidArgument, "stream reduction of %s parts in wire %d (%s) with op %s: the wire does not "
                      "narrow that type, or the op is not a sum", gbDtypeName(a->dtype), a->wire,
                      gbWireName(a->wire), gbOpName(a->op));
  wireArgs_t w = {.dst = a->dst, .nsrc = a->nsrc, .count = a->count, .divisor = a->divisor > 0 ? a->divisor : 0,
                  .nanRule = HOST_NAN_RULE};
  for (int s = 0; s < a->nsrc; s++) w.src[s] = a->src[s];
  return launchWire(rt, kernels.fold[a->wire][a->dtype], &w, "fold", a->wire, a->dtype, stream);
}

gbResult_t gbGpuEncodeAsync(const gbEncodeArgs_t* e, void* stream) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  GB_CHECK(gbDeviceEncodeCheck(e));
  GB_CHECK(ready(rt));
  if (e->count == 0) return gbSuccess;
  wireArgs_t w = {.dst = e->dst, .nsrc = 1, .count = e->count, .nanRule = HOST_NAN_RULE};
  w.src[0] = e->src;
  return launchWire(rt, kernels.encode[e->wire][e->dtype], &w, "encode", e->wire, e->dtype, stream);
}

/* A count of 0 launches nothing but still loads the kernels: a caller may
 * do so at set-up, so the one-time compile and its errors come early. */
gbResult_t gbGpuReduceAsync(const gbReduceArgs_t* a, void* stream) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  GB_CHECK(checkArgs(a));
  GB_CHECK(ready(rt));
  if (a->count == 0) return gbSuccess;
  if (a->wire != GB_WIRE_PLAIN) return launchFold(rt, a, stream);
  kernelArgs_t k = kernelArgs(a);
  uint64_t perBlock = (uint64_t)THREADS * UNROLL;
  uint64_t blocks = (a->count + perBlock - 1) / perBlock;
  if (blocks > (uint64_t)kernels.blocksCap) blocks = (uint64_t)kernels.blocksCap;
  return launch(rt, a, &k, blocks, stream);
}

/* The same kernel in exchange mode: one thread block per range (the kernel
 * could take several a block; measured, that gained nothing), all of them
 * resident at once is not needed (a block waits only on other members'
 * blocks). */
gbResult_t gbGpuExchangeAsync(const gbExchangeArgs_t* x, void* stream) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  GB_CHECK(gbDeviceExchangeCheck(x));
  GB_CHECK(checkArgs(&x->red));
  GB_CHECK(ready(rt));
  kernelArgs_t k = kernelArgs(&x->red);
  k.me = x->me;
  k.maxBlocks = x->maxBlocks;
  k.use = x->use;
  k.mine = x->mine;
  k.ready = x->readyDev;
  k.done = x->doneDev;
  k.stop = x->stopDev;
  k.ranges = x->blocks;
  for (int m = 0; m < x->red.nsrc; m++) k.flags[m] = x->flagsDev[m];
  return launch(rt, &x->red, &k, (uint64_t)x->blocks, stream);
}

gbResult_t gbGpuHostRegister(void* ptr, size_t bytes, void** devPtr) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  if (ptr == NULL || devPtr == NULL || bytes == 0)
    return gbErrorSet(gbInvalidArgument, "%s host registration of %zu bytes at %p (output %p): give memory and a "
                      "place for its device address", rt->name, bytes, ptr, (void*)devPtr);
  GB_CHECK(need(rt, rt->hostRegister != NULL && rt->hostUnregister != NULL, rt->name, "HostRegister"));
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->hostRegister(ptr, bytes, GB_GPU_HOST_REGISTER_PORTABLE | GB_GPU_HOST_REGISTER_MAPPED);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%sHostRegister(%p, %zu bytes, portable | mapped) (page-aligned host memory, registered "
                    "once; raise the locked-memory limit, ulimit -l, if it is low)", rt->name, ptr, bytes);
  e = rt->hostGetDevicePointer(devPtr, ptr, 0);
  if (e != GB_GPU_SUCCESS) {
    gbResult_t res = rt->fail(e, "%sHostGetDevicePointer(%p) after registering %zu bytes", rt->name, ptr, bytes);
    (void)rt->hostUnregister(ptr);
    return res;
  }
  return gbSuccess;
}

gbResult_t gbGpuHostUnregister(void* ptr) {
  const gbGpuRuntime_t* rt = gbGpuActive();
  if (ptr == NULL) return gbSuccess;
  GB_CHECK(need(rt, rt->hostUnregister != NULL, rt->name, "HostUnregister"));
  GB_CHECK(gbGpuMakeCurrent(rt));
  gbGpuError_t e = rt->hostUnregister(ptr);
  if (e != GB_GPU_SUCCESS)
    return rt->fail(e, "%sHostUnregister(%p) (give the address hostRegister was given)", rt->name, ptr);
  return gbSuccess;
}
