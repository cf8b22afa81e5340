/* Private to device/hip: the few HIP runtime types and entry points the
 * backend uses, declared here from ROCm's public headers (no HIP header is
 * needed to build), and the table they are loaded into.
 * Values, from ROCm's include/hip/hip_runtime_api.h and include/hip/driver_types.h:
 *   hipSuccess 0, hipErrorInsufficientDriver 35, hipErrorNoDevice 100,
 *   hipErrorNotReady 600 (hipError_t, hip_runtime_api.h);
 *   hipMemcpyDefault 4 (hipMemcpyKind, driver_types.h);
 *   hipHostMallocPortable 0x1, hipHostMallocMapped 0x2, hipStreamNonBlocking 0x01,
 *   hipStreamWaitValueGte 0x0 (#defines in hip_runtime_api.h).
 * Signatures as in hip_runtime_api.h; C has no default arguments, so the
 * wait-value masks are passed explicitly. */
#ifndef GB_DEVICE_HIP_API_H
#define GB_DEVICE_HIP_API_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/gpubridge.h"
#include "device/device.h"

typedef int gbHipError_t;             /* hipError_t (an enum: int in the C ABI) */
typedef void* gbHipStream_t;          /* hipStream_t; NULL is the null stream */
typedef void (*gbHipHostFn_t)(void*); /* hipHostFn_t */
typedef int gbHipDevice_t;            /* hipDevice_t */
typedef struct {
  unsigned char bytes[16];
} gbHipUuid_t;                        /* hipUUID */
#define GB_HIP_SUCCESS 0
#define GB_HIP_ERROR_INSUFFICIENT_DRIVER 35
#define GB_HIP_ERROR_NO_DEVICE 100
#define GB_HIP_ERROR_NOT_READY 600
#define GB_HIP_MEMCPY_DEFAULT 4              /* direction from the pointers (unified addressing) */
#define GB_HIP_HOST_MALLOC_PORTABLE 0x1u
#define GB_HIP_HOST_MALLOC_MAPPED 0x2u
#define GB_HIP_STREAM_NON_BLOCKING 0x1u
#define GB_HIP_STREAM_WAIT_VALUE_GTE 0x0u    /* waits until (*ptr & mask) >= value */
#define GB_HIP_MASK_32 0xFFFFFFFFu
#define GB_HIP_MASK_64 0xFFFFFFFFFFFFFFFFull

/* How flags are signalled on a stream (decided by a self-test at open). */
typedef enum {
  GB_HIP_FLAGS_HOSTFN = 0, /* host functions (hipLaunchHostFunc) */
  GB_HIP_FLAGS_MEMOPS32 = 32,
  GB_HIP_FLAGS_MEMOPS64 = 64
} gbHipFlagMode_t;

typedef struct {
  void* handle;
  char name[256];    /* what was loaded, for messages */
  int device;        /* this process's GPU (HIP ordinal) */
  gbHipDevice_t hipDev; /* the same GPU as a hipDevice_t (hipDeviceGet) */
  int deviceCount;
  int runtimeVersion, driverVersion; /* 0 where the library does not say */
  gbHipFlagMode_t flagMode;
  double flagWaitSec; /* host-function flag waits give up after this */
  /* The library exports gbEmulatedAmd: a test rig that runs HIP calls on an
   * NVIDIA GPU (tests/gpu/emulated_amd). Its text says what it is. */
  const char* emulated;

  gbHipError_t (*hipGetDeviceCount)(int*);
  gbHipError_t (*hipSetDevice)(int);
  gbHipError_t (*hipMalloc)(void**, size_t);
  gbHipError_t (*hipFree)(void*);
  gbHipError_t (*hipMemcpy)(void*, const void*, size_t, int);
  gbHipError_t (*hipMemcpyAsync)(void*, const void*, size_t, int, gbHipStream_t);
  gbHipError_t (*hipHostMalloc)(void**, size_t, unsigned int);
  gbHipError_t (*hipHostFree)(void*);
  gbHipError_t (*hipHostGetDevicePointer)(void**, void*, unsigned int);
  gbHipError_t (*hipStreamCreateWithFlags)(gbHipStream_t*, unsigned int);
  gbHipError_t (*hipStreamDestroy)(gbHipStream_t);
  gbHipError_t (*hipStreamSynchronize)(gbHipStream_t);
  gbHipError_t (*hipStreamQuery)(gbHipStream_t);
  gbHipError_t (*hipDeviceSynchronize)(void);
  gbHipError_t (*hipGetLastError)(void);
  const char* (*hipGetErrorString)(gbHipError_t);
  /* Optional: NULL where the library lacks them. */
  const char* (*hipGetErrorName)(gbHipError_t);
  gbHipError_t (*hipRuntimeGetVersion)(int*);
  gbHipError_t (*hipDriverGetVersion)(int*);
  gbHipError_t (*hipDeviceGet)(gbHipDevice_t*, int);
  gbHipError_t (*hipDeviceGetUuid)(gbHipUuid_t*, gbHipDevice_t);
  gbHipError_t (*hipDeviceGetPCIBusId)(char*, int, int);
  gbHipError_t (*hipLaunchHostFunc)(gbHipStream_t, gbHipHostFn_t, void*);
  gbHipError_t (*hipStreamWriteValue32)(gbHipStream_t, void*, uint32_t, unsigned int);
  gbHipError_t (*hipStreamWriteValue64)(gbHipStream_t, void*, uint64_t, unsigned int);
  gbHipError_t (*hipStreamWaitValue32)(gbHipStream_t, void*, uint32_t, unsigned int, uint32_t);
  gbHipError_t (*hipStreamWaitValue64)(gbHipStream_t, void*, uint64_t, unsigned int, uint64_t);
} gbHipApi_t;

/* The loaded table (after a successful gbDeviceHipOpen), else NULL. */
const gbHipApi_t* gbDeviceHipApi(void);

/* Translate a failed HIP call: gbUnhandledCudaError with the call (printf
 * format), the GPU, and HIP's name and text for err. Clears the runtime's
 * last error so that later calls do not report it again. */
gbResult_t gbDeviceHipFail(gbHipError_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fills the "hip" ops table (hip.c). */
void gbDeviceHipFillOps(gbDeviceOps* ops);

/* Flag ops (flag.c). */
gbResult_t gbDeviceHipFlagWrite(gbFlag_t* flag, uint64_t value, void* stream);
gbResult_t gbDeviceHipFlagWait(gbFlag_t* flag, uint64_t value, void* stream);
/* Decides api->flagMode by trying 64-bit, then 32-bit stream memory ops on a
 * private stream (flag.c); host functions when neither works. */
gbResult_t gbDeviceHipFlagModeChoose(gbHipApi_t* api);

#endif
