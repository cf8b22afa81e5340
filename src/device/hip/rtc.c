/* The reduction kernels on a HIP GPU: hiprtc (HIP's run-time compiler,
 * loaded with dlopen on first use) compiles the embedded source
 * (device/gpu/kernels/reduce.cu) for this process's GPU, the architecture
 * hiprtc picks when none is given. -ffp-contract=off: no multiply-add
 * contraction, as the PTX is built; subnormals and IEEE division are HIP's
 * defaults. The library stays loaded: the compile runs once per process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/gpu/gpu.h"
#include "device/gpu/kernels/kernels.h"
#include "device/hip/api.h"
#include "os/dl.h"

/* hiprtc's C API (ROCm's include/hip/hiprtc.h): hiprtcResult is an enum,
 * HIPRTC_SUCCESS 0; hiprtcProgram is a pointer. */
typedef int rtcResult_t;
typedef void* rtcProgram_t;

static struct {
  const char* (*hiprtcGetErrorString)(rtcResult_t);
  rtcResult_t (*hiprtcCreateProgram)(rtcProgram_t*, const char*, const char*, int, const char**, const char**);
  rtcResult_t (*hiprtcCompileProgram)(rtcProgram_t, int, const char**);
  rtcResult_t (*hiprtcGetProgramLogSize)(rtcProgram_t, size_t*);
  rtcResult_t (*hiprtcGetProgramLog)(rtcProgram_t, char*);
  rtcResult_t (*hiprtcGetCodeSize)(rtcProgram_t, size_t*);
  rtcResult_t (*hiprtcGetCode)(rtcProgram_t, char*);
  rtcResult_t (*hiprtcDestroyProgram)(rtcProgram_t*);
} rtc;
static char rtcName[256];

#define VAR "GPUBRIDGE_HIPRTC_LIBRARY"

static gbResult_t load(void) {
  static const char* const names[] = {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so"};
  const char* named = gbParamIsSet(GB_PARAM_HIPRTC_LIBRARY) ? gbParamString(GB_PARAM_HIPRTC_LIBRARY) : "";
  char tried[512];
  void* h = named[0] ? gbOsLibraryOpenFirst(&named, 1, rtcName, sizeof(rtcName), tried, sizeof(tried))
                     : gbOsLibraryOpenFirst(names, 3, rtcName, sizeof(rtcName), tried, sizeof(tried));
  if (h == NULL && named[0])
    return gbErrorSet(gbUnhandledCudaError, "%s=%s did not load: %s; give the path of libhiprtc.so (HIP's run-time "
                      "compiler, which builds the bridge's reduction kernels), or unset it to search the default names",
                      VAR, named, tried);
  if (h == NULL)
    return gbErrorSet(gbUnhandledCudaError, "no HIP run-time compiler, which builds the bridge's reduction kernels "
                      "on AMD GPUs: tried %s; install ROCm's hiprtc or set %s to its path", tried, VAR);
  const gbOsSym_t syms[] = {{"hiprtcGetErrorString", &rtc.hiprtcGetErrorString}, {"hiprtcCreateProgram", &rtc.hiprtcCreateProgram},
              {"hiprtcCompileProgram", &rtc.hiprtcCompileProgram},
              {"hiprtcGetProgramLogSize", &rtc.hiprtcGetProgramLogSize},
              {"hiprtcGetProgramLog", &rtc.hiprtcGetProgramLog}, {"hiprtcGetCodeSize", &rtc.hiprtcGetCodeSize},
              {"hiprtcGetCode", &rtc.hiprtcGetCode}, {"hiprtcDestroyProgram", &rtc.hiprtcDestroyProgram}};
  const char* missing = gbOsSymbolsBind(h, syms, sizeof(syms) / sizeof(syms[0]), 1);
  if (missing != NULL)
    return gbErrorSet(gbUnhandledCudaError, "%s has no %s: it is not HIP's run-time compiler (set %s to "
                      "libhiprtc.so of the ROCm in use)", rtcName, missing, VAR);
  return gbSuccess;
}

static gbResult_t rtcFail(rtcResult_t r, const char* call, const char* log) {
  const char* text = rtc.hiprtcGetErrorString ? rtc.hiprtcGetErrorString(r) : NULL;
  return gbErrorSet(gbUnhandledCudaError, "%s (%s) failed for the bridge's reduction kernels: hiprtc error %d (%s)%s%s",
                    call, rtcName, r, text ? text : "no description", log && log[0] ? "; compiler log:\n" : "",
                    log ? log : "");
}

/* The compiler's log, malloc'd ("" when it has none). */
static char* programLog(rtcProgram_t prog) {
  size_t n = 0;
  char* log = NULL;
  if (rtc.hiprtcGetProgramLogSize(prog, &n) == 0 && n > 0 && (log = malloc(n + 1)) != NULL) {
    if (rtc.hiprtcGetProgramLog(prog, log) != 0) log[0] = '\0';
    log[n] = '\0';
    if (n > 4000) memcpy(log + 3996, "...", 4); /* the first errors say it */
  }
  return log;
}

gbResult_t gbDeviceHipKernelImage(const void** image, void** owned) {
  *image = NULL;
  *owned = NULL;
  GB_CHECK(load());
  rtcProgram_t prog = NULL;
  rtcResult_t r = rtc.hiprtcCreateProgram(&prog, gbGpuKernelsSource, "gpubridge_reduce.hip", 0, NULL, NULL);
  if (r != 0) return rtcFail(r, "hiprtcCreateProgram", NULL);
  const char* options[] = {"-ffp-contract=off"};
  gbResult_t res = gbSuccess;
  r = rtc.hiprtcCompileProgram(prog, (int)(sizeof(options) / sizeof(options[0])), options);
  if (r != 0) {
    char* log = programLog(prog);
    res = rtcFail(r, "hiprtcCompileProgram(-ffp-contract=off)", log);
    free(log);
    goto out;
  }
  size_t size = 0;
  r = rtc.hiprtcGetCodeSize(prog, &size);
  if (r != 0 || size == 0) {
    res = r != 0 ? rtcFail(r, "hiprtcGetCodeSize", NULL)
                 : gbErrorSet(gbUnhandledCudaError, "%s compiled the bridge's reduction kernels into no code; set %s "
                              "to the libhiprtc.so of the ROCm in use", rtcName, VAR);
    goto out;
  }
  char* code = malloc(size);
  if (code == NULL) {
    res = gbErrorSet(gbSystemError, "no memory for the %zu bytes of the reduction kernels' code object", size);
    goto out;
  }
  r = rtc.hiprtcGetCode(prog, code);
  if (r != 0) {
    free(code);
    res = rtcFail(r, "hiprtcGetCode", NULL);
    goto out;
  }
  GB_INFO(GB_LOG_DEVICE, "hip: %s compiled the reduction kernels (%zu bytes of code)", rtcName, size);
  *image = code;
  *owned = code;
out:
  (void)rtc.hiprtcDestroyProgram(&prog);
  return res;
}
