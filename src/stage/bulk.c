/* The bulk stage for send/recv: every host message of a group is staged
 * whole into one host buffer (at the place plan/p2p.c gives it), one proxy
 * step moves them all at once (so two ranks may send each other large
 * messages in one group), and the incoming ones are copied back. A bigger
 * group replaces an outgrown buffer, which stays allocated until teardown
 * (queued work may still use it). Three flags per buffer: staged, done,
 * freed. */
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "stage/stage.h"

typedef struct buffer {
  void* base;
  size_t bytes;
  gbFlag_t* flags;     /* [3]: staged, done, freed */
  uint64_t uses;
  struct buffer* older;
} buffer_t;

typedef struct {
  gbStage_t base;
  buffer_t* now;
  uint64_t use;        /* the group in flight: its use of `now` */
} bulk_t;

enum { STAGED, DONE, FREED };

static gbResult_t bufferFor(bulk_t* b, size_t bytes, buffer_t** out) {
  if (b->now && b->now->bytes >= bytes) {
    *out = b->now;
    return gbSuccess;
  }
  const gbDeviceOps* dev = b->base.ctx.dev;
  buffer_t* nb = calloc(1, sizeof(*nb));
  if (!nb) return gbErrorSet(gbSystemError, "out of memory for send/recv staging");
  size_t want = b->now && b->now->bytes * 2 > bytes ? b->now->bytes * 2 : bytes;
  gbResult_t res = dev->hostAlloc(&nb->base, want ? want : 64);
  if (res == gbSuccess) res = dev->hostAlloc((void**)&nb->flags, 3 * sizeof(gbFlag_t));
  if (res != gbSuccess) {
    if (nb->base) dev->hostFree(nb->base);
    free(nb);
    return res;
  }
  gbStageFlagsInit(&b->base.ctx, nb->flags, 3);
  gbStageMemoryAdd(&b->base.ctx, GB_STAGE_MEM_PINNED, (int64_t)(want + 3 * sizeof(gbFlag_t)));
  nb->bytes = want;
  nb->older = b->now;
  b->now = nb;
  *out = nb;
  return gbSuccess;
}

/* The group's one chunk out: every host send into the buffer, then the step. */
static gbResult_t bulkOut(gbStage_t* st, gbStageP2p_t* g, size_t k) {
  (void)k;
  bulk_t* b = (bulk_t*)st;
  const gbPlanP2p_t* p = g->plan;
  const gbDeviceOps* dev = st->ctx.dev;
  buffer_t* buf = NULL;
  GB_CHECK(bufferFor(b, p->bulkBytes, &buf));
  gbAlgoP2p_t* list = calloc((size_t)p->nhost, sizeof(gbAlgoP2p_t));
  if (!list) return gbErrorSet(gbSystemError, "out of memory for a send/recv group of %d", p->nops);
  uint64_t use = b->use = ++buf->uses;
  gbResult_t res = dev->flagWait(&buf->flags[FREED], use - 1, g->stream);
  int n = 0;
  for (int i = 0; i < p->nops && res == gbSuccess; i++) {
    const gbPlanP2pOp_t* op = &p->ops[i];
    if (op->viaIsland) continue;
    char* area = (char*)buf->base + op->bulkAt;
    list[n++] = (gbAlgoP2p_t){op->msg.peer, op->msg.isSend, area, op->msg.bytes};
    if (op->msg.isSend && op->msg.bytes) res = dev->copyAsync(area, g->bufs[i], op->msg.bytes, g->stream);
  }
  if (res == gbSuccess) res = dev->flagWrite(&buf->flags[STAGED], use, g->stream);
  gbProxyOp_t tag = g->tag;
  tag.chunk = 0;
  tag.nchunks = 1;
  if (res != gbSuccess) {
    free(list);
    return res;
  }
  return gbStagePostMoves(&st->ctx, &tag, st->group, list, p->nhost, &buf->flags[STAGED], use, &buf->flags[DONE],
                          use);
}

/* The incoming messages out of the buffer, once the step moved them. */
static gbResult_t bulkIn(gbStage_t* st, gbStageP2p_t* g, size_t k) {
  (void)k;
  bulk_t* b = (bulk_t*)st;
  const gbPlanP2p_t* p = g->plan;
  const gbDeviceOps* dev = st->ctx.dev;
  buffer_t* buf = b->now;
  GB_CHECK(dev->flagWait(&buf->flags[DONE], b->use, g->stream));
  for (int i = 0; i < p->nops; i++) {
    const gbPlanP2pOp_t* in = &p->ops[i];
    if (!in->viaIsland && !in->msg.isSend && in->msg.bytes)
      GB_CHECK(dev->copyAsync(g->bufs[i], (char*)buf->base + in->bulkAt, in->msg.bytes, g->stream));
  }
  return dev->flagWrite(&buf->flags[FREED], b->use, g->stream);
}

/* The stream waited for the step in bulkIn: the send buffers are free. */
static gbResult_t bulkEnd(gbStage_t* st, gbStageP2p_t* g) {
  (void)st;
  (void)g;
  return gbSuccess;
}

static void bulkDestroy(gbStage_t* st) {
  bulk_t* b = (bulk_t*)st;
  while (b->now) {
    buffer_t* older = b->now->older;
    st->ctx.dev->hostFree(b->now->base);
    st->ctx.dev->hostFree(b->now->flags);
    gbStageMemoryAdd(&st->ctx, GB_STAGE_MEM_PINNED, -(int64_t)(b->now->bytes + 3 * sizeof(gbFlag_t)));
    free(b->now);
    b->now = older;
  }
  free(b);
}

static const gbStageOps_t bulkOps = {
    .name = "bulk", .kind = GB_NUM_STAGES, .p2pOut = bulkOut, .p2pIn = bulkIn, .p2pEnd = bulkEnd, .destroy = bulkDestroy};

gbResult_t gbStageBulkCreate(const gbStageCtx_t* ctx, gbAlgoGroup_t* g, gbStage_t** out) {
  bulk_t* b = calloc(1, sizeof(*b));
  if (!b) return gbErrorSet(gbSystemError, "%s: out of memory for send/recv staging", g->name);
  b->base = (gbStage_t){.ops = &bulkOps, .ctx = *ctx, .group = g};
  *out = &b->base;
  return gbSuccess;
}
