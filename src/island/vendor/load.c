/* Loading a library with NCCL's API into a gbVendorApi_t: what the NCCL and
 * RCCL loaders share (the library's name, dlopen with RTLD_LOCAL, the symbol
 * tables, the version check and their messages). Each loader calls it from
 * its own translation unit, into its own table. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/result.h"
#include "island/vendor/vendor.h"
#include "os/dl.h"

static gbResult_t fail(gbVendorApi_t* api, char* err, size_t errLen, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static gbResult_t fail(gbVendorApi_t* api, char* err, size_t errLen, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errLen, fmt, ap);
  va_end(ap);
  gbOsLibraryClose(api->handle);
  memset(api, 0, sizeof(*api));
  return gbSystemError;
}

#define SYM(s) {#s, &api->s}
gbResult_t gbIslandVendorLoad(const gbVendorLibrary_t* lib, gbVendorApi_t* api, char* err, size_t errLen) {
  const char* label = lib->label;
  const char* name = lib->named[0] != '\0' ? lib->named : lib->defaultName;
  char why[512];
  memset(api, 0, sizeof(*api));
  api->handle = gbOsLibraryOpen(name, why, sizeof(why));
  if (api->handle == NULL)
    return fail(api, err, errLen, "%s did not load: dlopen(%s) failed: %s; install %s, or set %s to the path of %s",
                label, name, why, lib->installHint, lib->env, lib->defaultName);
  snprintf(api->name, sizeof(api->name), "%s", name);
  const gbOsSym_t syms[] = {GB_VENDOR_REQUIRED_SYMS(SYM)};
  const char* missing = gbOsSymbolsBind(api->handle, syms, sizeof(syms) / sizeof(syms[0]), 1);
  if (missing != NULL)
    return fail(api, err, errLen,
                "%s has no symbol %s: it is not %s or too old; use %s 2.10 or newer (%s names another)", name,
                missing, label, label, lib->env);
  if (!gbOsSymbolBind(api->handle, "ncclGetLastError", &api->ncclGetLastError)) api->ncclGetLastError = NULL;
  /* PreMulSum (2.11+) is optional: without it island/vendor refuses only
   * gbRedOpCreatePreMulSum, naming the missing symbol and the version. */
  const gbOsSym_t pms[] = {GB_VENDOR_PREMULSUM_SYMS(SYM)};
  const char* noPms = gbOsSymbolsBind(api->handle, pms, sizeof(pms) / sizeof(pms[0]), 0);
  if (noPms != NULL) {
    api->ncclRedOpCreatePreMulSum = NULL;
    api->ncclRedOpDestroy = NULL;
  }
  if (lib->emulatedMarker != NULL) {
    const char* marker = gbOsSymbolFind(api->handle, lib->emulatedMarker);
    api->emulated = marker != NULL ? (marker[0] ? marker : lib->emulatedLabel) : NULL;
  }
  gbVendorResult_t r = api->ncclGetVersion(&api->version);
  if (r != GB_VENDOR_SUCCESS) {
    const char* text = api->ncclGetErrorString(r);
    const char* last = api->ncclGetLastError ? api->ncclGetLastError(NULL) : NULL;
    return fail(api, err, errLen, "ncclGetVersion of %s failed with %s error %d (%s)%s%s", name, label, r,
                text ? text : "unknown", last && last[0] ? ": " : "", last && last[0] ? last : "");
  }
  char v[32];
  gbIslandVendorVersionText(api->version, v, sizeof(v));
  if (api->version < GB_VENDOR_MIN_VERSION)
    return fail(api, err, errLen, "%s is %s %s; gpubridge needs 2.10 or newer (bfloat16, avg): %s or set %s", name,
                label, v, lib->updateHint, lib->env);
  if (api->emulated)
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded emulated %s %s (%s: %s)", label, v, name, api->emulated);
  else
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded %s %s (%s)", label, v, name);
  if (noPms != NULL)
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s has no %s: PreMulSum ops need %s 2.11 or newer; every other "
            "collective works", name, noPms, label);
  return gbSuccess;
}
#undef SYM

gbResult_t gbIslandVendorLoadOnce(gbVendorLoaded_t* l, void (*load)(void), const gbVendorApi_t** out) {
  pthread_once(&l->once, load);
  if (l->result != gbSuccess) return gbErrorSet(l->result, "%s", l->error);
  *out = &l->api;
  return gbSuccess;
}
