/* What a GPU backend does before its device is open: load its runtime (the
 * one a variable names, else the first default; os/dl.h), and choose this
 * process's GPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/gpu/gpu.h"
#include "os/dl.h"

gbResult_t gbGpuRuntimeLoad(const gbGpuLibrary_t* lib, void** handle, char* loaded, size_t loadedLen, int* found,
                            char* why, size_t whyLen) {
  char tried[512];
  if (lib->named[0] != '\0') {
    *handle = gbOsLibraryOpenFirst(&lib->named, 1, loaded, loadedLen, tried, sizeof(tried));
    if (*handle == NULL)
      return gbErrorSet(gbUnhandledCudaError,
                        "%s=%s did not load: %s; give the path of %s, "
                        "or unset it to search the default names",
                        lib->var, lib->named, tried, lib->pathHint);
    return gbSuccess;
  }
  *handle = gbOsLibraryOpenFirst(lib->defaults, lib->defaultCount, loaded, loadedLen, tried, sizeof(tried));
  if (*handle == NULL) {
    *found = 0;
    snprintf(why, whyLen, "no %s runtime: tried %s; set %s to its path", lib->label, tried, lib->var);
  }
  return gbSuccess;
}

/* The launcher's local rank, or -1. */
static int localRank(const char** from) {
  static const char* const names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    const char* v = getenv(names[i]);
    if (v == NULL || v[0] == '\0') continue;
    char* end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno == 0 && end != v && *end == '\0' && n >= 0 && n < 1 << 20) {
      *from = names[i];
      return (int)n;
    }
  }
  return -1;
}

/* "A=x" for each of vars ("unset" where unset), joined by ", ". */
static void describeVisible(const char* const* vars, int count, char* out, size_t outLen) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < count && vars[i] != NULL; i++) {
    const char* v = getenv(vars[i]);
    int w = snprintf(out + used, outLen - used, "%s%s=%s", i ? ", " : "", vars[i], v ? v : "unset");
    if (w < 0 || used + (size_t)w >= outLen) break;
    used += (size_t)w;
  }
}

gbResult_t gbGpuDeviceChoose(gbGpuRuntime_t* rt) {
  char vis[512];
  const char* var = rt->visibleVars[0];
  int64_t want = gbParamInt(GB_PARAM_DEVICE);
  if (gbParamIsSet(GB_PARAM_DEVICE) && want >= 0) {
    if (want >= rt->deviceCount) {
      describeVisible(rt->visibleVars, 3, vis, sizeof(vis));
      return gbErrorSet(gbInvalidArgument,
                        "GPUBRIDGE_DEVICE=%lld, but this process sees %d GPU%s (%s); "
                        "use an index from 0 to %d, or unset it to use the local rank",
                        (long long)want, rt->deviceCount, rt->deviceCount == 1 ? "" : "s", vis,
                        rt->deviceCount - 1);
    }
    rt->device = (int)want;
    GB_INFO(GB_LOG_DEVICE, "GPU %d of %d from GPUBRIDGE_DEVICE", rt->device, rt->deviceCount);
    return gbSuccess;
  }
  const char* from = NULL;
  int lr = localRank(&from);
  if (lr >= rt->deviceCount && rt->deviceCount > 1) {
    describeVisible(rt->visibleVars, 1, vis, sizeof(vis));
    return gbErrorSet(gbInvalidArgument,
                      "%s=%d names GPU %d, but this process sees %d GPUs (%s): start at most "
                      "%d ranks on this node, or give each rank its own GPU (%s per rank; Slurm: "
                      "--gpus-per-task=1) or set GPUBRIDGE_DEVICE",
                      from, lr, lr, rt->deviceCount, vis, rt->deviceCount, var);
  }
  /* One visible GPU (a per-rank visibility variable, Slurm's
   * --gpus-per-task) is this rank's whatever its local rank. */
  rt->device = lr >= 0 && rt->deviceCount > 1 ? lr : 0;
  if (lr >= 0)
    GB_INFO(GB_LOG_DEVICE, "GPU %d of %d from %s=%d", rt->device, rt->deviceCount, from, lr);
  else
    GB_INFO(GB_LOG_DEVICE, "GPU 0 of %d (no GPUBRIDGE_DEVICE and no local rank variable)", rt->deviceCount);
  return gbSuccess;
}
