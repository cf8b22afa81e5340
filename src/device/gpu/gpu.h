/* Private to device/cuda and device/hip: a device over a CUDA-like runtime.
 * CUDA and HIP have the same entry points under two prefixes (cudaMalloc,
 * hipMalloc, ...) with the same C signatures, so the ops, the device choice
 * and the flag paths are written once here against a table the backend fills
 * from its dlopen'd library. The backend keeps what really differs: loading
 * and binding its libraries, error text, how the flag mode is decided, and
 * the GPU's identity. */
#ifndef GB_DEVICE_GPU_GPU_H
#define GB_DEVICE_GPU_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "base/result.h"
#include "device/device.h"

typedef int gbGpuError_t;             /* cudaError_t / hipError_t: an enum, int in the C ABI; 0 is success */
typedef void* gbGpuStream_t;          /* NULL is the runtime's default (legacy / null) stream */
typedef void (*gbGpuHostFn_t)(void*); /* cudaHostFn_t / hipHostFn_t */
#define GB_GPU_SUCCESS 0
/* Values both runtimes share (cudaMemcpyDefault = hipMemcpyDefault, ...). */
#define GB_GPU_MEMCPY_DEFAULT 4      /* direction from the pointers (unified addressing) */
#define GB_GPU_HOST_ALLOC_PORTABLE 1u
#define GB_GPU_HOST_ALLOC_MAPPED 2u
#define GB_GPU_STREAM_NON_BLOCKING 1u
#define GB_GPU_HOST_REGISTER_PORTABLE 1u /* cudaHostRegisterPortable = hipHostRegisterPortable */
#define GB_GPU_HOST_REGISTER_MAPPED 2u

/* How flags are signalled on a stream; the value is the word width. */
typedef enum {
  GB_GPU_FLAGS_HOSTFN = 0, /* no usable stream memory ops: host functions */
  GB_GPU_FLAGS_MEMOPS32 = 32,
  GB_GPU_FLAGS_MEMOPS64 = 64
} gbGpuFlagMode_t;

typedef gbResult_t (*gbGpuFailFn_t)(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct {
  /* Names for the ops table and messages. */
  const char* name;           /* "cuda": the ops name and the entry-point prefix ("cudaMalloc") */
  int runtime;                /* GB_DEVICE_RUNTIME_CUDA or _HIP: the ops' runtime */
  const char* vendor;         /* the island label */
  const char* hostAllocName;  /* "cudaHostAlloc" */
  const char* hostFreeName;   /* "cudaFreeHost" */
  const char* nullStream;     /* "legacy stream": what a NULL stream is called */
  const char* memOpPrefix;    /* "cuStream": prefix of WriteValue%d / WaitValue%d in messages */
  const char* visibleVars[3]; /* variables that hide GPUs, NULL-terminated; the first is the usual one */

  /* State: device by gbGpuDeviceChoose, the rest by the backend. */
  int device;                 /* this process's GPU (runtime ordinal) */
  int deviceCount;
  gbGpuFlagMode_t flagMode;
  double flagWaitSec;         /* host-function flag waits give up after this */

  /* Runtime entry points with the shared signatures (dlsym'd by the backend). */
  gbGpuError_t (*setDevice)(int);
  gbGpuError_t (*memAlloc)(void**, size_t);
  gbGpuError_t (*memFree)(void*);
  gbGpuError_t (*copy)(void*, const void*, size_t, int);
  gbGpuError_t (*copyAsync)(void*, const void*, size_t, int, gbGpuStream_t);
  gbGpuError_t (*hostAlloc)(void**, size_t, unsigned int);
  gbGpuError_t (*hostFree)(void*);
  gbGpuError_t (*hostGetDevicePointer)(void**, void*, unsigned int);
  gbGpuError_t (*streamCreateWithFlags)(gbGpuStream_t*, unsigned int);
  gbGpuError_t (*streamDestroy)(gbGpuStream_t);
  gbGpuError_t (*streamSynchronize)(gbGpuStream_t);
  gbGpuError_t (*deviceSynchronize)(void);
  gbGpuError_t (*launchHostFunc)(gbGpuStream_t, gbGpuHostFn_t, void*); /* needed in GB_GPU_FLAGS_HOSTFN */

  /* For the bridge's GPU work (reduce.c). The HIP backend binds these and
   * the module ones below optionally: NULL makes hostRegister or reduceAsync
   * fail, naming the missing entry point. */
  gbGpuError_t (*hostRegister)(void*, size_t, unsigned int);
  gbGpuError_t (*hostUnregister)(void*);
  gbGpuError_t (*deviceGetAttribute)(int*, int, int);
  int attrMultiprocessorCount; /* its attribute for the SM (CU) count: CUDA 16, HIP 63 */

  /* The reduction kernels. kernelImage makes, once, what moduleLoadData
   * loads: CUDA the embedded PTX, HIP the embedded source compiled by
   * hiprtc; *owned is malloc'd memory kept while the module lives (NULL:
   * none). The module entry
   * points share their signatures: cuModuleLoadData, cuModuleGetFunction,
   * cuModuleUnload, cuLaunchKernel (driver; CUmodule and CUfunction are
   * pointers, a runtime stream is a CUstream) and hipModuleLoadData, ...,
   * hipModuleLaunchKernel. moduleFail translates their codes. */
  gbResult_t (*kernelImage)(const void** image, void** owned);
  gbGpuError_t (*moduleLoadData)(void** module, const void* image);
  gbGpuError_t (*moduleGetFunction)(void** function, void* module, const char* name);
  gbGpuError_t (*moduleUnload)(void* module);
  gbGpuError_t (*launchKernel)(void* function, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                               unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedBytes,
                               gbGpuStream_t stream, void** params, void** extra);
  const char* modulePrefix; /* "cu" / "hip": names the module calls in messages ("cuModuleLoadData") */
  const char* launchName;   /* "cuLaunchKernel" / "hipModuleLaunchKernel" */
  const char* moduleHint;   /* what a failed moduleLoadData likely means, and what to do */
  gbGpuFailFn_t moduleFail;

  /* The backend's stream memory ops for mode bits (32 or 64): write value, or
   * wait until the word >= value, at the device address addr. They return the
   * code memOpFail translates (CUDA: a driver CUresult). */
  int (*writeValue)(gbGpuStream_t stream, void* addr, uint64_t value, int bits);
  int (*waitValue)(gbGpuStream_t stream, void* addr, uint64_t value, int bits);

  /* Error translation (gbErrorSet with the runtime's text); fail for runtime
   * calls, memOpFail for writeValue / waitValue. */
  gbGpuFailFn_t fail;
  gbGpuFailFn_t memOpFail;
} gbGpuRuntime_t;

/* Chooses rt->device from rt->deviceCount: GPUBRIDGE_DEVICE; else the
 * launcher's local rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * SLURM_LOCALID), which must name a visible GPU unless exactly one is
 * visible; else 0. Errors name rt->visibleVars. */
gbResult_t gbGpuDeviceChoose(gbGpuRuntime_t* rt);

/* rt->setDevice(rt->device): every op does this first, since streams are used
 * from any thread. */
gbResult_t gbGpuMakeCurrent(const gbGpuRuntime_t* rt);

/* Fills ops with the shared implementations over rt (run kind real, name and
 * vendor from rt, launchHostFn NULL, identify NULL: the backend sets it).
 * One GPU runtime serves a process (choose.c opens one): rt becomes it. */
void gbGpuOpsFill(gbGpuRuntime_t* rt, gbDeviceOps* ops);
/* That runtime; NULL before gbGpuOpsFill. */
const gbGpuRuntime_t* gbGpuActive(void);

/* Host memory registration and the reduction kernels over the runtime
 * gbGpuOpsFill chose (reduce.c): the ops of the same names. */
gbResult_t gbGpuHostRegister(void* ptr, size_t bytes, void** devPtr);
gbResult_t gbGpuHostUnregister(void* ptr);
gbResult_t gbGpuReduceAsync(const gbReduceArgs_t* args, void* stream);
gbResult_t gbGpuExchangeAsync(const gbExchangeArgs_t* args, void* stream);
gbResult_t gbGpuEncodeAsync(const gbEncodeArgs_t* args, void* stream);

/* Flag ops over the runtime gbGpuOpsFill chose (flag.c). */
gbResult_t gbGpuFlagWrite(gbFlag_t* flag, uint64_t value, void* stream);
gbResult_t gbGpuFlagWait(gbFlag_t* flag, uint64_t value, void* stream);
gbResult_t gbGpuFlagsMap(gbFlag_t* flags, void** mapped);
gbResult_t gbGpuFlagWriteMapped(gbFlag_t* flag, void* mapped, uint64_t value, void* stream);
/* "64-bit stream memory ops", ...: for the open line in the log. */
const char* gbGpuFlagModeName(gbGpuFlagMode_t mode);

/* A runtime library to load: the one a variable names, else the first of
 * defaults that loads. */
typedef struct {
  const char* var;             /* "GPUBRIDGE_CUDART_LIBRARY" */
  const char* named;           /* its value; "" when unset */
  const char* pathHint;        /* "libcudart.so.N": what the variable should give */
  const char* label;           /* "CUDA": in "no CUDA runtime" */
  const char* const* defaults; /* tried in order when named is "" */
  int defaultCount;
} gbGpuLibrary_t;

/* Loads lib into *handle, its name into loaded. A named library that does
 * not load is an error; no default loading is *found = 0 with why. */
gbResult_t gbGpuRuntimeLoad(const gbGpuLibrary_t* lib, void** handle, char* loaded, size_t loadedLen, int* found,
                            char* why, size_t whyLen);

#endif
