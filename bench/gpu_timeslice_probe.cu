// Why a small bridged collective on one GPU shared by two processes takes
// ~300-400 us: this process (A) times GPU operations that the bridge issues
// (an empty kernel, 8 B and 4 KiB device-to-host copies, each followed by a
// stream synchronize) while a second process (B) on the same GPU is
//   idle     - has a context and nothing queued,
//   wait     - has a stream blocked in cuStreamWaitValue32 on host memory
//              (what a bridge rank's stream does while its peer stages),
//              released by B's host every 100 ms,
//   hostfn   - has a stream blocked behind host functions that sleep 100 ms,
//   kernels  - launches an empty kernel every 100 us (what the other bridge
//              rank's reductions do), so both contexts want the compute engine.
// With --own: this process's own stream waits on host memory instead
// (ownWaits). With --copies: while B launches kernels, times small copies
// by way and size (timeCopies). Prints one line per mode and operation: the median and 90th percentile of
// TRIES tries in us. If B's blocked stream holds the GPU's compute engine,
// A's kernel waits up to B's 100 ms; copies run on copy engines.
//   nvcc -O2 -o probe bench/gpu_timeslice_probe.cu -lcuda && ./probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void empty() {}

/* Spins on a host-mapped word until it reaches want. */
__global__ void spinWait(volatile unsigned* flag, unsigned want) {
  while (*flag < want) {
  }
}

static double nowUs() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* A non-blocking stream and a host-mapped word (0), with its device address. */
static void streamAndWord(cudaStream_t* s, unsigned** flag, void** dflag) {
  CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  CK(cudaHostAlloc((void**)flag, 4096, cudaHostAllocMapped));
  **flag = 0;
  CK(cudaHostGetDevicePointer(dflag, *flag, 0));
}

static void sleepHost(void*) { usleep(100000); }
#define TRIES 40

// Process B: holds its stream in the given state until killed.
static void blocker(const char* mode, int ready) {
  cudaStream_t s;
  unsigned* flag;
  void* dflag;
  streamAndWord(&s, &flag, &dflag);
  empty<<<1, 1, 0, s>>>(); /* the kernel's module is loaded lazily: load it before the stream blocks */
  CK(cudaStreamSynchronize(s));
  if (strcmp(mode, "kernels") == 0) {
    char c = 1;
    if (write(ready, &c, 1) != 1) exit(1);
    for (;;) {
      empty<<<1, 1, 0, s>>>();
      CK(cudaStreamSynchronize(s));
      usleep(100);
    }
  }
  for (int i = 0; i < 1000; i++) {
    if (strcmp(mode, "wait") == 0) {
      CUresult r = cuStreamWaitValue32((CUstream)s, (CUdeviceptr)dflag, 1u + i, CU_STREAM_WAIT_VALUE_GEQ);
      if (r != CUDA_SUCCESS) { fprintf(stderr, "cuStreamWaitValue32: %d\n", (int)r); exit(1); }
    } else if (strcmp(mode, "hostfn") == 0) {
      CK(cudaLaunchHostFunc(s, sleepHost, NULL));
    }
    empty<<<1, 1, 0, s>>>();
    if (i == 0) { char c = 1; if (write(ready, &c, 1) != 1) exit(1); }
    if (strcmp(mode, "idle") == 0) break;
  }
  for (;;) { /* release one wait every 100 ms */
    usleep(100000);
    __atomic_add_fetch(flag, 1u, __ATOMIC_RELEASE);
  }
}

static void timeOps(const char* mode) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char* dev;
  char* host;
  CK(cudaMalloc((void**)&dev, 4096));
  CK(cudaHostAlloc((void**)&host, 4096, cudaHostAllocMapped));
  const char* names[3] = {"empty kernel", "copy 8 B d2h", "copy 4 KiB d2h"};
  for (int op = 0; op < 3; op++) {
    double t[TRIES];
    for (int i = 0; i < TRIES; i++) {
      double t0 = nowUs();
      if (op == 0) empty<<<1, 1, 0, s>>>();
      else CK(cudaMemcpyAsync(host, dev, op == 1 ? 8 : 4096, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      t[i] = nowUs() - t0;
    }
    qsort(t, TRIES, sizeof(double), cmp);
    printf("B %-6s  %-15s median %8.1f us  p90 %8.1f us\n", mode, names[op], t[TRIES / 2], t[TRIES * 9 / 10]);
    fflush(stdout);
  }
}

/* This process's own waits: the stream reaches a wait on host memory, the
 * host releases it 200 us later; the time from the release to the end of
 * the kernel queued after the wait, for a stream memory-op wait
 * (cuStreamWaitValue32) and for a kernel that spins on the word. */
static void ownWaits(void) {
  cudaStream_t s;
  unsigned* flag;
  void* dflag;
  streamAndWord(&s, &flag, &dflag);
  empty<<<1, 1, 0, s>>>();
  spinWait<<<1, 1, 0, s>>>((volatile unsigned*)dflag, 0);
  CK(cudaStreamSynchronize(s));
  const char* names[2] = {"cuStreamWaitValue32", "spinning kernel"};
  unsigned v = 0;
  for (int way = 0; way < 2; way++) {
    double t[TRIES];
    for (int i = 0; i < TRIES; i++) {
      v++;
      if (way == 0) cuStreamWaitValue32((CUstream)s, (CUdeviceptr)dflag, v, CU_STREAM_WAIT_VALUE_GEQ);
      else spinWait<<<1, 1, 0, s>>>((volatile unsigned*)dflag, v);
      empty<<<1, 1, 0, s>>>();
      double t0 = nowUs();
      while (nowUs() - t0 < 200) {
      }
      double t1 = nowUs();
      __atomic_store_n(flag, v, __ATOMIC_RELEASE);
      CK(cudaStreamSynchronize(s));
      t[i] = nowUs() - t1;
    }
    qsort(t, TRIES, sizeof(double), cmp);
    printf("own wait released after 200 us: %-19s -> kernel done after median %8.1f us  p90 %8.1f us\n", names[way],
           t[TRIES / 2], t[TRIES * 9 / 10]);
    fflush(stdout);
  }
}

/* The ways a small copy can reach the GPU: h2d with cudaMemcpyAsync, the
 * same as a device-to-device copy from the pinned page's device address
 * (cuMemcpyDtoDAsync), and d2h and device-to-device for comparison. */
enum { H2D, H2D_AS_D2D, D2H, D2D, NWAYS };
static const char* const wayNames[NWAYS] = {"h2d cudaMemcpyAsync", "h2d as d2d (mapped page)", "d2h cudaMemcpyAsync",
                                            "d2d cuMemcpyDtoDAsync"};

static void copyOnce(int way, char* dev, char* host, CUdeviceptr hostDev, size_t bytes, cudaStream_t s) {
  CUresult r = CUDA_SUCCESS;
  if (way == H2D) CK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
  if (way == D2H) CK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
  if (way == H2D_AS_D2D) r = cuMemcpyDtoDAsync((CUdeviceptr)dev, hostDev, bytes, (CUstream)s);
  if (way == D2D) r = cuMemcpyDtoDAsync((CUdeviceptr)dev, (CUdeviceptr)(dev + (1 << 20)), bytes, (CUstream)s);
  if (r != CUDA_SUCCESS) { fprintf(stderr, "cuMemcpyDtoDAsync: %d\n", (int)r); exit(1); }
}

static void timeCopies(const char* mode) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char* dev;
  char* host;
  void* hostDev;
  CK(cudaMalloc((void**)&dev, 2 << 20));
  CK(cudaHostAlloc((void**)&host, 1 << 20, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&hostDev, host, 0));
  const size_t sizes[6] = {8, 4096, 8192, 16384, 32768, 65536};
  for (int way = 0; way < NWAYS; way++)
    for (int k = 0; k < 6; k++) {
      double t[TRIES];
      for (int i = 0; i < TRIES; i++) {
        double t0 = nowUs();
        copyOnce(way, dev, host, (CUdeviceptr)hostDev, sizes[k], s);
        CK(cudaStreamSynchronize(s));
        t[i] = nowUs() - t0;
      }
      qsort(t, TRIES, sizeof(double), cmp);
      printf("B %-7s %-26s %6zu B  median %8.1f us  p90 %8.1f us\n", mode, wayNames[way], sizes[k], t[TRIES / 2],
             t[TRIES * 9 / 10]);
      fflush(stdout);
    }
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--blocker") == 0) { /* process B, started by exec: no CUDA state from A */
    blocker(argv[2], atoi(argv[3]));
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--own") == 0) {
    ownWaits();
    return 0;
  }
  int copies = argc == 2 && strcmp(argv[1], "--copies") == 0;
  const char* modes[4] = {"idle", "wait", "hostfn", "kernels"};
  for (int m = copies ? 3 : 0; m < 4; m++) {
    int p[2];
    if (pipe(p) != 0) return 1;
    pid_t b = fork();
    if (b == 0) {
      close(p[0]);
      char fd[16];
      snprintf(fd, sizeof(fd), "%d", p[1]);
      execl("/proc/self/exe", argv[0], "--blocker", modes[m], fd, (char*)NULL);
      _exit(127);
    }
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) return 1;
    close(p[0]);
    if (copies) timeCopies(modes[m]);
    else timeOps(modes[m]);
    kill(b, SIGKILL);
    waitpid(b, NULL, 0);
  }
  return 0;
}
