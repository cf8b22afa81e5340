/* The RCCL island: an AMD island over RCCL (which keeps NCCL's API), whose
 * collectives are island/vendor's; this translation unit only loads RCCL and
 * names it. It is RCCL's alone: dlopen with RTLD_LOCAL, because RCCL exports
 * NCCL's symbol names, which must never resolve against libnccl in a process
 * that has both. Its GPU is device/hip's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/result.h"
#include "device/hip/hip.h"
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
  const char* named = getenv("GPUBRIDGE_RCCL_LIBRARY");
  const char* name = named != NULL && named[0] != '\0' ? named : "librccl.so.1";
  api.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (api.handle == NULL) {
    const char* e = dlerror();
    fail(gbSystemError, "RCCL did not load: dlopen(%s) failed: %s; install RCCL (ROCm 6 or newer), or set "
         "GPUBRIDGE_RCCL_LIBRARY to the path of librccl.so.1", name, e ? e : "unknown error");
    return;
  }
  snprintf(api.name, sizeof(api.name), "%s", name);
  struct {
    const char* name;
    void* field;
  } syms[] = {GB_VENDOR_REQUIRED_SYMS(SYM)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    if (!bindSym(syms[i].name, syms[i].field)) {
      fail(gbSystemError, "%s has no symbol %s: it is not RCCL or too old; use RCCL 2.10 or newer "
           "(GPUBRIDGE_RCCL_LIBRARY names another)", name, syms[i].name);
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
  dlerror();
  const char* marker = dlsym(api.handle, "gbEmulatedRccl");
  api.emulated = marker != NULL ? (marker[0] ? marker : "emulated RCCL") : NULL;
  gbVendorResult_t r = api.ncclGetVersion(&api.version);
  if (r != GB_VENDOR_SUCCESS) {
    const char* text = api.ncclGetErrorString(r);
    const char* last = api.ncclGetLastError ? api.ncclGetLastError(NULL) : NULL;
    fail(gbSystemError, "ncclGetVersion of %s failed with RCCL error %d (%s)%s%s", name, r, text ? text : "unknown",
         last && last[0] ? ": " : "", last && last[0] ? last : "");
    return;
  }
  char v[32];
  gbIslandVendorVersionText(api.version, v, sizeof(v));
  if (api.version < GB_VENDOR_MIN_VERSION) {
    fail(gbSystemError, "%s is RCCL %s; gpubridge needs 2.10 or newer (bfloat16, avg): update ROCm or set "
         "GPUBRIDGE_RCCL_LIBRARY", name, v);
    return;
  }
  if (api.emulated)
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded emulated RCCL %s (%s: %s)", v, name, api.emulated);
  else
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded RCCL %s (%s)", v, name);
  if (missing != NULL)
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s has no %s: PreMulSum ops need RCCL 2.11 or newer; every other "
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

static const gbVendorDesc_t rccl = {.opsName = "rccl",
                                    .label = "RCCL",
                                    .callTag = "RCCL",
                                    .kind = "AMD",
                                    .runtime = GB_DEVICE_RUNTIME_HIP,
                                    .libraryEnv = "GPUBRIDGE_RCCL_LIBRARY",
                                    .makeCurrent = gbDeviceHipMakeCurrent,
                                    .load = loadOnce};

gbResult_t gbIslandRcclCreate(gbAlgoGroup_t* group, const gbDeviceOps* dev, gbIslandErrorFn_t onError, void* ctx,
                              gbIsland_t** out) {
  return gbIslandVendorCreate(&rccl, group, dev, onError, ctx, out);
}
