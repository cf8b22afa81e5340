/* dlopen and dlsym for the vendor loaders (dl.h). */
#include "os/dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void* gbOsLibraryOpen(const char* name, char* err, size_t errLen) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL && errLen > 0) {
    const char* e = dlerror();
    snprintf(err, errLen, "%s", e ? e : "unknown error");
  }
  return h;
}

void* gbOsLibraryOpenFirst(const char* const* names, int n, char* loaded, size_t loadedLen, char* tried,
                           size_t triedLen) {
  size_t used = 0;
  char lastError[512] = "";
  tried[0] = '\0';
  for (int i = 0; i < n; i++) {
    void* h = gbOsLibraryOpen(names[i], lastError, sizeof(lastError));
    if (h != NULL) {
      snprintf(loaded, loadedLen, "%s", names[i]);
      return h;
    }
    int w = snprintf(tried + used, triedLen - used, "%s%s", used ? ", " : "", names[i]);
    if (w > 0 && used + (size_t)w < triedLen) used += (size_t)w;
  }
  if (used + 4 < triedLen) snprintf(tried + used, triedLen - used, " (%s)", lastError);
  return NULL;
}

void gbOsLibraryClose(void* handle) {
  if (handle != NULL) dlclose(handle);
}

const void* gbOsSymbolFind(void* handle, const char* sym) {
  dlerror();
  return dlsym(handle, sym);
}

/* POSIX guarantees a data pointer from dlsym can hold a function's address. */
int gbOsSymbolBind(void* handle, const char* sym, void* field) {
  dlerror();
  void* p = dlsym(handle, sym);
  if (p == NULL) return 0;
  memcpy(field, &p, sizeof(p));
  return 1;
}

const char* gbOsSymbolsBind(void* handle, const gbOsSym_t* syms, size_t n, int required) {
  const char* missing = NULL;
  for (size_t i = 0; i < n; i++) {
    if (gbOsSymbolBind(handle, syms[i].name, syms[i].field)) continue;
    if (missing == NULL) missing = syms[i].name;
    if (required) break;
  }
  return missing;
}
