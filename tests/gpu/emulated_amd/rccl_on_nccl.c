/* Test rig, never shipped: a librccl.so.1 that forwards the nccl* calls of
 * gpubridge's RCCL island to NCCL (libnccl.so.2, or GPUBRIDGE_NCCL_LIBRARY,
 * loaded with dlopen RTLD_LOCAL), so that an emulated AMD rank (hip_on_cuda.c)
 * runs its island through island/rccl on an NVIDIA GPU. RCCL keeps NCCL's
 * names, signatures and enum values (ROCm/rccl src/nccl.h.in), so each call
 * forwards unchanged (PreMulSum ops too: the op value NCCL returns is the one
 * island/rccl gets and hands back). Only the calls island/rccl makes are
 * here; the NCCL below must be 2.11 or newer (ncclRedOpCreatePreMulSum).
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
typedef int ncclScalarResidence_t;
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
  ncclResult_t (*ncclAllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, void*);
  ncclResult_t (*ncclReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, void*);
  ncclResult_t (*ncclSend)(const void*, size_t, ncclDataType_t, int, ncclComm_t, void*);
  ncclResult_t (*ncclRecv)(void*, size_t, ncclDataType_t, int, ncclComm_t, void*);
  ncclResult_t (*ncclGroupStart)(void);
  ncclResult_t (*ncclGroupEnd)(void);
  ncclResult_t (*ncclRedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
  ncclResult_t (*ncclRedOpDestroy)(ncclRedOp_t, ncclComm_t);
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
              SYM(ncclReduce), SYM(ncclBroadcast), SYM(ncclAllGather), SYM(ncclReduceScatter),
              SYM(ncclSend), SYM(ncclRecv), SYM(ncclGroupStart), SYM(ncclGroupEnd),
              SYM(ncclRedOpCreatePreMulSum), SYM(ncclRedOpDestroy), SYM(ncclCommDestroy),
              SYM(ncclCommAbort), SYM(ncclGetErrorString), SYM(ncclCommGetAsyncError)};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!bindSym(syms[i].name, syms[i].field)) {
      snprintf(nc.error, sizeof(nc.error), "emulated RCCL rig: %s has no %s; the rig needs NCCL 2.11 or newer",
               name, syms[i].name);
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

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t dt, ncclComm_t comm,
                           void* stream) {
  return ready() ? nc.ncclAllGather(send, recv, sendcount, dt, comm, stream) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, void* stream) {
  return ready() ? nc.ncclReduceScatter(send, recv, recvcount, dt, op, comm, stream) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, void* stream) {
  return ready() ? nc.ncclSend(buf, count, dt, peer, comm, stream) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, void* stream) {
  return ready() ? nc.ncclRecv(buf, count, dt, peer, comm, stream) : NCCL_SYSTEM_ERROR;
}

/* NCCL's group state is per thread, and the calls of one group come from one
 * thread, so forwarding keeps the nesting NCCL sees. */
ncclResult_t ncclGroupStart(void) { return ready() ? nc.ncclGroupStart() : NCCL_SYSTEM_ERROR; }

ncclResult_t ncclGroupEnd(void) { return ready() ? nc.ncclGroupEnd() : NCCL_SYSTEM_ERROR; }

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t dt,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return ready() ? nc.ncclRedOpCreatePreMulSum(op, scalar, dt, residence, comm) : NCCL_SYSTEM_ERROR;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return ready() ? nc.ncclRedOpDestroy(op, comm) : NCCL_SYSTEM_ERROR;
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
