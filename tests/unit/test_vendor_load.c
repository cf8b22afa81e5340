/* Loading vendor libraries (os/dl, island/vendor/load.c) where none is
 * installed: the search order and its "tried" text, symbol tables (required
 * ones stop at the first missing, optional ones bind what there is), and
 * the NCCL/RCCL loader's texts for a library that does not load and for one
 * that is not NCCL (the C library stands in). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/result.h"
#include "check.h"
#include "island/vendor/vendor.h"
#include "os/dl.h"

static void testSearch(void) {
  const char* const names[] = {"/nonexistent/libfirst.so", "libm.so.6", "libc.so.6"};
  char loaded[64], tried[512];
  void* h = gbOsLibraryOpenFirst(names, 3, loaded, sizeof(loaded), tried, sizeof(tried));
  CHECK(h != NULL && strcmp(loaded, "libm.so.6") == 0, "the search loaded %s, not libm.so.6", h ? loaded : "nothing");
  double (*cosFn)(double) = NULL;
  int (*none)(void) = NULL;
  const gbOsSym_t syms[] = {{"cos", &cosFn}, {"gbNoSuchSymbol", &none}, {"sin", NULL}};
  CHECK(h && strcmp(gbOsSymbolsBind(h, syms, 2, 1), "gbNoSuchSymbol") == 0, "required: the missing one is named");
  CHECK(cosFn != NULL && cosFn(0.0) == 1.0, "cos was bound");
  cosFn = NULL;
  const gbOsSym_t opt[] = {{"gbNoSuchSymbol", &none}, {"cos", &cosFn}};
  CHECK(h && strcmp(gbOsSymbolsBind(h, opt, 2, 0), "gbNoSuchSymbol") == 0 && cosFn != NULL && none == NULL,
        "optional: binds past the missing one");
  CHECK(h && gbOsSymbolsBind(h, syms, 1, 1) == NULL, "all bound: NULL");
  gbOsLibraryClose(h);
  gbOsLibraryClose(NULL);

  const char* const missing[] = {"/nonexistent/liba.so", "/nonexistent/libb.so"};
  h = gbOsLibraryOpenFirst(missing, 2, loaded, sizeof(loaded), tried, sizeof(tried));
  const char* prefix = "/nonexistent/liba.so, /nonexistent/libb.so (";
  CHECK(h == NULL && strncmp(tried, prefix, strlen(prefix)) == 0 &&
            strstr(tried, "libb.so") != NULL && tried[strlen(tried) - 1] == ')',
        "tried: %s", tried);
  char err[256];
  CHECK(gbOsLibraryOpen("/nonexistent/libc.so", err, sizeof(err)) == NULL && strstr(err, "/nonexistent/libc.so"),
        "dlerror text: %s", err);
}

static void expectLoad(const char* named, const char* want) {
  const gbVendorLibrary_t lib = {.label = "NCCL",
                                 .env = "GPUBRIDGE_NCCL_LIBRARY",
                                 .named = named,
                                 .defaultName = "libnccl.so.2",
                                 .installHint = "NCCL 2.10 or newer",
                                 .updateHint = "update NCCL"};
  gbVendorApi_t api;
  char err[768];
  gbResult_t r = gbIslandVendorLoad(&lib, &api, err, sizeof(err));
  CHECK(r == gbSystemError && strstr(err, want) != NULL, "%s: got %d, %s", named, (int)r, err);
  CHECK(api.handle == NULL && api.ncclGetVersion == NULL, "%s: the table is cleared after a failure", named);
}

int main(void) {
  testSearch();
  expectLoad("/nonexistent/libnccl.so.2", "NCCL did not load: dlopen(/nonexistent/libnccl.so.2) failed: ");
  expectLoad("/nonexistent/libnccl.so.2",
             "; install NCCL 2.10 or newer, or set GPUBRIDGE_NCCL_LIBRARY to the path of libnccl.so.2");
  expectLoad("libc.so.6", "libc.so.6 has no symbol ncclGetVersion: it is not NCCL or too old; use NCCL 2.10 or "
                          "newer (GPUBRIDGE_NCCL_LIBRARY names another)");
  if (failures) fprintf(stderr, "%d failures\n", failures);
  else printf("test_vendor_load: ok\n");
  return failures ? 1 : 0;
}
