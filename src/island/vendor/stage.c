/* Copies of a send/receive group's sends, for a group whose receives
 * overwrite what its sends read (an in-place all-to-all): the library orders
 * nothing inside a group, so the sends leave from a device copy taken on the
 * stream first. Copies are reused: each carries a flag the stream sets once
 * past the group that used it, so a copy another stream still reads is never
 * handed out again. They go with the island (the streams drained by then). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/dtype.h"
#include "base/log.h"
#include "base/result.h"
#include "island/vendor/vendor.h"

struct gbVendorStage {
  void* buf;        /* device memory */
  size_t bytes;
  gbFlag_t* flag;   /* pinned host memory; the stream writes uses when done */
  uint64_t uses;    /* groups handed this copy */
  gbVendorStage_t* next;
};

static int idle(const gbVendorStage_t* s) {
  return atomic_load_explicit(&s->flag->value, memory_order_acquire) >= s->uses;
}

static void freeStage(const gbDeviceOps* dev, gbVendorStage_t* s) {
  if (s->buf) (void)dev->memFree(s->buf);
  if (s->flag) (void)dev->hostFree(s->flag);
  free(s);
}

/* An idle copy of at least bytes, else a new one; called under userOpsLock. */
static gbResult_t take(gbVendorIsland_t* vi, size_t bytes, gbVendorStage_t** out) {
  const gbDeviceOps* dev = vi->dev;
  for (gbVendorStage_t** p = &vi->stages; *p != NULL;) {
    gbVendorStage_t* s = *p;
    if (idle(s) && s->bytes >= bytes) {
      *out = s;
      return gbSuccess;
    }
    if (idle(s)) { /* too small, and nothing reads it: make room for a larger one */
      *p = s->next;
      freeStage(dev, s);
    } else {
      p = &s->next;
    }
  }
  gbVendorStage_t* s = calloc(1, sizeof(*s));
  if (s == NULL)
    return gbErrorSet(gbSystemError, "%s: out of memory for a copy of a group's sends", gbIslandVendorGroupName(vi));
  gbResult_t res = dev->memAlloc(&s->buf, bytes);
  if (res == gbSuccess) res = dev->hostAlloc((void**)&s->flag, sizeof(gbFlag_t));
  if (res != gbSuccess) {
    freeStage(dev, s);
    return gbErrorSet(res, "%s: cannot allocate %zu bytes of device memory for a copy of a send/receive group's "
                      "sends (they overlap its receives, as in an in-place all-to-all); free device memory or use "
                      "separate send and receive buffers", gbIslandVendorGroupName(vi), bytes);
  }
  atomic_store_explicit(&s->flag->value, 0, memory_order_relaxed);
  atomic_store_explicit(&s->flag->error, 0, memory_order_relaxed);
  s->bytes = bytes;
  s->next = vi->stages;
  vi->stages = s;
  *out = s;
  return gbSuccess;
}

gbResult_t gbIslandVendorStageSends(gbVendorIsland_t* vi, gbIslandP2p_t* ops, int nops, void* stream,
                                    gbVendorStage_t** out) {
  size_t total = 0;
  for (int i = 0; i < nops; i++)
    if (ops[i].isSend) total += ops[i].count * gbDtypeSize(ops[i].dt);
  *out = NULL;
  if (total == 0) return gbSuccess;
  pthread_mutex_lock(&vi->userOpsLock);
  gbVendorStage_t* s = NULL;
  gbResult_t res = take(vi, total, &s);
  if (res == gbSuccess) s->uses++; /* busy until the stream writes this */
  pthread_mutex_unlock(&vi->userOpsLock);
  GB_CHECK(res);
  char* at = s->buf;
  for (int i = 0; i < nops && res == gbSuccess; i++) {
    size_t bytes = ops[i].count * gbDtypeSize(ops[i].dt);
    if (!ops[i].isSend || bytes == 0) continue;
    res = vi->dev->copyAsync(at, ops[i].buf, bytes, stream);
    ops[i].buf = at;
    at += bytes;
  }
  *out = s;
  GB_TRACE(GB_LOG_COLL, "%s: sends overlap receives: %zu bytes sent from a copy", gbIslandVendorGroupName(vi), total);
  return res;
}

gbResult_t gbIslandVendorStageRelease(gbVendorIsland_t* vi, gbVendorStage_t* s, void* stream) {
  if (s == NULL) return gbSuccess;
  gbResult_t res = vi->dev->flagWrite(s->flag, s->uses, stream);
  /* Unreleased, the copy stays busy (and unused) until the island goes. */
  if (res != gbSuccess)
    GB_WARN("%s: a copy of %zu bytes stays reserved until the communicator is destroyed",
            gbIslandVendorGroupName(vi), s->bytes);
  return res;
}

void gbIslandVendorStagesFree(gbVendorIsland_t* vi) {
  while (vi->stages != NULL) {
    gbVendorStage_t* s = vi->stages;
    vi->stages = s->next;
    freeStage(vi->dev, s);
  }
}
