// Ordering stress on real GPUs: a kernel writes the buffer just before the
// collective and another checks it just after, on the same stream, with no
// host synchronisation in between, for many iterations. Any missing stream
// ordering (the bridge reading before the writer finished, or the checker
// running before the bridge released the stream) shows as wrong elements.
// Built on the GPU machine: nvcc -cudart shared -I include ... -lgpubridge
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "gpubridge/gpubridge.h"

__global__ void fill(float* buf, size_t n, int rank, int iter) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    buf[i] = (float)((i + (size_t)rank * 3 + (size_t)iter) % 11);
}

// Expected sum over ranks of fill's values: integers, exact in any order.
__global__ void check(const float* buf, size_t n, int nranks, int iter, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float expected = 0;
    for (int r = 0; r < nranks; r++) expected += (float)((i + (size_t)r * 3 + (size_t)iter) % 11);
    if (buf[i] != expected) atomicAdd(wrong, 1ull);
  }
}

#define GB(call)                                                                                  \
  do {                                                                                            \
    gbResult_t r_ = (call);                                                                       \
    if (r_ != gbSuccess) {                                                                        \
      fprintf(stderr, "%s: %s: %s\n", #call, gbGetErrorString(r_), gbGetLastError(NULL));         \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)
#define CU(call)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                                 \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  size_t count = (argc > 2 ? strtoul(argv[2], NULL, 10) : 4u << 20) / sizeof(float);
  gbComm_t comm;
  GB(gbCommInitFromEnv(&comm, NULL));  // selects this rank's GPU
  int rank, nranks;
  GB(gbCommUserRank(comm, &rank));
  GB(gbCommCount(comm, &nranks));
  gbTopology_t topo;
  GB(gbCommGetTopology(comm, &topo));
  float* buf;
  unsigned long long* wrong;
  GB(gbMemAlloc((void**)&buf, count * sizeof(float)));
  CU(cudaMalloc(&wrong, sizeof(*wrong)));
  CU(cudaMemset(wrong, 0, sizeof(*wrong)));
  cudaStream_t stream;
  CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int it = 0; it < iters; it++) {
    fill<<<132, 256, 0, stream>>>(buf, count, rank, it);
    GB(gbAllReduce(buf, buf, count, gbFloat32, gbSum, comm, stream));
    check<<<132, 256, 0, stream>>>(buf, count, nranks, it, wrong);
  }
  CU(cudaStreamSynchronize(stream));
  gbResult_t async;
  GB(gbCommGetAsyncError(comm, &async));
  unsigned long long bad = 0;
  CU(cudaMemcpy(&bad, wrong, sizeof(bad), cudaMemcpyDeviceToHost));
  printf("rank %d: %d iterations of %zu floats, %d islands, policy %d%s: %llu wrong elements, async %s\n", rank, iters,
         count, topo.nislands, topo.policy, topo.splitTest ? " split-test" : "", bad, gbGetErrorString(async));
  GB(gbCommDestroy(comm));
  return bad == 0 && async == gbSuccess ? 0 : 1;
}
