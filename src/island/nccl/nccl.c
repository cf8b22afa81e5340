/* The NCCL island: an NVIDIA island over NCCL, whose collectives are
 * island/vendor's; this translation unit only loads NCCL and names it. It is
 * NCCL's alone: dlopen with RTLD_LOCAL, so its symbols never clash with
 * RCCL's, which has the same names and is loaded by island/rccl in its own
 * translation unit. Its GPU is device/cuda's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"
#include "base/result.h"
#include "device/cuda/cuda.h"
#include "island/island.h"
#include "island/vendor/vendor.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gbVendorApi_t api;
static gbResult_t loadResult = gbSuccess;
static char loadError[768];

static int bindSym(const char* sym, void* field) {
  dlerror();
  void* p = dlsym(api.handle, sym);
  if (p == NULL) return 0;
  memcpy(field, &p, sizeof(p)); /* POSIX: function pointers share the representation */
  return 1;
}

static void fail(gbResult_t res, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(gbResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(loadError, sizeof(loadError), fmt, ap);
  va_end(ap);
  loadResult = res;
  if (api.handle) dlclose(api.handle);
  memset(&api, 0, sizeof(api));
}

#define SYM(s) {#s, &api.s}
static void load(void) {
  const char* named = gbParamIsSet(GB_PARAM_NCCL_LIBRARY) ? gbParamString(GB_PARAM_NCCL_LIBRARY) : "";
  const char* name = named[0] != '\0' ? named : "libnccl.so.2";
  api.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (api.handle == NULL) {
    const char* e = dlerror();
    fail(gbSystemError, "NCCL did not load: dlopen(%s) failed: %s; install NCCL 2.10 or newer, or set "
         "GPUBRIDGE_NCCL_LIBRARY to the path of libnccl.so.2", name, e ? e : "unknown error");
    return;
  }
  snprintf(api.name, sizeof(api.name), "%s", name);
  struct {
    const char* name;
    void* field;
  } syms[] = {GB_VENDOR_REQUIRED_SYMS(SYM)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    if (!bindSym(syms[i].name, syms[i].field)) {
      fail(gbSystemError, "%s has no symbol %s: it is not NCCL or too old; use NCCL 2.10 or newer "
           "(GPUBRIDGE_NCCL_LIBRARY names another)", name, syms[i].name);
      return;
    }
  }
  if (!bindSym("ncclGetLastError", &api.ncclGetLastError)) api.ncclGetLastError = NULL;
  /* PreMulSum (2.11+) is optional: without it island/vendor refuses only
   * gbRedOpCreatePreMulSum, naming the missing symbol and the version. */
  struct {
    const char* name;
    void* field;
  } pms[] = {GB_VENDOR_PREMULSUM_SYMS(SYM)};
  const char* missing = NULL;
  for (size_t i = 0; i < sizeof(pms) / sizeof(pms[0]); i++)
    if (!bindSym(pms[i].name, pms[i].field) && missing == NULL) missing = pms[i].name;
  if (missing != NULL) {
    api.ncclRedOpCreatePreMulSum = NULL;
    api.ncclRedOpDestroy = NULL;
  }
  gbVendorResult_t r = api.ncclGetVersion(&api.version);
  if (r != GB_VENDOR_SUCCESS) {
    fail(gbSystemError, "ncclGetVersion of %s failed with NCCL error %d", name, r);
    return;
  }
  char v[32];
  gbIslandVendorVersionText(api.version, v, sizeof(v));
  if (api.version < GB_VENDOR_MIN_VERSION) {
    fail(gbSystemError, "%s is NCCL %s; gpubridge needs 2.10 or newer (bfloat16, avg): update NCCL or set "
         "GPUBRIDGE_NCCL_LIBRARY", name, v);
    return;
  }
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded NCCL %s (%s)", v, name);
  if (missing != NULL)
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s has no %s: PreMulSum ops need NCCL 2.11 or newer; every other "
            "collective works", name, missing);
}
#undef SYM

/* The loader of island/vendor's gbVendorDesc_t: once per process; later
 * calls return the same table or the same failure (recorded again). */
static gbResult_t loadOnce(const gbVendorApi_t** out) {
  pthread_once(&once, load);
  if (loadResult != gbSuccess) return gbErrorSet(loadResult, "%s", loadError);
  *out = &api;
  return gbSuccess;
}

static const gbVendorDesc_t nccl = {.opsName = "nccl",
                                    .label = "NCCL",
                                    .callTag = "",
                                    .kind = "NVIDIA",
                                    .runtime = GB_DEVICE_RUNTIME_CUDA,
                                    .libraryEnv = "GPUBRIDGE_NCCL_LIBRARY",
                                    .makeCurrent = gbDeviceCudaMakeCurrent,
                                    .load = loadOnce};

gbResult_t gbIslandNcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* ctx,
                              gbIsland_t** out) {
  return gbIslandVendorCreate(&nccl, group, dev, onError, ctx, out);
}
