/* NCCL or RCCL alone, for --baseline and the version in the header: loaded
 * with dlopen (the names gpubridge itself loads, or GPUBRIDGE_NCCL_LIBRARY /
 * GPUBRIDGE_RCCL_LIBRARY), so this tool needs no vendor header. Both export
 * the same nccl* names; data types and ops have gpubridge's values. The
 * communicator spans the same ranks as gpubridge's, its id handed on by
 * gbBroadcast, and runs on the same buffers and stream. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

typedef struct {
  char internal[GB_UNIQUE_ID_BYTES]; /* ncclUniqueId: 128 bytes */
} vendorId_t;

typedef int vendorResult_t; /* ncclResult_t: 0 is success */

struct perfVendor {
  void* lib;
  void* comm;
  char label[48];
  vendorResult_t (*getVersion)(int*);
  vendorResult_t (*getUniqueId)(vendorId_t*);
  vendorResult_t (*commInitRank)(void**, int, vendorId_t, int);
  vendorResult_t (*commDestroy)(void*);
  const char* (*getErrorString)(vendorResult_t);
  vendorResult_t (*allReduce)(const void*, void*, size_t, int, int, void*, void*);
  vendorResult_t (*broadcast)(const void*, void*, size_t, int, int, void*, void*);
  vendorResult_t (*reduce)(const void*, void*, size_t, int, int, int, void*, void*);
  vendorResult_t (*allGather)(const void*, void*, size_t, int, void*, void*);
  vendorResult_t (*reduceScatter)(const void*, void*, size_t, int, int, void*, void*);
  vendorResult_t (*send)(const void*, size_t, int, int, void*, void*);
  vendorResult_t (*recv)(void*, size_t, int, int, void*, void*);
  vendorResult_t (*groupStart)(void);
  vendorResult_t (*groupEnd)(void);
};

const char* perfVendorLibraryOf(const char* islandVendor) {
  if (strncmp(islandVendor, "nvidia", 6) == 0) return "nccl";
  if (strncmp(islandVendor, "amd", 3) == 0) return "rccl"; /* amd, amd-emulated */
  return NULL;
}

static const char* fileName(const char* lib) {
  const char* given = getenv(strcmp(lib, "nccl") == 0 ? "GPUBRIDGE_NCCL_LIBRARY" : "GPUBRIDGE_RCCL_LIBRARY");
  if (given && *given) return given;
  return strcmp(lib, "nccl") == 0 ? "libnccl.so.2" : "librccl.so.1";
}

/* "NCCL 2.28.3": codes are X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before. */
static void versionText(const char* lib, int code, char* buf, size_t len) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  snprintf(buf, len, "%s %d.%d.%d", strcmp(lib, "nccl") == 0 ? "NCCL" : "RCCL", major, minor, code % 100);
}

#define BIND(v, field, name) (*(void**)&(v)->field = dlsym((v)->lib, name))

/* Loads lib into v; returns 0, or -1 with why. */
static int load(struct perfVendor* v, const char* lib, char* why, size_t len) {
  const char* name = fileName(lib);
  v->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!v->lib) {
    snprintf(why, len, "cannot load %s: %s", name, dlerror());
    return -1;
  }
  int ok = BIND(v, getVersion, "ncclGetVersion") && BIND(v, getUniqueId, "ncclGetUniqueId") &&
           BIND(v, commInitRank, "ncclCommInitRank") && BIND(v, commDestroy, "ncclCommDestroy") &&
           BIND(v, getErrorString, "ncclGetErrorString") && BIND(v, allReduce, "ncclAllReduce") &&
           BIND(v, broadcast, "ncclBroadcast") && BIND(v, reduce, "ncclReduce") &&
           BIND(v, allGather, "ncclAllGather") && BIND(v, reduceScatter, "ncclReduceScatter") &&
           BIND(v, send, "ncclSend") && BIND(v, recv, "ncclRecv") && BIND(v, groupStart, "ncclGroupStart") &&
           BIND(v, groupEnd, "ncclGroupEnd");
  if (!ok) {
    snprintf(why, len, "%s lacks a symbol gpubridge-perf needs (ncclSend and ncclRecv need NCCL 2.7 or later)",
             name);
    return -1;
  }
  int code = 0;
  if (v->getVersion(&code) != 0) {
    snprintf(why, len, "%s: ncclGetVersion failed", name);
    return -1;
  }
  char text[40];
  versionText(lib, code, text, sizeof(text));
  snprintf(v->label, sizeof(v->label), "%s", text);
  for (char* c = v->label; *c; c++) *c = *c == ' ' ? '-' : (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
  return 0;
}

void perfVendorVersionText(const char* lib, char* buf, size_t len) {
  buf[0] = '\0';
  if (!lib) return;
  struct perfVendor v = {0};
  char why[256];
  /* gpubridge loaded it already: the same handle, and its version. */
  if (load(&v, lib, why, sizeof(why)) == 0) {
    int code = 0;
    v.getVersion(&code);
    versionText(lib, code, buf, len);
  }
  if (v.lib) dlclose(v.lib);
}

static void vendorCheck(const perfVendor_t* v, vendorResult_t res, const char* call) {
  if (res == 0) return;
  char why[256];
  snprintf(why, sizeof(why), "--baseline: %s failed: %s (code %d)", call, v->getErrorString(res), res);
  perfFail(why);
}

perfVendor_t* perfVendorCreate(perfCtx_t* ctx, const char* lib) {
  perfVendor_t* v = calloc(1, sizeof(*v));
  if (!v) perfFail("out of host memory");
  char why[320];
  uint64_t failed = load(v, lib, why, sizeof(why)) != 0;
  if (failed) fprintf(stderr, "gpubridge-perf: rank %d: --baseline: %s\n", ctx->topo.rank, why);
  /* Every rank learns whether all could load it before any waits in init. */
  perfRanksSumU64(ctx, &failed, 1);
  if (failed) perfFail("--baseline: the vendor library could not be loaded on every rank (see above)");
  vendorId_t id;
  memset(&id, 0, sizeof(id));
  if (ctx->topo.rank == 0) vendorCheck(v, v->getUniqueId(&id), "ncclGetUniqueId");
  perfRanksBroadcast(ctx, &id, sizeof(id), 0);
  vendorCheck(v, v->commInitRank(&v->comm, ctx->topo.nranks, id, ctx->topo.rank), "ncclCommInitRank");
  return v;
}

void perfVendorDestroy(perfVendor_t* v) {
  if (!v) return;
  if (v->comm) vendorCheck(v, v->commDestroy(v->comm), "ncclCommDestroy");
  dlclose(v->lib);
  free(v);
}

const char* perfVendorLabel(const perfVendor_t* v) { return v->label; }

/* alltoall as nccl-tests runs it on libraries without one: a group of a send
 * to and a receive from every rank. */
static void allToAll(perfVendor_t* v, const void* send, void* recv, size_t count, gbDataType_t dt, int nranks,
                     void* stream) {
  size_t bytes = count * perfTypeSize(dt);
  vendorCheck(v, v->groupStart(), "ncclGroupStart");
  for (int p = 0; p < nranks; p++) {
    vendorCheck(v, v->send((const char*)send + (size_t)p * bytes, count, dt, p, v->comm, stream), "ncclSend");
    vendorCheck(v, v->recv((char*)recv + (size_t)p * bytes, count, dt, p, v->comm, stream), "ncclRecv");
  }
  vendorCheck(v, v->groupEnd(), "ncclGroupEnd");
}

void perfVendorEnqueue(perfVendor_t* v, const perfCtx_t* ctx, perfColl_t coll, const void* send, void* recv,
                       size_t count, gbDataType_t dt, gbRedOp_t op, int root, void* stream) {
  int rank = ctx->topo.rank, n = ctx->topo.nranks;
  switch (coll) {
    case PERF_ALL_REDUCE: vendorCheck(v, v->allReduce(send, recv, count, dt, op, v->comm, stream), "ncclAllReduce"); return;
    case PERF_BROADCAST: vendorCheck(v, v->broadcast(send, recv, count, dt, root, v->comm, stream), "ncclBroadcast"); return;
    case PERF_REDUCE: vendorCheck(v, v->reduce(send, recv, count, dt, op, root, v->comm, stream), "ncclReduce"); return;
    case PERF_ALL_GATHER: vendorCheck(v, v->allGather(send, recv, count, dt, v->comm, stream), "ncclAllGather"); return;
    case PERF_REDUCE_SCATTER:
      vendorCheck(v, v->reduceScatter(send, recv, count, dt, op, v->comm, stream), "ncclReduceScatter");
      return;
    case PERF_ALLTOALL: allToAll(v, send, recv, count, dt, n, stream); return;
    case PERF_SENDRECV:
      vendorCheck(v, v->groupStart(), "ncclGroupStart");
      vendorCheck(v, v->send(send, count, dt, (rank + 1) % n, v->comm, stream), "ncclSend");
      vendorCheck(v, v->recv(recv, count, dt, (rank + n - 1) % n, v->comm, stream), "ncclRecv");
      vendorCheck(v, v->groupEnd(), "ncclGroupEnd");
      return;
    default: perfFail("internal: unknown collective");
  }
}
