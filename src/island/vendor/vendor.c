/* An island over a library with NCCL's API (island/nccl: NCCL on an NVIDIA
 * island; island/rccl: RCCL on an AMD one): the island's native collectives
 * are the library's calls on the caller's stream. gpubridge's data types and
 * reduction ops have NCCL's values (RCCL keeps them), so each call maps 1:1
 * (after a range check). The library comes loaded from its own translation
 * unit (desc->load); only names in messages differ between vendors. This
 * file creates, fails and ends the island; coll.c makes the calls.
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
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/result.h"
#include "island/island.h"
#include "island/vendor/vendor.h"

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
    case GB_VENDOR_TIMEOUT: return gbTimeout;
    default: return gbInternalError; /* a code newer than this table */
  }
}

/* What to do about r, after the library's own text. */
static void advise(const gbVendorIsland_t* vi, gbVendorResult_t r, int fatal, char* buf, size_t len) {
  const char* label = vi->desc->label;
  int n;
  switch (r) {
    case GB_VENDOR_INVALID_ARGUMENT:
    case GB_VENDOR_INVALID_USAGE:
      n = snprintf(buf, len, "; NCCL_DEBUG=WARN shows what %s refused", label);
      break;
    case GB_VENDOR_REMOTE_ERROR:
      n = snprintf(buf, len, "; another member of the island failed or left: its log says why");
      break;
    default:
      n = snprintf(buf, len, "; NCCL_DEBUG=WARN shows %s's own account", label);
      break;
  }
  if (fatal && n >= 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, "; this island fails every later call: destroy the communicator and "
             "create a new one");
}

static gbResult_t callFailedV(const gbVendorIsland_t* vi, gbVendorComm_t comm, gbVendorResult_t r, int fatal,
                              const char* fmt, va_list ap) {
  char what[512];
  vsnprintf(what, sizeof(what), fmt, ap);
  const gbVendorApi_t* a = vi->api;
  const char* label = vi->desc->label;
  const char* text = a && a->ncclGetErrorString ? a->ncclGetErrorString(r) : NULL;
  const char* last = a && a->ncclGetLastError ? a->ncclGetLastError(comm) : NULL;
  char hint[192];
  advise(vi, r, fatal, hint, sizeof(hint));
  char emulated[32] = "";
  if (a && a->emulated) snprintf(emulated, sizeof(emulated), " [emulated %s]", label);
  return gbErrorSet(translate(r), "%s failed: %s error %d (%s)%s%s%s%s", what, label, r, text ? text : "unknown",
                    last && last[0] ? ": " : "", last && last[0] ? last : "", hint, emulated);
}

gbResult_t gbIslandVendorCallFailed(const gbVendorIsland_t* vi, gbVendorComm_t comm, gbVendorResult_t r,
                                    const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gbResult_t res = callFailedV(vi, comm, r, 0, fmt, ap);
  va_end(ap);
  return res;
}

gbResult_t gbIslandVendorCallFatal(gbVendorIsland_t* vi, gbVendorResult_t r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gbResult_t res = callFailedV(vi, vi->comm, r, 1, fmt, ap);
  va_end(ap);
  gbIslandVendorMarkFailed(vi, res);
  return res;
}

const char* gbIslandVendorGroupName(const gbVendorIsland_t* vi) {
  return vi->group->name ? vi->group->name : "island";
}

void gbIslandVendorMarkFailed(gbVendorIsland_t* vi, gbResult_t res) {
  int none = gbSuccess;
  atomic_compare_exchange_strong_explicit(&vi->failed, &none, (int)res, memory_order_release, memory_order_relaxed);
}

gbResult_t gbIslandVendorMakeCurrent(const gbVendorIsland_t* vi) {
  return vi->onGpu ? vi->desc->makeCurrent() : gbSuccess;
}

gbResult_t gbIslandVendorReady(gbVendorIsland_t* vi, const char* what) {
  const char* name = gbIslandVendorGroupName(vi);
  int earlier = atomic_load_explicit(&vi->failed, memory_order_acquire);
  if (earlier != gbSuccess)
    return gbErrorSet((gbResult_t)earlier,
                      "%s %s skipped: an earlier %s call on this island failed (%s); destroy the "
                      "communicator and create a new one",
                      name, what, vi->desc->label, gbResultString((gbResult_t)earlier));
  if (vi->comm == NULL)
    return gbErrorSet(gbInvalidUsage, "%s %s: the %s communicator was aborted; destroy the communicator and "
                      "create a new one", name, what, vi->desc->label);
  GB_CHECK(gbIslandVendorMakeCurrent(vi));
  gbVendorResult_t async = GB_VENDOR_SUCCESS;
  gbVendorResult_t r = vi->api->ncclCommGetAsyncError(vi->comm, &async);
  if (r != GB_VENDOR_SUCCESS)
    return gbIslandVendorCallFatal(vi, r, "%s: ncclCommGetAsyncError%s%s%s", name, GB_VENDOR_TAG(vi));
  if (async != GB_VENDOR_SUCCESS && async != GB_VENDOR_IN_PROGRESS) {
    gbResult_t res = gbIslandVendorCallFatal(vi, async, "%s: an earlier %s collective (asynchronous error)", name,
                                             vi->desc->label);
    if (vi->onError) vi->onError(vi->errCtx, res);
    return res;
  }
  return gbSuccess;
}

/* Abort ends kernels that wait for a dead peer (nothing else would); destroy
 * flushes and waits, which is right only for a healthy island. */
static void abortIsland(gbIsland_t* is) {
  gbVendorIsland_t* vi = is->impl;
  if (vi->comm == NULL) return;
  const char* name = gbIslandVendorGroupName(vi);
  (void)gbIslandVendorMakeCurrent(vi);
  gbVendorResult_t r = vi->api->ncclCommAbort(vi->comm);
  if (r != GB_VENDOR_SUCCESS)
    (void)gbIslandVendorCallFailed(vi, vi->comm, r, "%s: ncclCommAbort%s%s%s", name, GB_VENDOR_TAG(vi));
  else
    GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s: %s communicator aborted", name, vi->desc->label);
  vi->comm = NULL;
}

static void freeIsland(gbVendorIsland_t* vi) {
  gbIslandVendorUserOpsFree(vi);
  gbIslandVendorStagesFree(vi);
  pthread_mutex_destroy(&vi->userOpsLock);
  free(vi);
}

static void destroy(gbIsland_t* is) {
  if (is == NULL) return;
  gbVendorIsland_t* vi = is->impl;
  const char* name = gbIslandVendorGroupName(vi);
  if (vi->comm != NULL) {
    (void)gbIslandVendorMakeCurrent(vi);
    int aborted = atomic_load_explicit(&vi->failed, memory_order_acquire) != gbSuccess ||
                  (vi->group->abortFlag && atomic_load_explicit(vi->group->abortFlag, memory_order_acquire));
    gbVendorResult_t async = GB_VENDOR_SUCCESS;
    if (!aborted && vi->api->ncclCommGetAsyncError(vi->comm, &async) == GB_VENDOR_SUCCESS &&
        async != GB_VENDOR_SUCCESS && async != GB_VENDOR_IN_PROGRESS)
      aborted = 1;
    if (aborted) {
      abortIsland(is);
    } else {
      gbVendorResult_t r = vi->api->ncclCommDestroy(vi->comm);
      if (r != GB_VENDOR_SUCCESS)
        (void)gbIslandVendorCallFailed(vi, vi->comm, r, "%s: ncclCommDestroy%s%s%s", name, GB_VENDOR_TAG(vi));
      else
        GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s: %s communicator destroyed", name, vi->desc->label);
    }
  }
  freeIsland(vi);
}

/* Steps 1-3 of the file comment; on success vi->comm is set. */
static gbResult_t join(gbVendorIsland_t* vi) {
  gbAlgoGroup_t* g = vi->group;
  const char* label = vi->desc->label;
  const char* name = gbIslandVendorGroupName(vi);
  gbVendorUniqueId_t id;
  memset(&id, 0, sizeof(id));
  gbResult_t mine = vi->desc->load(&vi->api);
  if (mine == gbSuccess) mine = gbIslandVendorMakeCurrent(vi);
  if (mine == gbSuccess && g->me == 0) {
    gbVendorResult_t r = vi->api->ncclGetUniqueId(&id);
    if (r != GB_VENDOR_SUCCESS)
      mine = gbIslandVendorCallFailed(vi, NULL, r, "%s: ncclGetUniqueId%s%s%s", name, GB_VENDOR_TAG(vi));
  }
  int32_t okAll = mine == gbSuccess ? 1 : 0;
  GB_CHECK(gbAlgoAllReduce(g, &okAll, &okAll, 1, gbInt32, gbMin, 0));
  if (mine != gbSuccess) return mine; /* already recorded with its cause */
  if (!okAll)
    return gbErrorSet(gbRemoteError,
                      "%s: another member could not load %s or make the %s id (its log says why); "
                      "every rank of an %s island needs %s 2.10 or newer",
                      name, label, label, vi->desc->kind, label);
  GB_CHECK(gbAlgoBroadcast(g, &id, sizeof(id), 0));
  gbVendorComm_t comm = NULL;
  gbVendorResult_t r = vi->api->ncclCommInitRank(&comm, g->n, id, g->me);
  if (r != GB_VENDOR_SUCCESS)
    return gbIslandVendorCallFailed(vi, NULL, r, "%s: ncclCommInitRank (%s%smember %d of %d, leader rank %d)", name,
                                    vi->desc->callTag, vi->desc->callTag[0] ? "; " : "", g->me, g->n,
                                    g->ranks ? g->ranks[0] : 0);
  vi->comm = comm;
  return gbSuccess;
}

/* The library connects its ranks at the first collective (NCCL 2.22+ by
 * default); that happens on the calling thread and cannot be aborted. One
 * small all-reduce here moves it into init, so a later collective only
 * enqueues, and a peer stopped afterwards leaves gbCommAbort able to end the
 * wait. (Send/receive connections are made per peer pair at the first
 * group that uses the pair; connecting every pair here would cost every
 * rank n-1 connections that most jobs never use.) */
static gbResult_t connectNow(gbVendorIsland_t* vi) {
  const gbDeviceOps* dev = vi->dev;
  void* buf = NULL;
  void* stream = NULL;
  GB_CHECK(dev->memAlloc(&buf, 64));
  gbResult_t res = dev->streamCreate(&stream);
  if (res == gbSuccess) {
    (void)gbIslandVendorMakeCurrent(vi);
    gbVendorResult_t r = vi->api->ncclAllReduce(buf, buf, 1, 2 /* int32 */, 0 /* sum */, vi->comm, stream);
    res = r == GB_VENDOR_SUCCESS
              ? dev->streamSynchronize(stream)
              : gbIslandVendorCallFailed(vi, vi->comm, r, "%s: first ncclAllReduce, connecting the island%s%s%s",
                                         gbIslandVendorGroupName(vi), GB_VENDOR_TAG(vi));
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
  gbVendorIsland_t* vi = calloc(1, sizeof(*vi));
  if (vi == NULL) return gbErrorSet(gbSystemError, "%s island create: out of memory", label);
  int err = pthread_mutex_init(&vi->userOpsLock, NULL);
  if (err != 0) {
    free(vi);
    return gbErrorSet(gbSystemError, "%s island create on %s: pthread_mutex_init failed: %s", label,
                      group->name ? group->name : "?", strerror(err));
  }
  vi->desc = desc;
  vi->group = group;
  vi->dev = dev;
  vi->onGpu = dev->runtime == desc->runtime;
  vi->onError = onError;
  vi->errCtx = ctx;
  atomic_init(&vi->failed, gbSuccess);
  vi->ops = (gbIslandOps_t){.name = desc->opsName, .abort = abortIsland, .destroy = destroy};
  gbIslandVendorCollOps(&vi->ops);
  vi->island.ops = &vi->ops;
  vi->island.size = group->n;
  vi->island.index = group->me;
  vi->island.impl = vi;
  gbResult_t res = join(vi);
  if (res == gbSuccess) res = connectNow(vi);
  if (res != gbSuccess) {
    if (vi->comm != NULL) (void)vi->api->ncclCommAbort(vi->comm);
    freeIsland(vi);
    return res;
  }
  const gbVendorApi_t* a = vi->api;
  GB_INFO(GB_LOG_INIT | GB_LOG_COLL, "%s island on %s: member %d of %d, %s %d (%s)%s%s%s", label,
          gbIslandVendorGroupName(vi), group->me, group->n, label, a->version, a->name,
          a->ncclRedOpCreatePreMulSum ? "" : ", no PreMulSum (needs 2.11)", a->emulated ? ", emulated " : "",
          a->emulated ? desc->kind : "");
  *out = &vi->island;
  return gbSuccess;
}
