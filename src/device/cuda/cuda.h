/* The CUDA device (dlopen'd libcudart and libcuda): what choose.c and the
 * NCCL island need from it. */
#ifndef GB_DEVICE_CUDA_CUDA_H
#define GB_DEVICE_CUDA_CUDA_H

#include <stddef.h>

#include "device/device.h"

/* Loads the CUDA runtime and driver and picks this process's GPU
 * (GPUBRIDGE_DEVICE; else the launcher's local rank, which must name a
 * visible GPU unless exactly one is visible; else 0). Outcomes:
 *  - gbSuccess, *found = 1: *ops is the "cuda" device (run kind real, vendor nvidia);
 *  - gbSuccess, *found = 0: no CUDA here (no runtime library, no driver, no
 *    GPU); why says what was looked for. Nothing is logged at WARN;
 *  - an error: CUDA is here but unusable, or a library the user named
 *    (GPUBRIDGE_CUDART_LIBRARY, GPUBRIDGE_CUDA_LIBRARY) did not load, or
 *    GPUBRIDGE_DEVICE names a GPU that is not visible. Recorded with gbErrorSet.
 * Call once (choose.c does, under its once-guard). */
gbResult_t gbDeviceCudaOpen(gbDeviceOps* ops, int* found, char* why, size_t whyLen);

/* Makes this process's GPU current on the calling thread (cudaSetDevice, which
 * also makes its primary context current for driver and NCCL calls). Every
 * cuda op does this first, since streams are used from any thread. */
gbResult_t gbDeviceCudaMakeCurrent(void);

/* The chosen GPU's UUID ("GPU-xxxxxxxx-...") and PCI bus id; "" where the
 * driver does not say. */
void gbDeviceCudaIdentify(char* uuid, size_t uuidLen, char* pci, size_t pciLen, int* index);
/* device.h's mps: CU_DEVICE_ATTRIBUTE_MPS_ENABLED. */
int gbDeviceCudaMps(void);

#endif
