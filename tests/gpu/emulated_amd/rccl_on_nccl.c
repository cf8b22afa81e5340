/* Test rig, never shipped: a librccl.so.1 that forwards the nccl* calls of
 * gpubridge's RCCL island to NCCL (libnccl.so.2, or GPUBRIDGE_NCCL_LIBRARY,
 * loaded with dlopen RTLD_LOCAL), so that an emulated AMD rank (hip_on_cuda.c)
 * runs its island through island/rccl on an NVIDIA GPU. RCCL keeps NCCL's
 * names, signatures and enum values (ROCm/rccl src/nccl.h.in), so each call
 * forwards unchanged. Only the calls island/rccl makes are here.
 *
 * It exports gbEmulatedRccl, which island/rccl finds with dlsym to label its
 * lines "emulated". */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The marker island/rccl looks for. */
const char gbEmulatedRccl[] = "RCCL calls served by NCCL (tests/gpu/emulated_amd)";

typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;

#define NCCL_SUCCESS 0
#define NCCL_SYSTEM_ERROR 2

static struct {
  void* handle;
  char error[768]; /* why loading failed; "" when it did not */
  ncclResult_t (*ncclGetVersion)(int*);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, void*);
  ncclResult_t (*ncclReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, void*);
  ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, void*);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  const char* (*ncclGetErrorString)(ncclResult_t);
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*ncclGetLastError)(ncclComm_t); /* NULL before NCCL 2.13 */
} nc;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static int bindSym(const char* sym, void* field) {
  dlerror();
  void* p = dlsym(nc.handle, sym);
  if (p == NULL) return 0;
  memcpy(field, &p, sizeof(p));
  return 1;
}

#define SYM(s) {#s, &nc.s}
static void load(void) {
  const char* named = getenv("GPUBRIDGE_NCCL_LIBRARY");
  const char* name = named != NULL && named[0] != '\0' ? named : "libnccl.so.2";
  nc.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (nc.handle == NULL) {
    const char* e = dlerror();
    snprintf(nc.error, sizeof(nc.error), "emulated RCCL rig: dlopen(%s) failed: %s; set GPUBRIDGE_NCCL_LIBRARY",
             name, e ? e : "");
    return;
  }
  struct {
    const char* name;
    void* field;
  } syms[] = {SYM(ncclGetVersion), SYM(ncclGetUniqueId), SYM(ncclCommInitRank), SYM(ncclAllReduce),
              SYM(ncclReduce), SYM(ncclBroadcast), SYM(ncclCommDestroy), SYM(ncclCommAbort),
              SYM(ncclGetErrorString), SYM(ncclCommGetAsyncError)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!bindSym(syms[i].name, syms[i].field)) {
      snprintf(nc.error, sizeof(nc.error), "emulated RCCL rig: %s has no %s", name, syms[i].name);
      return;
    }
  if (!bindSym("ncclGetLastError", &nc.ncclGetLastError)) nc.ncclGetLastError = NULL;
}
#undef SYM

static int ready(void) {
  pthread_once(&once, load);
  return nc.error[0] == '\0';
}

ncclResult_t ncclGetVersion(int* version) { return ready() ? nc.ncclGetVersion(version) : NCCL_SYSTEM_ERROR; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) { return ready() ? nc.ncclGetUniqueId(id) : NCCL_SYSTEM_ERROR; }

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ready() ? nc.ncclCommInitRank(comm, nranks, id, rank) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, void* stream) {
  return ready() ? nc.ncclAllReduce(send, recv, count, dt, op, comm, stream) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                        ncclComm_t comm, void* stream) {
  return ready() ? nc.ncclReduce(send, recv, count, dt, op, root, comm, stream) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           void* stream) {
  return ready() ? nc.ncclBroadcast(send, recv, count, dt, root, comm, stream) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return ready() ? nc.ncclCommDestroy(comm) : NCCL_SYSTEM_ERROR; }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ready() ? nc.ncclCommAbort(comm) : NCCL_SYSTEM_ERROR; }

/* Before NCCL loaded, the load failure is the only error there is. */
const char* ncclGetErrorString(ncclResult_t r) { return ready() ? nc.ncclGetErrorString(r) : nc.error; }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  return ready() ? nc.ncclCommGetAsyncError(comm, err) : NCCL_SYSTEM_ERROR;
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (!ready()) return nc.error;
  return nc.ncclGetLastError ? nc.ncclGetLastError(comm) : "";
}
