/* An island over a library with NCCL's API (island/nccl: NCCL on an NVIDIA
 * island; island/rccl: RCCL on an AMD one): the island's native collectives
 * are the library's calls on the caller's stream. gpubridge's data types and
 * reduction ops have NCCL's values (RCCL keeps them), so each call maps 1:1
 * (after a range check). The library comes loaded from its own translation
 * unit (desc->load); only names in messages differ between vendors.
 *
 * Creation, collective over the island's host group (already connected):
 *  1. every member loads the library; member 0 (the leader) makes the
 *     ncclUniqueId;
 *  2. the members agree that every one of them is ready (one all-reduce of
 *     a flag), so a member without the library fails the whole island at
 *     once instead of leaving the others inside ncclCommInitRank;
 *  3. the leader broadcasts the id's 128 bytes; ncclCommInitRank(size, id, me).
 * A failed island is aborted rather than destroyed (ncclCommAbort), and so is
 * one whose communicator was aborted (the group's abort flag). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/result.h"
#include "island/island.h"
#include "island/vendor/vendor.h"

typedef struct {
  gbIsland_t island;
  gbIslandOps_t ops; /* the shared ops under desc->opsName */
  const gbVendorDesc_t* desc;
  const gbVendorApi_t* api;
  gbVendorComm_t comm;
  gbAlgoGroup_t* group;
  const gbDeviceOps* dev;
  int onGpu; /* dev is desc->device: make its GPU current before library calls */
  gbIslandErrorFn_t onError;
  void* errCtx;
  int failed; /* first failure (atomic): later calls fail instead of hanging peers */
} vendorIsland_t;

/* " (RCCL)" after an nccl* call name when the library is not NCCL: three %s. */
#define TAG(vi) (vi)->desc->callTag[0] ? " (" : "", (vi)->desc->callTag, (vi)->desc->callTag[0] ? ")" : ""

void gbIslandVendorVersionText(int code, char* buf, size_t len) {
  if (code >= 20900)
    snprintf(buf, len, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  else
    snprintf(buf, len, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

static gbResult_t translate(gbVendorResult_t r) {
  switch (r) {
    case GB_VENDOR_SUCCESS: return gbSuccess;
    case GB_VENDOR_UNHANDLED_CUDA_ERROR: return gbUnhandledCudaError;
    case GB_VENDOR_SYSTEM_ERROR: return gbSystemError;
    case GB_VENDOR_INTERNAL_ERROR: return gbInternalError;
    case GB_VENDOR_INVALID_ARGUMENT: return gbInvalidArgument;
    case GB_VENDOR_INVALID_USAGE: return gbInvalidUsage;
    case GB_VENDOR_REMOTE_ERROR: return gbRemoteError;
    case GB_VENDOR_IN_PROGRESS: return gbInProgress;
    default: return gbInternalError; /* a code newer than this table */
  }
}

/* Records a failed library call: the gbResult_t matching r, with the call
 * (printf format), the library's error string and its last-error text. */
static gbResult_t callFailed(const vendorIsland_t* vi, gbVendorComm_t comm, gbVendorResult_t r, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static gbResult_t callFailed(const vendorIsland_t* vi, gbVendorComm_t comm, gbVendorResult_t r, const char* fmt,
                             ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  const gbVendorApi_t* a = vi->api;
  const char* label = vi->desc->label;
  const char* text = a && a->ncclGetErrorString ? a->ncclGetErrorString(r) : NULL;
  const char* last = a && a->ncclGetLastError ? a->ncclGetLastError(comm) : NULL;
  char hint[64] = "";
  if (r == GB_VENDOR_UNHANDLED_CUDA_ERROR || r == GB_VENDOR_SYSTEM_ERROR)
    snprintf(hint, sizeof(hint), "; NCCL_DEBUG=WARN shows %s's own account", label);
  char emulated[32] = "";
  if (a && a->emulated) snprintf(emulated, sizeof(emulated), " [emulated %s]", label);
  return gbErrorSet(translate(r), "%s failed: %s error %d (%s)%s%s%s%s", what, label, r, text ? text : "unknown",
                    last && last[0] ? ": " : "", last && last[0] ? last : "", hint, emulated);
}

static const char* groupName(const vendorIsland_t* vi) { return vi->group->name ? vi->group->name : "island"; }

static void markFailed(vendorIsland_t* vi, gbResult_t res) {
  int none = gbSuccess;
  __atomic_compare_exchange_n(&vi->failed, &none, (int)res, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static gbResult_t makeCurrent(const vendorIsland_t* vi) { return vi->onGpu ? vi->desc->makeCurrent() : gbSuccess; }

/* Before each call: the GPU current on this thread, and no earlier failure,
 * ours or the library's asynchronous one (a peer gone, a network error). */
static gbResult_t ready(vendorIsland_t* vi, const char* what) {
  int earlier = __atomic_load_n(&vi->failed, __ATOMIC_ACQUIRE);
  if (earlier != gbSuccess)
    return gbErrorSet((gbResult_t)earlier,
                      "%s %s skipped: an earlier %s call on this island failed (%s); destroy the "
                      "communicator and create a new one",
                      groupName(vi), what, vi->desc->label, gbResultString((gbResult_t)earlier));
  GB_CHECK(makeCurrent(vi));
  gbVendorResult_t async = GB_VENDOR_SUCCESS;
  gbVendorResult_t r = vi->api->ncclCommGetAsyncError(vi->comm, &async);
  if (r != GB_VENDOR_SUCCESS) {
    gbResult_t res = callFailed(vi, vi->comm, r, "%s: ncclCommGetAsyncError", groupName(vi));
    markFailed(vi, res);
    return res;
  }
  if (async != GB_VENDOR_SUCCESS && async != GB_VENDOR_IN_PROGRESS) {
    gbResult_t res = callFailed(vi, vi->comm, async, "%s: an earlier %s collective (asynchronous error)",
                                groupName(vi), vi->desc->label);
    markFailed(vi, res);
    if (vi->onError) vi->onError(vi->errCtx, res);
    return res;
  }
  return gbSuccess;
}

static gbResult_t checkArgs(const vendorIsland_t* vi, const char* what, gbDataType_t dt, gbRedOp_t op, int useOp,
                            int root, int useRoot) {
  if ((int)dt < 0 || dt >= gbNumTypes || gbDtypeSize(dt) == 0)
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown data type %d; use a gbDataType_t", groupName(vi), what,
                      (int)dt);
  if (useOp && ((int)op < 0 || op >= gbNumOps))
    return gbErrorSet(gbInvalidArgument, "%s %s: unknown reduction op %d; use a gbRedOp_t", groupName(vi), what,
                      (int)op);
  if (useRoot && (root < 0 || root >= vi->island.size))
    return gbErrorSet(gbInvalidArgument, "%s %s: root %d is not an island member (0..%d)", groupName(vi), what,
                      root, vi->island.size - 1);
  return gbSuccess;
}

/* gbDataType_t and gbRedOp_t values equal NCCL's (checked above for range). */
static gbVendorDataType_t vendorType(gbDataType_t dt) { return (gbVendorDataType_t)dt; }
static gbVendorRedOp_t vendorOp(gbRedOp_t op) { return (gbVendorRedOp_t)op; }

static gbResult_t done(vendorIsland_t* vi, gbVendorResult_t r, const char* call, size_t count, gbDataType_t dt,
                       void* stream) {
  if (r == GB_VENDOR_SUCCESS) return gbSuccess;
  gbResult_t res = callFailed(vi, vi->comm, r, "%s %s%s%s%s of %zu x %s on stream %p", groupName(vi), call, TAG(vi),
                              count, gbDtypeName(dt), stream);
  markFailed(vi, res);
  return res;
}

static gbResult_t allReduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            gbRedOp_t op, void* stream) {
  vendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(vi, "all-reduce", dt, op, 1, 0, 0));
  GB_CHECK(ready(vi, "all-reduce"));
  gbVendorResult_t r = vi->api->ncclAllReduce(send, recv, count, vendorType(dt), vendorOp(op), vi->comm, stream);
  return done(vi, r, "ncclAllReduce", count, dt, stream);
}

static gbResult_t reduce(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                         gbRedOp_t op, int root, void* stream) {
  vendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(vi, "reduce", dt, op, 1, root, 1));
  GB_CHECK(ready(vi, "reduce"));
  gbVendorResult_t r = vi->api->ncclReduce(send, recv, count, vendorType(dt), vendorOp(op), root, vi->comm, stream);
  return done(vi, r, "ncclReduce", count, dt, stream);
}

static gbResult_t broadcast(gbIsland_t* is, const void* send, void* recv, size_t count, gbDataType_t dt,
                            int root, void* stream) {
  vendorIsland_t* vi = is->impl;
  if (count == 0) return gbSuccess;
  GB_CHECK(checkArgs(vi, "broadcast", dt, gbSum, 0, root, 1));
  GB_CHECK(ready(vi, "broadcast"));
  gbVendorResult_t r = vi->api->ncclBroadcast(send, recv, count, vendorType(dt), root, vi->comm, stream);
  return done(vi, r, "ncclBroadcast", count, dt, stream);
}

/* Abort ends kernels that wait for a dead peer (nothing else would); destroy
 * flushes and waits, which is right only for a healthy island. */
static void abortIsland(gbIsland_t* is) {
  vendorIsland_t* vi = is->impl;
  if (vi->comm == NULL) return;
  (void)makeCurrent(vi);
  gbVendorResult_t r = vi->api->ncclCommAbort(vi->comm);
  if (r != GB_VENDOR_SUCCESS)
    (void)callFailed(vi, vi->comm, r, "%s: ncclCommAbort%s%s%s", groupName(vi), TAG(vi));
  else
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s: %s communicator aborted", groupName(vi), vi->desc->label);
  vi->comm = NULL;
}

static void destroy(gbIsland_t* is) {
  if (is == NULL) return;
  vendorIsland_t* vi = is->impl;
  if (vi->comm != NULL) {
    (void)makeCurrent(vi);
    int aborted = __atomic_load_n(&vi->failed, __ATOMIC_ACQUIRE) != gbSuccess ||
                  (vi->group->abortFlag && __atomic_load_n(vi->group->abortFlag, __ATOMIC_ACQUIRE));
    gbVendorResult_t async = GB_VENDOR_SUCCESS;
    if (!aborted && vi->api->ncclCommGetAsyncError(vi->comm, &async) == GB_VENDOR_SUCCESS &&
        async != GB_VENDOR_SUCCESS && async != GB_VENDOR_IN_PROGRESS)
      aborted = 1;
    if (aborted) {
      abortIsland(is);
    } else {
      gbVendorResult_t r = vi->api->ncclCommDestroy(vi->comm);
      if (r != GB_VENDOR_SUCCESS)
        (void)callFailed(vi, vi->comm, r, "%s: ncclCommDestroy%s%s%s", groupName(vi), TAG(vi));
      else
        GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s: %s communicator destroyed", groupName(vi), vi->desc->label);
    }
  }
  free(vi);
}

/* Steps 1-3 of the file comment; on success vi->comm is set. */
static gbResult_t join(vendorIsland_t* vi) {
  gbAlgoGroup_t* g = vi->group;
  const char* label = vi->desc->label;
  gbVendorUniqueId_t id;
  memset(&id, 0, sizeof(id));
  gbResult_t mine = vi->desc->load(&vi->api);
  if (mine == gbSuccess) mine = makeCurrent(vi);
  if (mine == gbSuccess && g->me == 0) {
    gbVendorResult_t r = vi->api->ncclGetUniqueId(&id);
    if (r != GB_VENDOR_SUCCESS) mine = callFailed(vi, NULL, r, "%s: ncclGetUniqueId%s%s%s", groupName(vi), TAG(vi));
  }
  int32_t okAll = mine == gbSuccess ? 1 : 0;
  GB_CHECK(gbAlgoAllReduce(g, &okAll, &okAll, 1, gbInt32, gbMin, 0));
  if (mine != gbSuccess) return mine; /* already recorded with its cause */
  if (!okAll)
    return gbErrorSet(gbRemoteError,
                      "%s: another member could not load %s or make the %s id (its log says why); "
                      "every rank of an %s island needs %s 2.10 or newer",
                      groupName(vi), label, label, vi->desc->kind, label);
  GB_CHECK(gbAlgoBroadcast(g, &id, sizeof(id), 0));
  gbVendorComm_t comm = NULL;
  gbVendorResult_t r = vi->api->ncclCommInitRank(&comm, g->n, id, g->me);
  if (r != GB_VENDOR_SUCCESS)
    return callFailed(vi, NULL, r, "%s: ncclCommInitRank (%s%smember %d of %d, leader rank %d)", groupName(vi),
                      vi->desc->callTag, vi->desc->callTag[0] ? "; " : "", g->me, g->n, g->ranks ? g->ranks[0] : 0);
  vi->comm = comm;
  return gbSuccess;
}

/* The library connects its ranks at the first collective (NCCL 2.22+ by
 * default); that happens on the calling thread and cannot be aborted. One
 * small all-reduce here moves it into init, so a later collective only
 * enqueues, and a peer stopped afterwards leaves gbCommAbort able to end the
 * wait. */
static gbResult_t connectNow(vendorIsland_t* vi) {
  const gbDeviceOps* dev = vi->dev;
  void* buf = NULL;
  void* stream = NULL;
  GB_CHECK(dev->memAlloc(&buf, 64));
  gbResult_t res = dev->streamCreate(&stream);
  if (res == gbSuccess) {
    (void)makeCurrent(vi);
    gbVendorResult_t r = vi->api->ncclAllReduce(buf, buf, 1, 2 /* int32 */, 0 /* sum */, vi->comm, stream);
    res = r == GB_VENDOR_SUCCESS ? dev->streamSynchronize(stream)
                                 : callFailed(vi, vi->comm, r, "%s: first ncclAllReduce, connecting the island%s%s%s",
                                              groupName(vi), TAG(vi));
    (void)dev->streamDestroy(stream);
  }
  (void)dev->memFree(buf);
  return res;
}

gbResult_t gbIslandVendorCreate(const gbVendorDesc_t* desc, gbAlgoGroup_t* group, const gbDeviceOps* dev,
                                gbIslandErrorFn_t onError, void* ctx, gbIsland_t** out) {
  const char* label = desc->label;
  if (group == NULL || dev == NULL || out == NULL)
    return gbErrorSet(gbInternalError, "%s island create: %s is NULL", label,
                      group == NULL ? "the group" : dev == NULL ? "the device" : "the output pointer");
  if (group->n < 1 || group->me < 0 || group->me >= group->n)
    return gbErrorSet(gbInternalError, "%s island create on %s: member %d of %d is not a valid group", label,
                      group->name ? group->name : "?", group->me, group->n);
  if (dev->runKind != gbRunReal)
    return gbErrorSet(gbInternalError, "%s island create on %s: device %s is not a real GPU", label,
                      group->name ? group->name : "?", dev->name);
  vendorIsland_t* vi = calloc(1, sizeof(*vi));
  if (vi == NULL) return gbErrorSet(gbSystemError, "%s island create: out of memory", label);
  vi->desc = desc;
  vi->group = group;
  vi->dev = dev;
  vi->onGpu = dev->name != NULL && strcmp(dev->name, desc->device) == 0;
  vi->onError = onError;
  vi->errCtx = ctx;
  vi->failed = gbSuccess;
  vi->ops = (gbIslandOps_t){
      .name = desc->opsName, .allReduce = allReduce, .reduce = reduce, .broadcast = broadcast, .abort = abortIsland,
      .destroy = destroy};
  vi->island.ops = &vi->ops;
  vi->island.size = group->n;
  vi->island.index = group->me;
  vi->island.impl = vi;
  gbResult_t res = join(vi);
  if (res == gbSuccess) res = connectNow(vi);
  if (res != gbSuccess) {
    if (vi->comm != NULL) (void)vi->api->ncclCommAbort(vi->comm);
    free(vi);
    return res;
  }
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s island on %s: member %d of %d, %s %d (%s)%s%s", label, groupName(vi),
          group->me, group->n, label, vi->api->version, vi->api->name, vi->api->emulated ? ", emulated " : "",
          vi->api->emulated ? desc->kind : "");
  *out = &vi->island;
  return gbSuccess;
}
