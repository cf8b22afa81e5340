/* Loads RCCL with dlopen (RTLD_LOCAL: RCCL exports NCCL's symbol names, which
 * must never resolve against libnccl in a process that has both) and
 * translates ncclResult_t into gbResult_t. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/result.h"
#include "island/rccl/rccl.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gbRcclApi_t api;
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

/* "2.22.3" from 22203 (2.9 and later) or 2704 (before). */
static void versionText(int code, char* buf, size_t len) {
  if (code >= 20900)
    snprintf(buf, len, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  else
    snprintf(buf, len, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
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
  } syms[] = {SYM(ncclGetVersion), SYM(ncclGetUniqueId), SYM(ncclCommInitRank), SYM(ncclAllReduce),
              SYM(ncclReduce), SYM(ncclBroadcast), SYM(ncclCommDestroy), SYM(ncclCommAbort),
              SYM(ncclGetErrorString), SYM(ncclCommGetAsyncError)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    if (!bindSym(syms[i].name, syms[i].field)) {
      fail(gbSystemError, "%s has no symbol %s: it is not RCCL or too old; use RCCL 2.10 or newer "
           "(GPUBRIDGE_RCCL_LIBRARY names another)", name, syms[i].name);
      return;
    }
  }
  if (!bindSym("ncclGetLastError", &api.ncclGetLastError)) api.ncclGetLastError = NULL;
  dlerror();
  const char* marker = dlsym(api.handle, "gbEmulatedRccl");
  api.emulated = marker != NULL ? (marker[0] ? marker : "emulated RCCL") : NULL;
  gbRcclResult_t r = api.ncclGetVersion(&api.version);
  if (r != GB_RCCL_SUCCESS) {
    const char* text = api.ncclGetErrorString(r);
    const char* last = api.ncclGetLastError ? api.ncclGetLastError(NULL) : NULL;
    fail(gbSystemError, "ncclGetVersion of %s failed with RCCL error %d (%s)%s%s", name, r, text ? text : "unknown",
         last && last[0] ? ": " : "", last && last[0] ? last : "");
    return;
  }
  char v[32];
  versionText(api.version, v, sizeof(v));
  if (api.version < GB_RCCL_MIN_VERSION) {
    fail(gbSystemError, "%s is RCCL %s; gpubridge needs 2.10 or newer (bfloat16, avg): update ROCm or set "
         "GPUBRIDGE_RCCL_LIBRARY", name, v);
    return;
  }
  if (api.emulated)
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded emulated RCCL %s (%s: %s)", v, name, api.emulated);
  else
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "loaded RCCL %s (%s)", v, name);
}
#undef SYM

gbResult_t gbIslandRcclLoad(const gbRcclApi_t** out) {
  pthread_once(&once, load);
  if (loadResult != gbSuccess) return gbErrorSet(loadResult, "%s", loadError);
  *out = &api;
  return gbSuccess;
}

static gbResult_t translate(gbRcclResult_t r) {
  switch (r) {
    case GB_RCCL_SUCCESS: return gbSuccess;
    case GB_RCCL_UNHANDLED_CUDA_ERROR: return gbUnhandledCudaError;
    case GB_RCCL_SYSTEM_ERROR: return gbSystemError;
    case GB_RCCL_INTERNAL_ERROR: return gbInternalError;
    case GB_RCCL_INVALID_ARGUMENT: return gbInvalidArgument;
    case GB_RCCL_INVALID_USAGE: return gbInvalidUsage;
    case GB_RCCL_REMOTE_ERROR: return gbRemoteError;
    case GB_RCCL_IN_PROGRESS: return gbInProgress;
    default: return gbInternalError; /* a code newer than this table */
  }
}

gbResult_t gbIslandRcclFail(const gbRcclApi_t* a, gbRcclComm_t comm, gbRcclResult_t r, const char* fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  const char* text = a && a->ncclGetErrorString ? a->ncclGetErrorString(r) : NULL;
  const char* last = a && a->ncclGetLastError ? a->ncclGetLastError(comm) : NULL;
  return gbErrorSet(translate(r), "%s failed: RCCL error %d (%s)%s%s%s%s", what, r, text ? text : "unknown",
                    last && last[0] ? ": " : "", last && last[0] ? last : "",
                    r == GB_RCCL_UNHANDLED_CUDA_ERROR || r == GB_RCCL_SYSTEM_ERROR
                        ? "; NCCL_DEBUG=WARN shows RCCL's own account"
                        : "",
                    a && a->emulated ? " [emulated RCCL]" : "");
}
