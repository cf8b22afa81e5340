/* The reduction kernels of reduceAsync, embedded in the library
 * (reduce_embedded.c, made by embed.py from reduce.cu): the CUDA backend
 * loads the PTX, the HIP backend compiles the source with hiprtc. */
#ifndef GB_DEVICE_GPU_KERNELS_KERNELS_H
#define GB_DEVICE_GPU_KERNELS_KERNELS_H

extern const char gbGpuKernelsPtx[];      /* PTX text, NUL-terminated */
extern const char gbGpuKernelsSource[];   /* reduce.cu as it is */
extern const char gbGpuKernelsCompiler[]; /* "nvcc 13.0.88 -ptx -arch=compute_75 ...": what made the PTX */

#endif
