/* Private to device/hip: the few HIP runtime types and entry points the
 * backend uses, declared here from ROCm's public headers (no HIP header is
 * needed to build), and the table they are loaded into.
 * Values, from ROCm's include/hip/hip_runtime_api.h and include/hip/driver_types.h:
 *   hipSuccess 0, hipErrorInsufficientDriver 35, hipErrorNoDevice 100,
 *   hipErrorNotReady 600 (hipError_t, hip_runtime_api.h);
 *   hipMemcpyDefault 4 (hipMemcpyKind, driver_types.h);
 *   hipHostMallocPortable 0x1, hipHostMallocMapped 0x2, hipStreamNonBlocking 0x01,
 *   hipHostRegisterPortable 0x1, hipHostRegisterMapped 0x2,
 *   hipStreamWaitValueGte 0x0 (#defines in hip_runtime_api.h);
 *   hipDeviceAttributeMultiprocessorCount 63 (hipDeviceAttribute_t, counted
 *   from hipDeviceAttributeCudaCompatibleBegin = 0; the same in ROCm 6 and 7).
 * The memcpy kind and the host and stream flags match CUDA's and are
 * device/gpu's GB_GPU_* values; the attribute does not (CUDA's is 16).
 * Signatures as in hip_runtime_api.h; C has no default arguments, so the
 * wait-value masks are passed explicitly. The runtime entry points shared
 * with CUDA live in the table's rt (device/gpu/gpu.h), bound from the hip*
 * names. */
#ifndef GB_DEVICE_HIP_API_H
#define GB_DEVICE_HIP_API_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/gpubridge.h"
#include "device/device.h"
#include "device/gpu/gpu.h"

typedef int gbHipError_t;             /* hipError_t (an enum: int in the C ABI) */
typedef void* gbHipStream_t;          /* hipStream_t; NULL is the null stream */
typedef int gbHipDevice_t;            /* hipDevice_t */
typedef struct {
  unsigned char bytes[16];
} gbHipUuid_t;                        /* hipUUID */
#define GB_HIP_SUCCESS 0
#define GB_HIP_ERROR_INSUFFICIENT_DRIVER 35
#define GB_HIP_ERROR_NO_DEVICE 100
#define GB_HIP_ERROR_NOT_READY 600
#define GB_HIP_ATTR_MULTIPROCESSOR_COUNT 63 /* hipDeviceAttributeMultiprocessorCount */
#define GB_HIP_STREAM_WAIT_VALUE_GTE 0x0u    /* waits until (*ptr & mask) >= value */
#define GB_HIP_MASK_32 0xFFFFFFFFu
#define GB_HIP_MASK_64 0xFFFFFFFFFFFFFFFFull

typedef struct {
  /* hipSetDevice, hipMalloc, ... hipLaunchHostFunc; device, flag mode
   * (decided by a self-test at open). */
  gbGpuRuntime_t rt;
  void* handle;
  char name[256];    /* what was loaded, for messages */
  gbHipDevice_t hipDev; /* rt.device as a hipDevice_t (hipDeviceGet) */
  int runtimeVersion, driverVersion; /* 0 where the library does not say */
  /* The library exports gbEmulatedAmd: a test rig that runs HIP calls on an
   * NVIDIA GPU (tests/gpu/emulated_amd). Its text says what it is. */
  const char* emulated;

  gbHipError_t (*hipGetDeviceCount)(int*);
  gbHipError_t (*hipStreamQuery)(gbHipStream_t);
  gbHipError_t (*hipGetLastError)(void);
  const char* (*hipGetErrorString)(gbHipError_t);
  /* Optional: NULL where the library lacks them (rt.launchHostFunc too). */
  const char* (*hipGetErrorName)(gbHipError_t);
  gbHipError_t (*hipRuntimeGetVersion)(int*);
  gbHipError_t (*hipDriverGetVersion)(int*);
  gbHipError_t (*hipDeviceGet)(gbHipDevice_t*, int);
  gbHipError_t (*hipDeviceGetUuid)(gbHipUuid_t*, gbHipDevice_t);
  gbHipError_t (*hipDeviceGetPCIBusId)(char*, int, int);
  gbHipError_t (*hipStreamWriteValue32)(gbHipStream_t, void*, uint32_t, unsigned int);
  gbHipError_t (*hipStreamWriteValue64)(gbHipStream_t, void*, uint64_t, unsigned int);
  gbHipError_t (*hipStreamWaitValue32)(gbHipStream_t, void*, uint32_t, unsigned int, uint32_t);
  gbHipError_t (*hipStreamWaitValue64)(gbHipStream_t, void*, uint64_t, unsigned int, uint64_t);
} gbHipApi_t;

/* Translate a failed HIP call: gbUnhandledCudaError with the call (printf
 * format), the GPU, and HIP's name and text for err. Clears the runtime's
 * last error so that later calls do not report it again. */
gbResult_t gbDeviceHipFail(gbHipError_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Decides api->rt.flagMode by trying 64-bit, then 32-bit stream memory ops on
 * a private stream (flag.c); host functions when neither works. Sets
 * rt.writeValue / rt.waitValue. */
gbResult_t gbDeviceHipFlagModeChoose(gbHipApi_t* api);

/* The reduction kernels for this GPU: the embedded source (device/gpu/kernels)
 * compiled by hiprtc, loaded with dlopen (GPUBRIDGE_HIPRTC_LIBRARY, else
 * libhiprtc.so.7, .6, libhiprtc.so). *image is the code object, *owned the
 * same malloc'd memory, the caller's (rtc.c). */
gbResult_t gbDeviceHipKernelImage(const void** image, void** owned);

#endif
