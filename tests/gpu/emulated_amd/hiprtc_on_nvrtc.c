/* Test rig, never shipped: a libhiprtc.so that serves the hiprtc calls of
 * gpubridge's hip device with NVIDIA's NVRTC, so the reduction kernels of an
 * emulated AMD rank are compiled from the same embedded source as on AMD. Its
 * "code" is PTX, which the rig's libamdhip64.so (hip_on_cuda.c) loads with the
 * CUDA driver.
 *
 * NVRTC is loaded with dlopen: GB_RIG_NVRTC_LIBRARY, else libnvrtc.so.13,
 * libnvrtc.so.12, libnvrtc.so. hiprtcResult 0..11 and nvrtcResult 0..11 are
 * the same list (success, out of memory, program creation failure, invalid
 * input, invalid program, invalid option, compilation, builtin operation
 * failure, the three name-expression errors, internal error), so codes pass
 * through; when NVRTC cannot be loaded every call returns
 * HIPRTC_ERROR_INTERNAL_ERROR and hiprtcGetErrorString says why.
 * Options are clang's on AMD; NVRTC gets their equivalents:
 *   -ffp-contract=off -> --fmad=false;  -O0..-O3 -> dropped (NVRTC optimizes);
 * anything else passes as it is (NVRTC rejects what it does not know, and the
 * log says so). Always added: --ftz=false --prec-div=true --prec-sqrt=true,
 * as the PTX gpubridge embeds is built. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int hiprtcResult;
typedef void* hiprtcProgram; /* an nvrtcProgram */

#define HIPRTC_SUCCESS 0
#define HIPRTC_ERROR_OUT_OF_MEMORY 1
#define HIPRTC_ERROR_INTERNAL_ERROR 11
#define MAX_OPTIONS 64

static struct {
  char error[512]; /* why NVRTC did not load; "" when it did */
  const char* (*nvrtcGetErrorString)(int);
  int (*nvrtcCreateProgram)(void**, const char*, const char*, int, const char* const*, const char* const*);
  int (*nvrtcCompileProgram)(void*, int, const char* const*);
  int (*nvrtcGetProgramLogSize)(void*, size_t*);
  int (*nvrtcGetProgramLog)(void*, char*);
  int (*nvrtcGetPTXSize)(void*, size_t*);
  int (*nvrtcGetPTX)(void*, char*);
  int (*nvrtcDestroyProgram)(void**);
} nv;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char* const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  const char* named = getenv("GB_RIG_NVRTC_LIBRARY");
  const char* const* tryNames = names;
  int n = 3;
  if (named != NULL && named[0] != '\0') {
    tryNames = &named;
    n = 1;
  }
  void* h = NULL;
  for (int i = 0; i < n && h == NULL; i++) h = dlopen(tryNames[i], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char* e = dlerror();
    snprintf(nv.error, sizeof(nv.error), "emulated AMD rig: no NVRTC loaded (%s; set GB_RIG_NVRTC_LIBRARY): %s",
             n > 1 ? "tried libnvrtc.so.13, .12, libnvrtc.so" : named, e ? e : "");
    return;
  }
  struct {
    const char* name;
    void* field;
  } syms[] = {{"nvrtcGetErrorString", &nv.nvrtcGetErrorString}, {"nvrtcCreateProgram", &nv.nvrtcCreateProgram},
              {"nvrtcCompileProgram", &nv.nvrtcCompileProgram},
              {"nvrtcGetProgramLogSize", &nv.nvrtcGetProgramLogSize},
              {"nvrtcGetProgramLog", &nv.nvrtcGetProgramLog}, {"nvrtcGetPTXSize", &nv.nvrtcGetPTXSize},
              {"nvrtcGetPTX", &nv.nvrtcGetPTX}, {"nvrtcDestroyProgram", &nv.nvrtcDestroyProgram}};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    dlerror();
    void* p = dlsym(h, syms[i].name);
    if (p == NULL) {
      snprintf(nv.error, sizeof(nv.error), "emulated AMD rig: the NVRTC library has no %s", syms[i].name);
      return;
    }
    memcpy(syms[i].field, &p, sizeof(p));
  }
}

static int ready(void) {
  pthread_once(&once, load);
  return nv.error[0] == '\0';
}

#define READY()                                         \
  do {                                                  \
    if (!ready()) return HIPRTC_ERROR_INTERNAL_ERROR;   \
  } while (0)

const char* hiprtcGetErrorString(hiprtcResult result) {
  if (!ready()) return nv.error;
  return nv.nvrtcGetErrorString(result);
}

hiprtcResult hiprtcVersion(int* major, int* minor) {
  *major = 7; /* what ROCm the rig stands for; NVRTC's own version does not matter */
  *minor = 0;
  return HIPRTC_SUCCESS;
}

hiprtcResult hiprtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int numHeaders,
                                 const char** headers, const char** includeNames) {
  READY();
  return nv.nvrtcCreateProgram(prog, src, name, numHeaders, headers, includeNames);
}

hiprtcResult hiprtcCompileProgram(hiprtcProgram prog, int numOptions, const char** options) {
  READY();
  const char* nvOptions[MAX_OPTIONS + 3] = {"--ftz=false", "--prec-div=true", "--prec-sqrt=true"};
  int n = 3;
  for (int i = 0; i < numOptions; i++) {
    const char* o = options[i];
    if (strcmp(o, "-ffp-contract=off") == 0) o = "--fmad=false";
    else if (strncmp(o, "-O", 2) == 0 && strlen(o) == 3) continue;
    if (n == MAX_OPTIONS + 3) return HIPRTC_ERROR_OUT_OF_MEMORY;
    nvOptions[n++] = o;
  }
  return nv.nvrtcCompileProgram(prog, n, nvOptions);
}

hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram prog, size_t* size) {
  READY();
  return nv.nvrtcGetProgramLogSize(prog, size);
}

hiprtcResult hiprtcGetProgramLog(hiprtcProgram prog, char* log) {
  READY();
  return nv.nvrtcGetProgramLog(prog, log);
}

/* The code is the PTX, with its terminating NUL (cuModuleLoadData reads text). */
hiprtcResult hiprtcGetCodeSize(hiprtcProgram prog, size_t* size) {
  READY();
  return nv.nvrtcGetPTXSize(prog, size);
}

hiprtcResult hiprtcGetCode(hiprtcProgram prog, char* code) {
  READY();
  return nv.nvrtcGetPTX(prog, code);
}

hiprtcResult hiprtcDestroyProgram(hiprtcProgram* prog) {
  READY();
  return nv.nvrtcDestroyProgram(prog);
}
