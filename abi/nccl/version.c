/* ncclGetVersion reports the vendor library's own version, so that a
 * framework's version gates (features it enables from NCCL 2.x on) see what
 * they would see without gpubridge. gpubridge's island loads the same
 * library later (dlopen of the same name returns the same handle).
 *
 * Order: a library already in the process (RTLD_NOLOAD: the framework linked
 * it), else one loaded here (RTLD_LOCAL, so nothing it exports reaches the
 * global scope); NCCL's names first (GPUBRIDGE_NCCL_LIBRARY, else
 * libnccl.so.2), then RCCL's (GPUBRIDGE_RCCL_LIBRARY, else librccl.so.1);
 * RCCL first when GPUBRIDGE_DEVICE_BACKEND=hip. A library that turns out to
 * be this one (a copy renamed libnccl.so.2) is skipped.
 *
 * Simulated ranks (GPUBRIDGE_VENDOR set) load nothing and report NCCL 2.28.0
 * (22800), the newest API this library declares. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "nccl_exports.h"

#define SIMULATED_CODE 22800 /* NCCL 2.28.0: X*10000 + Y*100 + Z */

typedef ncclResult_t (*versionFn)(int*);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int reported = SIMULATED_CODE;

static const char* envOr(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v && v[0] ? v : fallback;
}

/* Whether p lies in this library (a renamed copy of it must not be asked). */
static int isSelf(void* p) {
  Dl_info mine, theirs;
  if (!dladdr((void*)&gbNcclVersionReported, &mine) || !dladdr(p, &theirs)) return 0;
  return mine.dli_fbase == theirs.dli_fbase;
}

/* Asks the library `name` (loaded already, or loaded now when flags allow)
 * for its version; 1 on success. */
static int ask(const char* name, int flags, int* code, char* from, size_t fromLen) {
  void* h = dlopen(name, flags);
  if (!h) return 0;
  void* sym = dlsym(h, "ncclGetVersion");
  versionFn fn;
  memcpy(&fn, &sym, sizeof(fn));
  int v = 0;
  if (!sym || isSelf(sym) || fn(&v) != ncclSuccess || v <= 0) {
    dlclose(h);
    return 0;
  }
  Dl_info info;
  snprintf(from, fromLen, "%s", dladdr(sym, &info) && info.dli_fname ? info.dli_fname : name);
  *code = v;
  return 1;
}

static void describe(int code, char* out, size_t len) {
  if (code >= 20900) snprintf(out, len, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  else snprintf(out, len, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

static void detect(void) {
  const char* vendor = getenv("GPUBRIDGE_VENDOR");
  if (vendor && vendor[0]) {
    GB_NCCL_INFO("simulated rank (GPUBRIDGE_VENDOR=%s): ncclGetVersion reports NCCL 2.28.0 (%d) and loads no "
                 "vendor library", vendor, SIMULATED_CODE);
    return;
  }
  const char* nccl = envOr("GPUBRIDGE_NCCL_LIBRARY", "libnccl.so.2");
  const char* rccl = envOr("GPUBRIDGE_RCCL_LIBRARY", "librccl.so.1");
  const char* backend = getenv("GPUBRIDGE_DEVICE_BACKEND");
  int hipFirst = backend && strcmp(backend, "hip") == 0;
  const char* names[2] = {hipFirst ? rccl : nccl, hipFirst ? nccl : rccl};
  static const int passes[2] = {RTLD_NOW | RTLD_NOLOAD, RTLD_NOW | RTLD_LOCAL};
  static const char* const how[2] = {"already loaded", "loaded for the version"};
  char from[1024], text[32];
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < 2; i++) {
      int code;
      if (!ask(names[i], passes[p], &code, from, sizeof(from))) continue;
      reported = code;
      describe(code, text, sizeof(text));
      GB_NCCL_INFO("ncclGetVersion reports %d (NCCL API %s) of %s (%s)", code, text, from, how[p]);
      return;
    }
  GB_NCCL_WARN("ncclGetVersion: no NCCL or RCCL library found (tried %s and %s; set GPUBRIDGE_NCCL_LIBRARY or "
               "GPUBRIDGE_RCCL_LIBRARY to its path): reporting NCCL 2.28.0 (%d)", names[0], names[1],
               SIMULATED_CODE);
}

int gbNcclVersionReported(void) {
  pthread_once(&once, detect);
  return reported;
}

ncclResult_t ncclGetVersion(int* version) {
  GB_NCCL_FORWARD(ncclGetVersion, version);
  if (!version) return gbNcclResult(gbNcclErrorSet(gbInvalidArgument, "ncclGetVersion: version is NULL"));
  *version = gbNcclVersionReported();
  return ncclSuccess;
}
GB_NCCL_ALIAS(ncclGetVersion)
