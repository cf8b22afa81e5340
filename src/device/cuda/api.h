/* Private to device/cuda: the few CUDA runtime and driver types and entry
 * points the backend uses, declared here from NVIDIA's public documentation
 * (no CUDA header is needed to build), and the table they are loaded into.
 * The runtime entry points shared with HIP live in the table's rt
 * (device/gpu/gpu.h), bound from the cuda* names. */
#ifndef GB_DEVICE_CUDA_API_H
#define GB_DEVICE_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "gpubridge/gpubridge.h"
#include "device/device.h"
#include "device/gpu/gpu.h"

/* Runtime API (libcudart). Enums are ints in the C ABI. */
typedef int gbCudaError_t;             /* cudaError_t */
typedef void* gbCudaStream_t;          /* cudaStream_t; NULL is the legacy default stream */
#define GB_CUDA_SUCCESS 0
#define GB_CUDA_ERROR_INSUFFICIENT_DRIVER 35
#define GB_CUDA_ERROR_NO_DEVICE 100
#define GB_CUDA_ATTR_MULTIPROCESSOR_COUNT 16 /* cudaDevAttrMultiProcessorCount */

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
#define GB_CU_ATTR_MPS_ENABLED 133 /* CUDA 12.3+: contexts on this device are shared through MPS */
#define GB_CU_STREAM_WAIT_VALUE_GEQ 0u       /* cyclic (value - *addr) compare */
#define GB_CU_STREAM_WRITE_VALUE_DEFAULT 0u  /* fenced: earlier stream writes land first */

typedef struct {
  /* cudaSetDevice, cudaMalloc, ... cudaLaunchHostFunc; device, flag mode. */
  gbGpuRuntime_t rt;
  void* rtHandle;
  void* drvHandle;
  char rtName[256];  /* what was loaded, for messages */
  char drvName[256];
  gbCuDevice_t cuDev; /* rt.device for the driver API */
  int runtimeVersion, driverVersion;

  gbCudaError_t (*cudaGetDeviceCount)(int*);
  gbCudaError_t (*cudaGetLastError)(void);
  const char* (*cudaGetErrorString)(gbCudaError_t);
  const char* (*cudaGetErrorName)(gbCudaError_t);
  gbCudaError_t (*cudaRuntimeGetVersion)(int*);
  gbCudaError_t (*cudaDriverGetVersion)(int*);
  gbCudaError_t (*cudaDeviceGetPCIBusId)(char*, int, int);

  gbCuResult_t (*cuInit)(unsigned int);
  gbCuResult_t (*cuDeviceGet)(gbCuDevice_t*, int);
  gbCuResult_t (*cuDeviceGetAttribute)(int*, int, gbCuDevice_t);
  gbCuResult_t (*cuDeviceGetName)(char*, int, gbCuDevice_t);
  gbCuResult_t (*cuDeviceGetUuid)(unsigned char uuid[16], gbCuDevice_t); /* optional: _v2, else v1 */
  gbCuResult_t (*cuGetErrorString)(gbCuResult_t, const char**);
  gbCuResult_t (*cuGetErrorName)(gbCuResult_t, const char**);
  gbCuResult_t (*cuStreamWriteValue32)(gbCudaStream_t, gbCuDevicePtr_t, uint32_t, unsigned int);
  gbCuResult_t (*cuStreamWriteValue64)(gbCudaStream_t, gbCuDevicePtr_t, uint64_t, unsigned int);
  gbCuResult_t (*cuStreamWaitValue32)(gbCudaStream_t, gbCuDevicePtr_t, uint32_t, unsigned int);
  gbCuResult_t (*cuStreamWaitValue64)(gbCudaStream_t, gbCuDevicePtr_t, uint64_t, unsigned int);
} gbCudaApi_t;

/* Translate a failed runtime call: gbUnhandledCudaError with the call (printf
 * format), the GPU, and CUDA's name and text for err. Clears the runtime's
 * last error so that later calls do not report it again. */
gbResult_t gbDeviceCudaFail(gbCudaError_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a failed driver call. */
gbResult_t gbDeviceCudaDriverFail(gbCuResult_t err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Decides api->rt.flagMode from the driver's stream memory ops and the
 * device's attributes, capped by GPUBRIDGE_STREAM_FLAGS, and sets
 * rt.writeValue / rt.waitValue (flag.c). */
gbResult_t gbDeviceCudaFlagModeChoose(gbCudaApi_t* api, gbCuDevice_t dev);

#endif
