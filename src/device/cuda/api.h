/* Private to device/cuda: the few CUDA runtime and driver types and entry
 * points the backend uses, declared here from NVIDIA's public documentation
 * (no CUDA header is needed to build), and the table they are loaded into. */
#ifndef GB_DEVICE_CUDA_API_H
#define GB_DEVICE_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/gpubridge.h"
#include "device/device.h"

/* Runtime API (libcudart). Enums are ints in the C ABI. */
typedef int gbCudaError_t;             /* cudaError_t */
typedef void* gbCudaStream_t;          /* cudaStream_t; NULL is the legacy default stream */
typedef void (*gbCudaHostFn_t)(void*); /* cudaHostFn_t */
#define GB_CUDA_SUCCESS 0
#define GB_CUDA_ERROR_INSUFFICIENT_DRIVER 35
#define GB_CUDA_ERROR_NO_DEVICE 100
#define GB_CUDA_MEMCPY_DEFAULT 4           /* cudaMemcpyDefault: direction from the pointers (UVA) */
#define GB_CUDA_HOST_ALLOC_PORTABLE 1u     /* cudaHostAllocPortable */
#define GB_CUDA_HOST_ALLOC_MAPPED 2u       /* cudaHostAllocMapped */
#define GB_CUDA_STREAM_NON_BLOCKING 1u     /* cudaStreamNonBlocking */

/* Driver API (libcuda). */
typedef int gbCuResult_t;               /* CUresult */
typedef int gbCuDevice_t;               /* CUdevice */
typedef unsigned long long gbCuDevicePtr_t; /* CUdeviceptr */
#define GB_CU_SUCCESS 0
/* CUdevice_attribute values. The *_V1 ones describe the legacy memory-op
 * entry points, which older drivers expose alone. */
#define GB_CU_ATTR_CAN_USE_STREAM_MEM_OPS_V1 92
#define GB_CU_ATTR_CAN_USE_64_BIT_STREAM_MEM_OPS_V1 93
#define GB_CU_ATTR_CAN_USE_64_BIT_STREAM_MEM_OPS 122
#define GB_CU_STREAM_WAIT_VALUE_GEQ 0u       /* cyclic (value - *addr) compare */
#define GB_CU_STREAM_WRITE_VALUE_DEFAULT 0u  /* fenced: earlier stream writes land first */

/* How flags are signalled on a stream. */
typedef enum {
  GB_CUDA_FLAGS_HOSTFN = 0, /* no stream memory ops: host functions (cudaLaunchHostFunc) */
  GB_CUDA_FLAGS_MEMOPS32 = 32,
  GB_CUDA_FLAGS_MEMOPS64 = 64
} gbCudaFlagMode_t;

typedef struct {
  void* rtHandle;
  void* drvHandle;
  char rtName[256];  /* what was loaded, for messages */
  char drvName[256];
  int device;        /* this process's GPU (runtime ordinal) */
  gbCuDevice_t cuDev; /* the same GPU for the driver API */
  int deviceCount;
  int runtimeVersion, driverVersion;
  gbCudaFlagMode_t flagMode;
  double flagWaitSec; /* host-function flag waits give up after this */

  gbCudaError_t (*cudaGetDeviceCount)(int*);
  gbCudaError_t (*cudaSetDevice)(int);
  gbCudaError_t (*cudaMalloc)(void**, size_t);
  gbCudaError_t (*cudaFree)(void*);
  gbCudaError_t (*cudaMemcpy)(void*, const void*, size_t, int);
  gbCudaError_t (*cudaMemcpyAsync)(void*, const void*, size_t, int, gbCudaStream_t);
  gbCudaError_t (*cudaHostAlloc)(void**, size_t, unsigned int);
  gbCudaError_t (*cudaFreeHost)(void*);
  gbCudaError_t (*cudaHostGetDevicePointer)(void**, void*, unsigned int);
  gbCudaError_t (*cudaStreamCreateWithFlags)(gbCudaStream_t*, unsigned int);
  gbCudaError_t (*cudaStreamDestroy)(gbCudaStream_t);
  gbCudaError_t (*cudaStreamSynchronize)(gbCudaStream_t);
  gbCudaError_t (*cudaDeviceSynchronize)(void);
  gbCudaError_t (*cudaLaunchHostFunc)(gbCudaStream_t, gbCudaHostFn_t, void*);
  gbCudaError_t (*cudaGetLastError)(void);
  const char* (*cudaGetErrorString)(gbCudaError_t);
  const char* (*cudaGetErrorName)(gbCudaError_t);
  gbCudaError_t (*cudaRuntimeGetVersion)(int*);
  gbCudaError_t (*cudaDriverGetVersion)(int*);

  gbCuResult_t (*cuInit)(unsigned int);
  gbCuResult_t (*cuDeviceGet)(gbCuDevice_t*, int);
  gbCuResult_t (*cuDeviceGetAttribute)(int*, int, gbCuDevice_t);
  gbCuResult_t (*cuDeviceGetName)(char*, int, gbCuDevice_t);
  gbCuResult_t (*cuDeviceGetUuid)(unsigned char uuid[16], gbCuDevice_t); /* optional: _v2, else v1 */
  gbCudaError_t (*cudaDeviceGetPCIBusId)(char*, int, int);
  gbCuResult_t (*cuGetErrorString)(gbCuResult_t, const char**);
  gbCuResult_t (*cuGetErrorName)(gbCuResult_t, const char**);
  gbCuResult_t (*cuStreamWriteValue32)(gbCudaStream_t, gbCuDevicePtr_t, uint32_t, unsigned int);
  gbCuResult_t (*cuStreamWriteValue64)(gbCudaStream_t, gbCuDevicePtr_t, uint64_t, unsigned int);
  gbCuResult_t (*cuStreamWaitValue32)(gbCudaStream_t, gbCuDevicePtr_t, uint32_t, unsigned int);
  gbCuResult_t (*cuStreamWaitValue64)(gbCudaStream_t, gbCuDevicePtr_t, uint64_t, unsigned int);
} gbCudaApi_t;

/* The loaded table (after a successful gbDeviceCudaOpen), else NULL. */
const gbCudaApi_t* gbDeviceCudaApi(void);

/* Translate a failed runtime call: gbUnhandledCudaError with the call (printf
 * format), the GPU, and CUDA's name and text for err. Clears the runtime's
 * last error so that later calls do not report it again. */
gbResult_t gbDeviceCudaFail(gbCudaError_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a failed driver call. */
gbResult_t gbDeviceCudaDriverFail(gbCuResult_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fills the "cuda" ops table (cuda.c). */
void gbDeviceCudaFillOps(gbDeviceOps* ops);

/* Flag ops (flag.c). */
gbResult_t gbDeviceCudaFlagWrite(gbFlag_t* flag, uint64_t value, void* stream);
gbResult_t gbDeviceCudaFlagWait(gbFlag_t* flag, uint64_t value, void* stream);

#endif
