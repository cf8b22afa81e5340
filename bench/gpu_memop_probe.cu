// What a stream memory operation costs between the bridge's chunk copies:
// one process, one GPU. A copy stream moves 256 MiB device-to-host in
// chunks; after each chunk it runs the stream memory operations a variant
// names (flag writes, waits on flags that already hold, the same batched in
// one cuStreamBatchMemOp). Prints, for each chunk size and variant, the
// median time of the whole transfer over TRIES tries and the cost per chunk
// beyond the copies alone (the variant "copy"). A second part times the
// hand-over between two streams: stream A copies chunk k out and writes a
// flag, stream B waits for it and copies chunk k back in (the bridge's copy
// and fetch streams), against the same with B waiting on an event of A.
// A third part moves the same bytes through host memory of each kind the
// bridge could use: cudaHostAlloc's, and a memfd segment (what the bridge's
// shared slots are) registered with cudaHostRegister, with and without
// MADV_HUGEPAGE: each way alone and both ways at once.
// With "pingpong": two processes bounce a flag through a shared segment,
// each answering the other from its stream, ROUNDS times: by stream memory
// ops (write, then wait), by one kernel a round (store, then spin), and by a
// memory-op write with a spinning kernel as the wait. Prints us per round
// trip (run it under MPS too: that is where a spinning kernel may be used).
//   nvcc -O2 -o memop bench/gpu_memop_probe.cu -lcuda && ./memop [pingpong]
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
#define CU(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { fprintf(stderr, "%s: error %d\n", #x, (int)r); exit(1); } } while (0)

#define TOTAL ((size_t)256 << 20)
#define TRIES 7

static char *dev, *host;
static unsigned long long* flags; /* host, mapped */
static CUdeviceptr flagsDev;
static cudaStream_t a, b;

enum { V_COPY, V_WRITE1, V_WRITE2, V_WAIT1, V_WAIT2, V_W2W2, V_BATCH, NV };
static const char* names[NV] = {"copy", "+1 write", "+2 writes", "+1 wait (holds)", "+2 waits (hold)",
                                "+2 writes +2 waits", "the same, 2 batches"};

static void memops(int v, size_t k) {
  CUstream s = (CUstream)a;
  CUdeviceptr f0 = flagsDev, f1 = flagsDev + 64, done = flagsDev + 128;
  int writes = v == V_WRITE1 ? 1 : v == V_WRITE2 || v == V_W2W2 ? 2 : 0;
  int waits = v == V_WAIT1 ? 1 : v == V_WAIT2 || v == V_W2W2 ? 2 : 0;
  for (int i = 0; i < writes; i++) CU(cuStreamWriteValue64(s, i ? f1 : f0, k + 1, 0));
  for (int i = 0; i < waits; i++) CU(cuStreamWaitValue64(s, done + 64 * i, 1, CU_STREAM_WAIT_VALUE_GEQ));
  if (v == V_BATCH) {
    CUstreamBatchMemOpParams p[2];
    memset(p, 0, sizeof(p));
    for (int i = 0; i < 2; i++) {
      p[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      p[i].writeValue.address = i ? f1 : f0;
      p[i].writeValue.value64 = k + 1;
    }
    CU(cuStreamBatchMemOp(s, 2, p, 0));
    for (int i = 0; i < 2; i++) {
      p[i].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
      p[i].waitValue.address = done + 64 * i;
      p[i].waitValue.value64 = 1;
      p[i].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    }
    CU(cuStreamBatchMemOp(s, 2, p, 0));
  }
}

static int cmp(const void* x, const void* y) {
  float p = *(const float*)x, q = *(const float*)y;
  return p < q ? -1 : p > q;
}

static float median(float* t) {
  qsort(t, TRIES, sizeof(float), cmp);
  return t[TRIES / 2];
}

/* The 256 MiB in chunks one way (dir 0 out, 1 in), variant v's memory
 * operations after each chunk (V_COPY: none); the median of TRIES. */
static float timeCopies(int dir, int v, size_t chunk) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float t[TRIES];
  for (int r = 0; r < TRIES; r++) {
    CK(cudaEventRecord(e0, a));
    for (size_t k = 0; k < TOTAL / chunk; k++) {
      CK(cudaMemcpyAsync(dir ? dev + k * chunk : host + k * chunk, dir ? host + k * chunk : dev + k * chunk, chunk,
                         dir ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, a));
      memops(v, k + (size_t)r * 4096);
    }
    CK(cudaEventRecord(e1, a));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  return median(t);
}

static float timeVariant(int v, size_t chunk) { return timeCopies(0, v, chunk); }

/* A copies chunk k out and tells B (a flag, or an event); B waits and copies it back in. */
static float timeHandover(int useFlag, size_t chunk, unsigned long long base);

/* One way (dir 0 out, 1 in), or out then in (2). */
static float timeWay(int dir, size_t chunk) { return dir == 2 ? timeHandover(0, chunk, 0) : timeCopies(dir, V_COPY, chunk); }

/* A memfd segment as the bridge makes one, registered; huge: MADV_HUGEPAGE first. */
static char* memfdHost(int huge) {
  int fd = memfd_create("probe", 0);
  if (fd < 0 || ftruncate(fd, (off_t)TOTAL) != 0) { perror("memfd"); exit(1); }
  char* p = (char*)mmap(NULL, TOTAL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) { perror("mmap"); exit(1); }
  if (huge && madvise(p, TOTAL, MADV_HUGEPAGE) != 0) perror("madvise(MADV_HUGEPAGE)");
  memset(p, 0, TOTAL);
  CK(cudaHostRegister(p, TOTAL, cudaHostRegisterPortable | cudaHostRegisterMapped));
  close(fd);
  return p;
}

static void hostKinds(void) {
  char line[256];
  FILE* f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
  if (f && fgets(line, sizeof(line), f)) printf("shmem_enabled: %s", line);
  if (f) fclose(f);
  char* pinned = host;
  const char* kinds[3] = {"cudaHostAlloc", "memfd registered", "memfd MADV_HUGEPAGE registered"};
  for (int k = 0; k < 3; k++) {
    host = k == 0 ? pinned : memfdHost(k == 2);
    if (k == 2) {
      f = fopen("/proc/meminfo", "r");
      while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "ShmemHugePages") || strstr(line, "HugePages_Total")) printf("  %s", line);
      if (f) fclose(f);
    }
    for (size_t chunk = (size_t)4 << 20; chunk <= ((size_t)16 << 20); chunk *= 4) {
      float out = timeWay(0, chunk), in = timeWay(1, chunk), both = timeWay(2, chunk);
      printf("host \"%s\" chunk_KiB %zu: out %.2f GBps, in %.2f GBps, out then in (pipelined) %.3f ms\n", kinds[k],
             chunk >> 10, TOTAL / out / 1e6, TOTAL / in / 1e6, both);
    }
    if (k) {
      CK(cudaHostUnregister(host));
      munmap(host, TOTAL);
    }
  }
  host = pinned;
}

static float timeHandover(int useFlag, size_t chunk, unsigned long long base) {
  cudaEvent_t e0, e1, done[64];
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  size_t n = TOTAL / chunk;
  for (size_t k = 0; k < n && k < 64; k++) CK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
  float t[TRIES];
  for (int r = 0; r < TRIES; r++) {
    unsigned long long seq = base + (unsigned long long)r * 4096;
    CK(cudaEventRecord(e0, a));
    CK(cudaStreamWaitEvent(b, e0, 0));
    for (size_t k = 0; k < n; k++) {
      CK(cudaMemcpyAsync(host + k * chunk, dev + k * chunk, chunk, cudaMemcpyDeviceToHost, a));
      if (useFlag) {
        CU(cuStreamWriteValue64((CUstream)a, flagsDev + 192, seq + k + 1, 0));
        CU(cuStreamWaitValue64((CUstream)b, flagsDev + 192, seq + k + 1, CU_STREAM_WAIT_VALUE_GEQ));
      } else {
        CK(cudaEventRecord(done[k % 64], a));
        CK(cudaStreamWaitEvent(b, done[k % 64], 0));
      }
      CK(cudaMemcpyAsync(dev + TOTAL + k * chunk, host + k * chunk, chunk, cudaMemcpyHostToDevice, b));
    }
    CK(cudaEventRecord(e1, b));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  return median(t);
}

/* ------------------------------------------------------------ ping-pong */
#define ROUNDS 2000

__global__ void storeThenSpin(volatile unsigned long long* out, volatile unsigned long long* in, unsigned long long v,
                              int first) {
  if (first) *out = v;
  __threadfence_system();
  while (*in < v) __nanosleep(100);
  if (!first) {
    __threadfence_system();
    *out = v;
  }
}

__global__ void spinFor(volatile unsigned long long* in, unsigned long long v) {
  while (*in < v) __nanosleep(100);
}

static double nowUs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* One side of the ping-pong; the leader writes first. Words of seg: 0 ping, 8 pong, 16/24 host barrier. */
static double pingpongSide(volatile unsigned long long* seg, int leader, int mode, unsigned long long base) {
  CK(cudaSetDevice(0));
  static unsigned long long* segDev;
  static cudaStream_t s;
  if (!segDev) {
    CK(cudaHostRegister((void*)seg, 4096, cudaHostRegisterPortable | cudaHostRegisterMapped));
    CK(cudaHostGetDevicePointer((void**)&segDev, (void*)seg, 0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  unsigned long long *out = segDev + (leader ? 0 : 1), *in = segDev + (leader ? 1 : 0);
  /* Host barrier: each side counts its arrivals in its own word. */
  __atomic_fetch_add((unsigned long long*)&seg[leader ? 2 : 3], 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n((unsigned long long*)&seg[leader ? 3 : 2], __ATOMIC_SEQ_CST) < seg[leader ? 2 : 3]) {
  }
  double t0 = nowUs();
  for (unsigned long long i = base + 1; i <= base + ROUNDS; i++) {
    if (mode == 1) {
      storeThenSpin<<<1, 1, 0, s>>>(out, in, i, leader);
      continue;
    }
    if (leader) CU(cuStreamWriteValue64((CUstream)s, (CUdeviceptr)out, i, 0));
    if (mode == 0) CU(cuStreamWaitValue64((CUstream)s, (CUdeviceptr)in, i, CU_STREAM_WAIT_VALUE_GEQ));
    else spinFor<<<1, 1, 0, s>>>(in, i);
    if (!leader) CU(cuStreamWriteValue64((CUstream)s, (CUdeviceptr)out, i, 0));
  }
  CK(cudaStreamSynchronize(s));
  return (nowUs() - t0) / ROUNDS;
}

static int pingpong(void) {
  int fd = memfd_create("pingpong", 0);
  if (fd < 0 || ftruncate(fd, 4096) != 0) { perror("memfd"); return 1; }
  volatile unsigned long long* seg =
      (volatile unsigned long long*)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  memset((void*)seg, 0, 4096);
  pid_t child = fork();
  const char* names3[3] = {"stream memory ops", "one kernel a round", "memory-op write, spinning kernel wait"};
  for (int mode = 0; mode < 3; mode++) {
    double us = pingpongSide(seg, child != 0, mode, (unsigned long long)mode * 1000000);
    if (child) printf("pingpong \"%s\": %.2f us per round trip (%d rounds)\n", names3[mode], us, ROUNDS);
  }
  if (!child) _exit(0);
  int st;
  waitpid(child, &st, 0);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "pingpong") == 0) return pingpong();
  CK(cudaSetDevice(0));
  CK(cudaMalloc((void**)&dev, 2 * TOTAL));
  CK(cudaMemset(dev, 1, 2 * TOTAL));
  CK(cudaHostAlloc((void**)&host, TOTAL, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(host, 0, TOTAL);
  CK(cudaHostAlloc((void**)&flags, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(flags, 0, 4096);
  flags[16] = flags[24] = 1; /* the waits' flags (bytes 128 and 192): they hold */
  CK(cudaHostGetDevicePointer((void**)&flagsDev, flags, 0));
  CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  size_t chunks[] = {(size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20};
  for (int c = 0; c < 3; c++) {
    size_t chunk = chunks[c], n = TOTAL / chunk;
    timeVariant(V_COPY, chunk); /* warm-up */
    float base = timeVariant(V_COPY, chunk);
    for (int v = 0; v < NV; v++) {
      float ms = v == V_COPY ? base : timeVariant(v, chunk);
      printf("memops chunk_KiB %zu variant \"%s\" ms %.3f GBps %.2f us_per_chunk_beyond_copy %.2f\n", chunk >> 10,
             names[v], ms, TOTAL / ms / 1e6, (ms - base) * 1e3 / (double)n);
    }
    float ev = timeHandover(0, chunk, 0), fl = timeHandover(1, chunk, 1ull << 40);
    printf("handover chunk_KiB %zu out_then_in: event ms %.3f flag ms %.3f (flag - event) us_per_chunk %.2f\n",
           chunk >> 10, ev, fl, (fl - ev) * 1e3 / (double)n);
  }
  hostKinds();
  return 0;
}
