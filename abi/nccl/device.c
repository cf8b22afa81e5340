/* Which GPU gpubridge serves when NCCL's callers pick it.
 *
 * NCCL uses the CUDA device current on the calling thread at init; gpubridge
 * picks its GPU once per process from GPUBRIDGE_DEVICE, else the launcher's
 * local rank (src/device/gpu/select.c), and reads its settings once, at its
 * first call. So before the first call of this library into gpubridge, on a
 * real rank with GPUBRIDGE_DEVICE unset, the current device of a CUDA (or
 * HIP) runtime already in the process is written to GPUBRIDGE_DEVICE. The
 * runtime is found, never loaded: cudaGetDevice through the global scope,
 * else in an already loaded libcudart (RTLD_NOLOAD); hipGetDevice likewise
 * (first when GPUBRIDGE_DEVICE_BACKEND=hip). Later inits check that the
 * current device is still that one, since gpubridge drives one GPU per
 * process. Simulated ranks (GPUBRIDGE_VENDOR) are left alone.
 *
 * setenv runs before gpubridge starts any thread of its own; a program that
 * reads the environment from other threads at that moment is not protected. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"

typedef int (*getDeviceFn)(int*); /* cudaError_t / hipError_t: 0 is success */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int decided;    /* the first device use happened */
static int served = -1; /* the GPU gpubridge serves, -1 when it chose itself */
static int userSet;    /* GPUBRIDGE_DEVICE came from the user */

static const char* const cudaNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
static const char* const hipNames[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};

/* The current device of a runtime already in the process; 1 if one answered. */
static int askRuntime(const char* sym, const char* const* names, int nnames, int* dev) {
  void* p = dlsym(RTLD_DEFAULT, sym);
  for (int i = 0; !p && i < nnames; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (h) p = dlsym(h, sym);
  }
  if (!p) return 0;
  getDeviceFn fn;
  memcpy(&fn, &p, sizeof(fn));
  int d = -1;
  return fn(&d) == 0 && d >= 0 ? (*dev = d, 1) : 0;
}

static int currentDevice(int* dev, const char** from) {
  const char* backend = getenv("GPUBRIDGE_DEVICE_BACKEND");
  int hipFirst = backend && strcmp(backend, "hip") == 0;
  for (int k = 0; k < 2; k++) {
    int hip = hipFirst ? k == 0 : k == 1;
    if (hip ? askRuntime("hipGetDevice", hipNames, 4, dev) : askRuntime("cudaGetDevice", cudaNames, 4, dev)) {
      *from = hip ? "hipGetDevice" : "cudaGetDevice";
      return 1;
    }
  }
  return 0;
}

static int parseDevice(const char* text) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  return errno == 0 && end != text && *end == '\0' && v >= 0 && v < 1 << 20 ? (int)v : -1;
}

static int simulated(int* device) {
  const char* vendor = getenv("GPUBRIDGE_VENDOR");
  if (!vendor || !vendor[0]) return 0;
  const char* given = getenv("GPUBRIDGE_DEVICE");
  int d = given && given[0] ? parseDevice(given) : 0;
  *device = d < 0 ? 0 : d;
  return 1;
}

/* The first device use: adopt `want` (>= 0: the runtime's current device,
 * or the caller's devlist when strict). Called with lock held. */
static gbResult_t decide(const char* fn, int want, const char* wantFrom, int strict) {
  decided = 1;
  const char* given = getenv("GPUBRIDGE_DEVICE");
  if (given && given[0]) {
    userSet = 1;
    served = parseDevice(given); /* an invalid value: gpubridge reports it at init */
    if (strict && served >= 0 && want != served)
      return gbNcclErrorSet(gbInvalidUsage, "%s: %s names GPU %d, but GPUBRIDGE_DEVICE=%s: gpubridge drives one GPU "
                                            "per process; make them agree", fn, wantFrom, want, given);
    GB_NCCL_INFO("%s: GPUBRIDGE_DEVICE=%s set by the user: gpubridge serves GPU %d", fn, given, served);
    return gbSuccess;
  }
  if (want < 0) {
    GB_NCCL_INFO("%s: no CUDA or HIP runtime in this process: gpubridge chooses its GPU itself (local rank)", fn);
    return gbSuccess;
  }
  char text[16];
  snprintf(text, sizeof(text), "%d", want);
  if (setenv("GPUBRIDGE_DEVICE", text, 0) != 0)
    return gbNcclErrorSet(gbSystemError, "%s: cannot set GPUBRIDGE_DEVICE=%d: %s", fn, want, strerror(errno));
  served = want;
  GB_NCCL_INFO("%s: GPUBRIDGE_DEVICE=%d from %s (NCCL uses the current device; gpubridge now serves that GPU)", fn,
               want, wantFrom);
  return gbSuccess;
}

gbResult_t gbNcclDeviceAdopt(const char* fn, int* device) {
  if (simulated(device)) return gbSuccess;
  const char* from = NULL;
  int cur = -1;
  int have = currentDevice(&cur, &from);
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&lock);
  if (!decided) {
    res = decide(fn, have ? cur : -1, from, 0);
    if (res == gbSuccess && userSet && have && served >= 0 && cur != served)
      GB_NCCL_WARN("%s: the current device is GPU %d (%s) but GPUBRIDGE_DEVICE=%d: gpubridge serves GPU %d", fn,
                   cur, from, served, served);
  } else if (!userSet && have && served >= 0 && cur != served) {
    res = gbNcclErrorSet(gbInvalidUsage,
                         "%s: the current device is GPU %d (%s), but gpubridge serves GPU %d in this process (chosen "
                         "at its first call): gpubridge drives one GPU per process; make GPU %d current before "
                         "every NCCL call (cudaSetDevice), or run one process per GPU",
                         fn, cur, from, served, served);
  }
  *device = served >= 0 ? served : have ? cur : 0;
  pthread_mutex_unlock(&lock);
  return res;
}

gbResult_t gbNcclDeviceAdoptGiven(const char* fn, int given, int* device) {
  if (simulated(device)) {
    *device = given;
    return gbSuccess;
  }
  gbResult_t res = gbSuccess;
  pthread_mutex_lock(&lock);
  if (!decided) res = decide(fn, given, "devlist", 1);
  else if (served >= 0 && given != served)
    res = gbNcclErrorSet(gbInvalidUsage, "%s: devlist names GPU %d, but gpubridge serves GPU %d in this process: "
                                         "gpubridge drives one GPU per process", fn, given, served);
  *device = given;
  pthread_mutex_unlock(&lock);
  return res;
}
