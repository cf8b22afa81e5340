// Why a small bridged collective on one GPU shared by two processes takes
// ~300-400 us: this process (A) times GPU operations that the bridge issues
// (an empty kernel, 8 B and 4 KiB device-to-host copies, each followed by a
// stream synchronize) while a second process (B) on the same GPU is
//   idle     - has a context and nothing queued,
//   wait     - has a stream blocked in cuStreamWaitValue32 on host memory
//              (what a bridge rank's stream does while its peer stages),
//   hostfn   - has a stream blocked behind a host function that sleeps.
// Prints one line per mode and operation: the median of 200 tries in us.
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

static double nowUs() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void sleepHost(void*) { usleep(3000000); }

// Process B: holds its stream in the given state until killed.
static void blocker(const char* mode, int ready) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* flag;
  CK(cudaHostAlloc((void**)&flag, 4096, cudaHostAllocMapped));
  *flag = 0;
  void* dflag;
  CK(cudaHostGetDevicePointer(&dflag, flag, 0));
  for (int i = 0; i < 1000; i++) {
    if (strcmp(mode, "wait") == 0)
      cuStreamWaitValue32((CUstream)s, (CUdeviceptr)dflag, 1u + i, CU_STREAM_WAIT_VALUE_GEQ);
    else if (strcmp(mode, "hostfn") == 0)
      CK(cudaLaunchHostFunc(s, sleepHost, NULL));
    empty<<<1, 1, 0, s>>>();
    if (i == 0) { char c = 1; if (write(ready, &c, 1) != 1) exit(1); }
    if (strcmp(mode, "idle") == 0) break;
  }
  pause();
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
    double t[200];
    for (int i = 0; i < 200; i++) {
      double t0 = nowUs();
      if (op == 0) empty<<<1, 1, 0, s>>>();
      else CK(cudaMemcpyAsync(host, dev, op == 1 ? 8 : 4096, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      t[i] = nowUs() - t0;
    }
    qsort(t, 200, sizeof(double), cmp);
    printf("B %-6s  %-15s median %8.1f us  p90 %8.1f us\n", mode, names[op], t[100], t[180]);
    fflush(stdout);
  }
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--blocker") == 0) { /* process B, started by exec: no CUDA state from A */
    blocker(argv[2], atoi(argv[3]));
    return 0;
  }
  const char* modes[3] = {"idle", "wait", "hostfn"};
  for (int m = 0; m < 3; m++) {
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
    timeOps(modes[m]);
    kill(b, SIGKILL);
    waitpid(b, NULL, 0);
  }
  return 0;
}
