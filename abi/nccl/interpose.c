/* Calls that must not reach gpubridge: a vendor library's calls to its own
 * exported nccl* functions.
 *
 * NCCL is not linked with -Bsymbolic, so when it calls one of its own public
 * functions (NCCL 2.28.9: ncclBcast -> ncclBroadcast, ncclCommGetAsyncError,
 * ncclGetErrorString, ncclGetUniqueId, ncclGetVersion, ncclMemAlloc/Free,
 * ncclCommRegister/Deregister, ncclCommWindowDeregister,
 * ncclDevCommDestroy...) the dynamic linker resolves the call like any
 * other, and under LD_PRELOAD it lands here, with NCCL's own communicator.
 * Every exported function therefore looks at its return address first
 * (GB_NCCL_FORWARD): a call from inside libnccl* / librccl* (or the
 * libraries GPUBRIDGE_NCCL_LIBRARY / GPUBRIDGE_RCCL_LIBRARY name) goes to
 * that library's own definition of the same name. So does a call from
 * inside libgpubridge, which reaches nccl* names only through a vendor
 * function that tail-called another through its PLT; it goes to the vendor
 * library loaded in the process.
 *
 * Cost: each thread keeps the address ranges of the last few objects that
 * called, so the check is a few comparisons; an unknown caller costs one
 * walk over the loaded objects (dl_iterate_phdr). A library unloaded and
 * another loaded at the same addresses would keep the old verdict: vendor
 * libraries and frameworks are not unloaded in practice. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"

#define CACHE 4
#define VENDORS 4

enum { CALLER_OTHER = 0, CALLER_VENDOR = 1, CALLER_GPUBRIDGE = 2 };

typedef struct {
  uintptr_t lo, hi;
  int verdict;
  int vendor; /* index in vendors[], CALLER_VENDOR only */
} range_t;

static _Thread_local range_t cache[CACHE];
static _Thread_local int cacheNext;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void* handle;
  char name[256];
} vendors[VENDORS];
static int nvendors;

/* The basename of a loaded object names a vendor library. */
static int vendorName(const char* path) {
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "libnccl", 7) == 0 || strncmp(base, "librccl", 7) == 0) return 1;
  static const char* const vars[] = {"GPUBRIDGE_NCCL_LIBRARY", "GPUBRIDGE_RCCL_LIBRARY"};
  for (int i = 0; i < 2; i++) {
    const char* v = getenv(vars[i]);
    if (!v || !v[0]) continue;
    const char* vb = strrchr(v, '/');
    if (strcmp(vb ? vb + 1 : v, base) == 0) return 1;
  }
  return 0;
}

typedef struct {
  uintptr_t addr;
  uintptr_t lo, hi;
  char name[256];
  int found;
} search_t;

static int findObject(struct dl_phdr_info* info, size_t size, void* arg) {
  search_t* s = arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* p = &info->dlpi_phdr[i];
    if (p->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + p->p_vaddr;
    if (a < lo) lo = a;
    if (a + p->p_memsz > hi) hi = a + p->p_memsz;
  }
  if (s->addr < lo || s->addr >= hi) return 0;
  s->lo = lo, s->hi = hi, s->found = 1;
  strncpy(s->name, info->dlpi_name ? info->dlpi_name : "", sizeof(s->name) - 1);
  s->name[sizeof(s->name) - 1] = '\0';
  return 1;
}

static int contains(const search_t* s, const void* p) {
  return (uintptr_t)p >= s->lo && (uintptr_t)p < s->hi;
}

/* The index of the vendor library `name` (recorded on first sight), or -1. */
static int vendorIndex(const char* name) {
  int found = -1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nvendors && found < 0; i++)
    if (strcmp(vendors[i].name, name) == 0) found = i;
  if (found < 0 && nvendors < VENDORS) {
    void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
      vendors[nvendors].handle = h;
      strncpy(vendors[nvendors].name, name, sizeof(vendors[nvendors].name) - 1);
      found = nvendors++;
    }
  }
  pthread_mutex_unlock(&lock);
  return found;
}

/* The vendor library a tail call from libgpubridge came through: the first
 * recorded, else the first of the usual names already loaded. */
static int defaultVendor(void) {
  pthread_mutex_lock(&lock);
  int n = nvendors;
  pthread_mutex_unlock(&lock);
  if (n > 0) return 0;
  const char* names[] = {getenv("GPUBRIDGE_NCCL_LIBRARY"), "libnccl.so.2", getenv("GPUBRIDGE_RCCL_LIBRARY"),
                         "librccl.so.1"};
  for (int i = 0; i < 4; i++) {
    if (!names[i] || !names[i][0]) continue;
    void* h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (!h) continue;
    void* sym = dlsym(h, "ncclGetVersion");
    Dl_info info;
    dlclose(h);
    if (sym && dladdr(sym, &info) && info.dli_fname) return vendorIndex(info.dli_fname);
  }
  return -1;
}

static range_t classify(const void* ret) {
  range_t r = {(uintptr_t)ret, (uintptr_t)ret + 1, CALLER_OTHER, -1};
  search_t s;
  memset(&s, 0, sizeof(s));
  s.addr = (uintptr_t)ret;
  dl_iterate_phdr(findObject, &s);
  if (!s.found) return r;
  r.lo = s.lo, r.hi = s.hi;
  if (contains(&s, (const void*)&classify)) return r; /* this library itself */
  if (contains(&s, (const void*)&gbCommInitRankConfig)) {
    r.verdict = CALLER_GPUBRIDGE;
  } else if (s.name[0] && vendorName(s.name)) {
    r.vendor = vendorIndex(s.name);
    if (r.vendor >= 0) r.verdict = CALLER_VENDOR;
  }
  return r;
}

/* Whether p lies in this library. */
static int ours(const void* p) {
  Dl_info mine, theirs;
  return dladdr((const void*)&classify, &mine) && dladdr(p, &theirs) && mine.dli_fbase == theirs.dli_fbase;
}

void* gbNcclInternalCall(const void* ret, const char* name, _Atomic(void*)* slots) {
  const range_t* hit = NULL;
  uintptr_t a = (uintptr_t)ret;
  for (int i = 0; i < CACHE; i++)
    if (a >= cache[i].lo && a < cache[i].hi) hit = &cache[i];
  if (!hit) {
    int slot = cacheNext;
    cacheNext = (cacheNext + 1) % CACHE;
    cache[slot] = classify(ret);
    hit = &cache[slot];
  }
  if (hit->verdict == CALLER_OTHER) return NULL;
  int v = hit->verdict == CALLER_VENDOR ? hit->vendor : defaultVendor();
  if (v < 0 || v >= GB_NCCL_FORWARD_SLOTS) return NULL;
  void* target = atomic_load(&slots[v]);
  if (target) return target;
  pthread_mutex_lock(&lock);
  void* h = vendors[v].handle;
  char lib[256];
  memcpy(lib, vendors[v].name, sizeof(lib));
  pthread_mutex_unlock(&lock);
  target = dlsym(h, name);
  if (!target || ours(target)) return NULL; /* never forward to this library */
  atomic_store(&slots[v], target);
  GB_NCCL_INFO("%s called %s through the dynamic linker, which the preload interposes: forwarded to %s's own %s "
               "(docs/DROP_IN.md)", hit->verdict == CALLER_VENDOR ? lib : "libgpubridge (a vendor tail call)", name,
               lib, name);
  return target;
}
