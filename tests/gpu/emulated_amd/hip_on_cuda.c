/* Test rig, never shipped: a libamdhip64.so that serves the HIP calls of
 * gpubridge's hip device with the CUDA runtime and driver of an NVIDIA GPU,
 * so that a rank runs as an AMD rank (device/hip + island/rccl) on an NVIDIA
 * machine. Only the calls device/hip makes are here, and the event calls
 * gpubridge-perf times with (tools/perf/events.c). Modules load what the
 * rig's libhiprtc.so (hiprtc_on_nvrtc.c) makes: PTX, which the CUDA driver
 * compiles (hipModule* = cuModule*, hipModuleLaunchKernel = cuLaunchKernel).
 *
 * It exports gbEmulatedAmd: device/hip finds it with dlsym and labels the rank
 * "emulated AMD" (log mode) and "amd-emulated" (island vendor), so no log line
 * or result of such a run can pass for real AMD hardware.
 *
 * CUDA is loaded with dlopen (GPUBRIDGE_CUDART_LIBRARY, else libcudart.so.13,
 * .12, libcudart.so; GPUBRIDGE_CUDA_LIBRARY, else libcuda.so.1). HIP values
 * are translated where CUDA's differ or may differ; the HIP side is from
 * ROCm's include/hip/hip_runtime_api.h and include/hip/driver_types.h, the
 * CUDA side from NVIDIA's cuda_runtime_api.h / driver_types.h / cuda.h:
 *   hipMemcpyKind 0..4 (hipMemcpyDefault 4)     = cudaMemcpyKind 0..4
 *   hipHostMallocPortable 0x1, Mapped 0x2, WriteCombined 0x4
 *                                               = cudaHostAllocPortable 0x1, Mapped 0x2, WriteCombined 0x4
 *   hipHostMallocCoherent 0x40000000            : ignored (CUDA pinned memory is coherent)
 *   hipStreamDefault 0x0, hipStreamNonBlocking 0x1 = cudaStreamDefault 0x0, cudaStreamNonBlocking 0x1
 *   hipStreamWaitValueGte 0x0, Eq 0x1, And 0x2, Nor 0x3
 *                                               = CU_STREAM_WAIT_VALUE_GEQ 0x0, EQ 0x1, AND 0x2, NOR 0x3
 *     (CUDA's GEQ compares cyclically, (int64_t)(*addr - value) >= 0; HIP's
 *     is unsigned; they agree for the values below 2^63 that flags use.
 *     CUDA has no mask: a mask other than all ones is refused.)
 *   hipStreamWriteValue flags ("reserved"): CU_STREAM_WRITE_VALUE_DEFAULT 0x0.
 *   hipHostRegisterDefault 0x0, Portable 0x1, Mapped 0x2, IoMemory 0x4, ReadOnly 0x8
 *                                               = cudaHostRegisterDefault .. ReadOnly, the same values
 *   hipDeviceAttributeMultiprocessorCount 63    = cudaDevAttrMultiProcessorCount 16 (the only
 *     attribute served; others are refused)
 *   error codes: the values that mean the same on both sides pass through
 *     (table below); any other becomes hipErrorUnknown (999), and
 *     hipGetErrorString tells the CUDA code, name and text. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The marker device/hip looks for. */
const char gbEmulatedAmd[] = "HIP served by CUDA on an NVIDIA GPU (tests/gpu/emulated_amd)";

typedef int hipError_t;
typedef void* hipStream_t;
typedef void (*hipHostFn_t)(void*);
typedef int hipDevice_t; /* a CUdevice here */
typedef struct {
  unsigned char bytes[16];
} hipUUID;

#define HIP_SUCCESS 0
#define HIP_ERROR_INVALID_VALUE 1
#define HIP_ERROR_INVALID_MEMCPY_DIRECTION 21
#define HIP_ERROR_INSUFFICIENT_DRIVER 35
#define HIP_ERROR_NOT_SUPPORTED 801
#define HIP_ERROR_UNKNOWN 999

#define HIP_HOST_MALLOC_PORTABLE 0x1u
#define HIP_HOST_MALLOC_MAPPED 0x2u
#define HIP_HOST_MALLOC_WRITE_COMBINED 0x4u
#define HIP_HOST_MALLOC_COHERENT 0x40000000u
#define HIP_STREAM_NON_BLOCKING 0x1u

#define CUDA_HOST_ALLOC_PORTABLE 0x1u
#define CUDA_HOST_ALLOC_MAPPED 0x2u
#define CUDA_HOST_ALLOC_WRITE_COMBINED 0x4u
#define CUDA_STREAM_NON_BLOCKING 0x1u
#define CU_STREAM_WRITE_VALUE_DEFAULT 0x0u

/* Codes with the same meaning in hipError_t, cudaError_t and CUresult:
 * success, invalid value, out of memory, not initialized, deinitialized,
 * invalid device pointer, invalid memcpy direction, insufficient driver, no
 * device, invalid device, invalid image, invalid context, no binary for the
 * GPU, invalid PTX (hipErrorInvalidKernelFile), invalid handle, not found,
 * not ready, illegal address, launch out of resources, host memory already
 * registered, not registered, launch failure, not supported, unknown. */
static const int sameCodes[] = {0,   1,   2,   3,   4,   17,  21,  35,  100, 101, 200, 201, 209,
                                218, 400, 500, 600, 700, 701, 712, 713, 719, 801, 999};

static struct {
  void* rt;
  void* drv;
  char error[768]; /* why loading failed; "" when it did not */
  int (*cudaGetDeviceCount)(int*);
  int (*cudaSetDevice)(int);
  int (*cudaMalloc)(void**, size_t);
  int (*cudaFree)(void*);
  int (*cudaMemcpy)(void*, const void*, size_t, int);
  int (*cudaMemcpyAsync)(void*, const void*, size_t, int, void*);
  int (*cudaHostAlloc)(void**, size_t, unsigned int);
  int (*cudaFreeHost)(void*);
  int (*cudaHostGetDevicePointer)(void**, void*, unsigned int);
  int (*cudaStreamCreateWithFlags)(void**, unsigned int);
  int (*cudaStreamDestroy)(void*);
  int (*cudaStreamSynchronize)(void*);
  int (*cudaStreamQuery)(void*);
  int (*cudaDeviceSynchronize)(void);
  int (*cudaDeviceGetPCIBusId)(char*, int, int);
  int (*cudaLaunchHostFunc)(void*, void (*)(void*), void*);
  int (*cudaEventCreate)(void**);
  int (*cudaEventRecord)(void*, void*);
  int (*cudaEventSynchronize)(void*);
  int (*cudaEventElapsedTime)(float*, void*, void*);
  int (*cudaEventDestroy)(void*);
  int (*cudaGetLastError)(void);
  const char* (*cudaGetErrorString)(int);
  const char* (*cudaGetErrorName)(int);
  int (*cudaRuntimeGetVersion)(int*);
  int (*cudaDriverGetVersion)(int*);
  int (*cudaHostRegister)(void*, size_t, unsigned int);
  int (*cudaHostUnregister)(void*);
  int (*cudaDeviceGetAttribute)(int*, int, int);
  int (*cuInit)(unsigned int);
  int (*cuDeviceGet)(int*, int);
  int (*cuDeviceGetUuid)(hipUUID*, int); /* _v2, else v1 */
  int (*cuGetErrorString)(int, const char**);
  int (*cuGetErrorName)(int, const char**);
  int (*cuModuleLoadData)(void**, const void*);
  int (*cuModuleGetFunction)(void**, void*, const char*);
  int (*cuModuleUnload)(void*);
  int (*cuLaunchKernel)(void*, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, void*, void**, void**);
  /* NULL where the driver lacks them: the calls then say "not supported". */
  int (*cuStreamWriteValue32)(void*, unsigned long long, uint32_t, unsigned int);
  int (*cuStreamWriteValue64)(void*, unsigned long long, uint64_t, unsigned int);
  int (*cuStreamWaitValue32)(void*, unsigned long long, uint32_t, unsigned int);
  int (*cuStreamWaitValue64)(void*, unsigned long long, uint64_t, unsigned int);
} cu;

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The last translated failure of this thread, for hipGetErrorString. */
static _Thread_local int lastCode = -1;
static _Thread_local char lastText[512];

static int bindSym(void* h, const char* sym, void* field) {
  dlerror();
  void* p = dlsym(h, sym);
  if (p == NULL) return 0;
  memcpy(field, &p, sizeof(p));
  return 1;
}

static void* openFirst(const char* env, const char* const* names, int n) {
  const char* named = getenv(env);
  if (named != NULL && named[0] != '\0') {
    names = &named;
    n = 1;
  }
  for (int i = 0; i < n; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) return h;
  }
  const char* e = dlerror();
  snprintf(cu.error, sizeof(cu.error), "emulated AMD rig: no %s loaded (%s; set %s): %s",
           names[0], n > 1 ? "tried the usual names" : "the name given", env, e ? e : "");
  return NULL;
}

#define RT(s) {#s, &cu.s}
static void load(void) {
  static const char* const rtNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  static const char* const drvNames[] = {"libcuda.so.1"};
  cu.rt = openFirst("GPUBRIDGE_CUDART_LIBRARY", rtNames, 3);
  if (cu.rt == NULL) return;
  cu.drv = openFirst("GPUBRIDGE_CUDA_LIBRARY", drvNames, 1);
  if (cu.drv == NULL) return;
  struct {
    const char* name;
    void* field;
  } rt[] = {RT(cudaGetDeviceCount), RT(cudaSetDevice), RT(cudaMalloc), RT(cudaFree), RT(cudaMemcpy),
            RT(cudaMemcpyAsync), RT(cudaHostAlloc), RT(cudaFreeHost), RT(cudaHostGetDevicePointer),
            RT(cudaStreamCreateWithFlags), RT(cudaStreamDestroy), RT(cudaStreamSynchronize), RT(cudaStreamQuery),
            RT(cudaDeviceSynchronize), RT(cudaDeviceGetPCIBusId), RT(cudaLaunchHostFunc),
            RT(cudaEventCreate), RT(cudaEventRecord), RT(cudaEventSynchronize), RT(cudaEventElapsedTime),
            RT(cudaEventDestroy), RT(cudaGetLastError), RT(cudaGetErrorString), RT(cudaGetErrorName),
            RT(cudaRuntimeGetVersion), RT(cudaDriverGetVersion), RT(cudaHostRegister), RT(cudaHostUnregister),
            RT(cudaDeviceGetAttribute)},
    drv[] = {RT(cuInit), RT(cuDeviceGet), RT(cuGetErrorString), RT(cuGetErrorName), RT(cuModuleLoadData),
             RT(cuModuleGetFunction), RT(cuModuleUnload), RT(cuLaunchKernel)};
  for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++)
    if (!bindSym(cu.rt, rt[i].name, rt[i].field)) {
      snprintf(cu.error, sizeof(cu.error), "emulated AMD rig: the CUDA runtime has no %s", rt[i].name);
      return;
    }
  for (size_t i = 0; i < sizeof(drv) / sizeof(drv[0]); i++)
    if (!bindSym(cu.drv, drv[i].name, drv[i].field)) {
      snprintf(cu.error, sizeof(cu.error), "emulated AMD rig: the CUDA driver has no %s", drv[i].name);
      return;
    }
  if (!bindSym(cu.drv, "cuDeviceGetUuid_v2", &cu.cuDeviceGetUuid) &&
      !bindSym(cu.drv, "cuDeviceGetUuid", &cu.cuDeviceGetUuid)) {
    snprintf(cu.error, sizeof(cu.error), "emulated AMD rig: the CUDA driver has no cuDeviceGetUuid");
    return;
  }
  /* The _v2 memory ops (CUDA 11.7+) need no opt-in; else the legacy ones. */
  if (!bindSym(cu.drv, "cuStreamWriteValue32_v2", &cu.cuStreamWriteValue32) ||
      !bindSym(cu.drv, "cuStreamWaitValue32_v2", &cu.cuStreamWaitValue32) ||
      !bindSym(cu.drv, "cuStreamWriteValue64_v2", &cu.cuStreamWriteValue64) ||
      !bindSym(cu.drv, "cuStreamWaitValue64_v2", &cu.cuStreamWaitValue64)) {
    cu.cuStreamWriteValue32 = NULL;
    cu.cuStreamWaitValue32 = NULL;
    cu.cuStreamWriteValue64 = NULL;
    cu.cuStreamWaitValue64 = NULL;
    (void)bindSym(cu.drv, "cuStreamWriteValue32", &cu.cuStreamWriteValue32);
    (void)bindSym(cu.drv, "cuStreamWaitValue32", &cu.cuStreamWaitValue32);
    (void)bindSym(cu.drv, "cuStreamWriteValue64", &cu.cuStreamWriteValue64);
    (void)bindSym(cu.drv, "cuStreamWaitValue64", &cu.cuStreamWaitValue64);
  }
  int r = cu.cuInit(0);
  if (r != 0) {
    snprintf(cu.error, sizeof(cu.error), "emulated AMD rig: cuInit failed with CUDA driver error %d", r);
    return;
  }
  cu.error[0] = '\0';
}
#undef RT

/* 0 when CUDA is usable; else the code every call returns. */
static hipError_t ready(void) {
  pthread_once(&once, load);
  return cu.error[0] || cu.rt == NULL ? HIP_ERROR_INSUFFICIENT_DRIVER : HIP_SUCCESS;
}

static hipError_t translate(int code, const char* api, const char* name, const char* text) {
  if (code == 0) return HIP_SUCCESS;
  hipError_t hip = HIP_ERROR_UNKNOWN;
  for (size_t i = 0; i < sizeof(sameCodes) / sizeof(sameCodes[0]); i++)
    if (sameCodes[i] == code) hip = code;
  lastCode = hip;
  snprintf(lastText, sizeof(lastText), "%s error %d %s: %s (emulated AMD: HIP served by CUDA)", api, code,
           name ? name : "?", text ? text : "no description");
  return hip;
}

static hipError_t fromRuntime(int code) {
  if (code == 0) return HIP_SUCCESS;
  return translate(code, "CUDA runtime", cu.cudaGetErrorName(code), cu.cudaGetErrorString(code));
}

static hipError_t fromDriver(int code) {
  if (code == 0) return HIP_SUCCESS;
  const char* name = NULL;
  const char* text = NULL;
  if (cu.cuGetErrorName(code, &name) != 0) name = NULL;
  if (cu.cuGetErrorString(code, &text) != 0) text = NULL;
  return translate(code, "CUDA driver", name, text);
}

#define READY()                          \
  do {                                   \
    hipError_t r_ = ready();             \
    if (r_ != HIP_SUCCESS) return r_;    \
  } while (0)

/* ------------------------------------------------------------- errors */

const char* hipGetErrorString(hipError_t e) {
  if (e == lastCode && lastText[0]) return lastText;
  if (ready() != HIP_SUCCESS) return e == HIP_ERROR_INSUFFICIENT_DRIVER ? cu.error : "emulated AMD rig: no CUDA";
  return cu.cudaGetErrorString(e);
}

const char* hipGetErrorName(hipError_t e) {
  if (ready() != HIP_SUCCESS) return "hipErrorInsufficientDriver";
  return cu.cudaGetErrorName(e);
}

hipError_t hipGetLastError(void) {
  READY();
  return fromRuntime(cu.cudaGetLastError());
}

/* ------------------------------------------------------------ devices */

hipError_t hipGetDeviceCount(int* count) {
  READY();
  return fromRuntime(cu.cudaGetDeviceCount(count));
}

hipError_t hipSetDevice(int device) {
  READY();
  return fromRuntime(cu.cudaSetDevice(device));
}

hipError_t hipDeviceSynchronize(void) {
  READY();
  return fromRuntime(cu.cudaDeviceSynchronize());
}

hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  READY();
  return fromDriver(cu.cuDeviceGet(device, ordinal));
}

hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device) {
  READY();
  return fromDriver(cu.cuDeviceGetUuid(uuid, device));
}

hipError_t hipDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  READY();
  return fromRuntime(cu.cudaDeviceGetPCIBusId(pciBusId, len, device));
}

hipError_t hipRuntimeGetVersion(int* v) {
  READY();
  return fromRuntime(cu.cudaRuntimeGetVersion(v));
}

hipError_t hipDriverGetVersion(int* v) {
  READY();
  return fromRuntime(cu.cudaDriverGetVersion(v));
}

#define HIP_ATTR_MULTIPROCESSOR_COUNT 63
#define CUDA_ATTR_MULTIPROCESSOR_COUNT 16

hipError_t hipDeviceGetAttribute(int* value, int attr, int device) {
  READY();
  if (attr != HIP_ATTR_MULTIPROCESSOR_COUNT) {
    lastCode = HIP_ERROR_INVALID_VALUE;
    snprintf(lastText, sizeof(lastText), "emulated AMD rig: hipDeviceGetAttribute(%d) is not served (only %d, "
             "the multiprocessor count)", attr, HIP_ATTR_MULTIPROCESSOR_COUNT);
    return HIP_ERROR_INVALID_VALUE;
  }
  return fromRuntime(cu.cudaDeviceGetAttribute(value, CUDA_ATTR_MULTIPROCESSOR_COUNT, device));
}

/* ------------------------------------------------------------- memory */

hipError_t hipMalloc(void** ptr, size_t bytes) {
  READY();
  return fromRuntime(cu.cudaMalloc(ptr, bytes));
}

hipError_t hipFree(void* ptr) {
  READY();
  return fromRuntime(cu.cudaFree(ptr));
}

hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  READY();
  if (kind < 0 || kind > 4) return HIP_ERROR_INVALID_MEMCPY_DIRECTION;
  return fromRuntime(cu.cudaMemcpy(dst, src, bytes, kind));
}

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, hipStream_t stream) {
  READY();
  if (kind < 0 || kind > 4) return HIP_ERROR_INVALID_MEMCPY_DIRECTION;
  return fromRuntime(cu.cudaMemcpyAsync(dst, src, bytes, kind, stream));
}

hipError_t hipHostMalloc(void** ptr, size_t bytes, unsigned int flags) {
  READY();
  const unsigned int known = HIP_HOST_MALLOC_PORTABLE | HIP_HOST_MALLOC_MAPPED | HIP_HOST_MALLOC_WRITE_COMBINED |
                             HIP_HOST_MALLOC_COHERENT;
  if (flags & ~known) return HIP_ERROR_INVALID_VALUE;
  unsigned int cf = 0;
  if (flags & HIP_HOST_MALLOC_PORTABLE) cf |= CUDA_HOST_ALLOC_PORTABLE;
  if (flags & HIP_HOST_MALLOC_MAPPED) cf |= CUDA_HOST_ALLOC_MAPPED;
  if (flags & HIP_HOST_MALLOC_WRITE_COMBINED) cf |= CUDA_HOST_ALLOC_WRITE_COMBINED;
  return fromRuntime(cu.cudaHostAlloc(ptr, bytes, cf));
}

hipError_t hipHostFree(void* ptr) {
  READY();
  return fromRuntime(cu.cudaFreeHost(ptr));
}

hipError_t hipHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags) {
  READY();
  return fromRuntime(cu.cudaHostGetDevicePointer(devPtr, hostPtr, flags));
}

#define HIP_HOST_REGISTER_FLAGS 0xFu /* Default 0, Portable 1, Mapped 2, IoMemory 4, ReadOnly 8: CUDA's values */

hipError_t hipHostRegister(void* hostPtr, size_t bytes, unsigned int flags) {
  READY();
  if (flags & ~HIP_HOST_REGISTER_FLAGS) return HIP_ERROR_INVALID_VALUE;
  return fromRuntime(cu.cudaHostRegister(hostPtr, bytes, flags));
}

hipError_t hipHostUnregister(void* hostPtr) {
  READY();
  return fromRuntime(cu.cudaHostUnregister(hostPtr));
}

/* ------------------------------------------------------------ streams */

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  READY();
  if (flags & ~HIP_STREAM_NON_BLOCKING) return HIP_ERROR_INVALID_VALUE;
  return fromRuntime(
      cu.cudaStreamCreateWithFlags(stream, flags & HIP_STREAM_NON_BLOCKING ? CUDA_STREAM_NON_BLOCKING : 0u));
}

hipError_t hipStreamDestroy(hipStream_t stream) {
  READY();
  return fromRuntime(cu.cudaStreamDestroy(stream));
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
  READY();
  return fromRuntime(cu.cudaStreamSynchronize(stream));
}

/* Not ready (600) is a state, not a failure: returned without a text. */
hipError_t hipStreamQuery(hipStream_t stream) {
  READY();
  int r = cu.cudaStreamQuery(stream);
  return r == 600 ? 600 : fromRuntime(r);
}

/* ------------------------------------------------------------- events */
/* A hipEvent_t is a cudaEvent_t here. */

hipError_t hipEventCreate(void** event) {
  READY();
  return fromRuntime(cu.cudaEventCreate(event));
}

hipError_t hipEventRecord(void* event, hipStream_t stream) {
  READY();
  return fromRuntime(cu.cudaEventRecord(event, stream));
}

hipError_t hipEventSynchronize(void* event) {
  READY();
  return fromRuntime(cu.cudaEventSynchronize(event));
}

hipError_t hipEventElapsedTime(float* ms, void* start, void* stop) {
  READY();
  return fromRuntime(cu.cudaEventElapsedTime(ms, start, stop));
}

hipError_t hipEventDestroy(void* event) {
  READY();
  return fromRuntime(cu.cudaEventDestroy(event));
}

hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData) {
  READY();
  return fromRuntime(cu.cudaLaunchHostFunc(stream, fn, userData));
}

/* ------------------------------------------------ stream memory ops */

static int waitFlags(unsigned int hipFlags, unsigned int* out) {
  if (hipFlags > 3) return 0; /* Gte, Eq, And, Nor: 0..3 on both sides */
  *out = hipFlags;
  return 1;
}

hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags) {
  READY();
  if (cu.cuStreamWriteValue32 == NULL) return HIP_ERROR_NOT_SUPPORTED;
  return fromDriver(cu.cuStreamWriteValue32(stream, (unsigned long long)(uintptr_t)ptr, value,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
}

hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned int flags) {
  READY();
  if (cu.cuStreamWriteValue64 == NULL) return HIP_ERROR_NOT_SUPPORTED;
  return fromDriver(cu.cuStreamWriteValue64(stream, (unsigned long long)(uintptr_t)ptr, value,
                                            CU_STREAM_WRITE_VALUE_DEFAULT));
}

hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value, unsigned int flags, uint32_t mask) {
  READY();
  unsigned int cf = 0;
  if (!waitFlags(flags, &cf)) return HIP_ERROR_INVALID_VALUE;
  if (mask != 0xFFFFFFFFu || cu.cuStreamWaitValue32 == NULL) return HIP_ERROR_NOT_SUPPORTED;
  return fromDriver(cu.cuStreamWaitValue32(stream, (unsigned long long)(uintptr_t)ptr, value, cf));
}

hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value, unsigned int flags, uint64_t mask) {
  READY();
  unsigned int cf = 0;
  if (!waitFlags(flags, &cf)) return HIP_ERROR_INVALID_VALUE;
  if (mask != 0xFFFFFFFFFFFFFFFFull || cu.cuStreamWaitValue64 == NULL) return HIP_ERROR_NOT_SUPPORTED;
  return fromDriver(cu.cuStreamWaitValue64(stream, (unsigned long long)(uintptr_t)ptr, value, cf));
}

/* ------------------------------------------------------------ modules */
/* A hipModule_t is a CUmodule, a hipFunction_t a CUfunction; the image is
 * PTX text (the rig's hiprtc makes it with NVRTC). The current context is
 * the primary one hipSetDevice (cudaSetDevice) made current. */

hipError_t hipModuleLoadData(void** module, const void* image) {
  READY();
  return fromDriver(cu.cuModuleLoadData(module, image));
}

hipError_t hipModuleGetFunction(void** function, void* module, const char* name) {
  READY();
  return fromDriver(cu.cuModuleGetFunction(function, module, name));
}

hipError_t hipModuleUnload(void* module) {
  READY();
  return fromDriver(cu.cuModuleUnload(module));
}

hipError_t hipModuleLaunchKernel(void* function, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                                 unsigned int blockX, unsigned int blockY, unsigned int blockZ,
                                 unsigned int sharedBytes, hipStream_t stream, void** params, void** extra) {
  READY();
  return fromDriver(
      cu.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, stream, params, extra));
}
