/* Run-time loading of vendor libraries (CUDA, HIP, NCCL, RCCL, hiprtc), so
 * one build runs on NVIDIA nodes, AMD nodes and CPU-only machines. Always
 * RTLD_NOW | RTLD_LOCAL: a missing symbol shows at load, and a library's
 * symbols never resolve another's (RCCL exports NCCL's names). */
#ifndef GB_OS_DL_H
#define GB_OS_DL_H

#include <stddef.h>

/* One entry of a symbol table: a name and the function-pointer field it fills. */
typedef struct {
  const char* name;
  void* field;
} gbOsSym_t;

/* Loads name; NULL when it does not load, with dlerror's text in err. */
void* gbOsLibraryOpen(const char* name, char* err, size_t errLen);

/* The first of names that loads, its name in loaded. NULL when none does:
 * tried lists them, then the last dlerror in parentheses. */
void* gbOsLibraryOpenFirst(const char* const* names, int n, char* loaded, size_t loadedLen, char* tried,
                           size_t triedLen);

/* A data symbol's address (a marker string), or NULL when absent. */
const void* gbOsSymbolFind(void* handle, const char* sym);

/* dlclose; NULL is nothing. */
void gbOsLibraryClose(void* handle);

/* dlsym of sym into a function-pointer field; 0 when absent (field kept). */
int gbOsSymbolBind(void* handle, const char* sym, void* field);

/* Binds each of syms in order. required: stops at the first one missing;
 * else binds every one there is. Returns the first missing name, or NULL
 * when all bound. */
const char* gbOsSymbolsBind(void* handle, const gbOsSym_t* syms, size_t n, int required);

#endif
