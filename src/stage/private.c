/* The private stage: this communicator's own host slots (the pool), a host
 * collective over the group's transport on the proxy, and copies in and
 * out on the caller's stream. Per slot three monotone flags: staged (stream
 * -> proxy), done (proxy -> stream), freed (the stream copied the result
 * out; the slot may be reused). Its wire format: a slot holds the chunk
 * (all-reduce, broadcast, reduce) or every member's block of it, laid out
 * [member][len] (all-gather, reduce-scatter; all-to-all: what goes out,
 * then what comes in). Compressed (w->wire, stage/codec.c): an all-reduce's
 * slot holds every member's part in that wire (mine encoded, the others'
 * all-gathered by the proxy) and a reduce-scatter's my blocks out and the
 * members' blocks for me in (an all-to-all); the stream folds them. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "base/wire.h"
#include "stage/stage.h"

struct gbStagePool {
  gbStageCtx_t ctx;
  void* base;
  size_t slotBytes;
  int nslots;
  gbFlag_t* flags;   /* [3][nslots]: staged, done, freed */
  uint64_t* uses;    /* per slot: chunks that used it (caller thread) */
  size_t next;       /* the next slot to take */
};

enum { STAGED, DONE, FREED };

static gbFlag_t* flagOf(const gbStagePool_t* p, int which, size_t slot) {
  return &p->flags[(size_t)which * (size_t)p->nslots + slot];
}

gbResult_t gbStagePoolCreate(const gbStageCtx_t* ctx, int nslots, size_t slotBytes, gbStagePool_t** out) {
  gbStagePool_t* p = calloc(1, sizeof(*p));
  if (!p) return gbErrorSet(gbSystemError, "out of memory for staging");
  p->ctx = *ctx;
  p->nslots = nslots;
  p->slotBytes = slotBytes;
  *out = p;
  p->uses = calloc((size_t)nslots, sizeof(uint64_t));
  if (!p->uses) return gbErrorSet(gbSystemError, "out of memory for staging");
  GB_CHECK(ctx->dev->hostAlloc((void**)&p->flags, sizeof(gbFlag_t) * 3 * (size_t)nslots));
  gbStageFlagsInit(ctx, p->flags, 3 * (size_t)nslots);
  gbStageMemoryAdd(ctx, GB_STAGE_MEM_PINNED, (int64_t)(sizeof(gbFlag_t) * 3 * (size_t)nslots));
  return gbSuccess;
}

/* The slots themselves come with the first chunk that takes one: a job whose
 * groups all share slots never stages privately and never holds them. */
static gbResult_t poolMemory(gbStagePool_t* p) {
  if (p->base) return gbSuccess;
  size_t bytes = p->slotBytes * (size_t)p->nslots;
  GB_CHECK(p->ctx.dev->hostAlloc(&p->base, bytes));
  gbStageMemoryAdd(&p->ctx, GB_STAGE_MEM_PINNED, (int64_t)bytes);
  return gbSuccess;
}

void gbStagePoolDestroy(gbStagePool_t* p) {
  if (!p) return;
  if (p->base) {
    p->ctx.dev->hostFree(p->base);
    gbStageMemoryAdd(&p->ctx, GB_STAGE_MEM_PINNED, -(int64_t)(p->slotBytes * (size_t)p->nslots));
  }
  if (p->flags) {
    p->ctx.dev->hostFree(p->flags);
    gbStageMemoryAdd(&p->ctx, GB_STAGE_MEM_PINNED, -(int64_t)(sizeof(gbFlag_t) * 3 * (size_t)p->nslots));
  }
  free(p->uses);
  free(p);
}

size_t gbStagePoolSlotBytes(const gbStagePool_t* p) { return p->slotBytes; }

typedef struct {
  gbStage_t base;
  gbStagePool_t* pool;
} private_t;

/* ------------------------------------------------------ the host step */

/* What the proxy runs on a slot: the chunk's host collective. */
typedef struct {
  gbAlgoGroup_t* group;
  gbColl_t coll;
  char* buf;            /* the slot (direct: the caller's dst), in place */
  const void* src;      /* all-reduce: its input when not buf (NULL: buf) */
  char* out;            /* all-to-all: what comes in */
  size_t count;         /* elements: the chunk, or each block */
  size_t chunkCount;    /* all-reduce: back-to-back host all-reduces of this many (0: one) */
  gbDataType_t dtype;
  gbRedOp_t op;
  int divisor, root;
  const void* scale;
  size_t wireBytes;     /* > 0: compressed parts of this many bytes; the proxy only moves them */
} hostStep_t;

/* A compressed chunk's host step: the members' parts to every member
 * (all-reduce) or my block r to member r (reduce-scatter); the stream folds. */
static gbResult_t moveWire(const hostStep_t* h) {
  gbAlgoGroup_t* g = h->group;
  size_t b = h->wireBytes;
  if (h->coll == GB_COLL_ALLREDUCE) return gbAlgoAllGather(g, h->buf + (size_t)g->me * b, h->buf, b);
  return gbAlgoAllToAll(g, h->buf, h->buf + (size_t)g->n * b, b);
}

static gbResult_t runHostStep(void* arg) {
  const hostStep_t* h = arg;
  gbAlgoGroup_t* g = h->group;
  size_t es = gbDtypeSize(h->dtype);
  char* buf = h->buf;
  if (h->wireBytes) return moveWire(h);
  /* PreMulSum: scale this member's contributions first. */
  if (h->scale) gbScaleBy(buf, h->count * (h->coll == GB_COLL_REDUCESCATTER ? (size_t)g->n : 1), h->dtype, h->scale);
  switch (h->coll) {
    case GB_COLL_ALLREDUCE:
      return gbAlgoAllReduceChunks(g, h->src ? h->src : buf, buf, h->count, h->chunkCount, h->dtype, h->op,
                                   h->divisor);
    case GB_COLL_BROADCAST:
      return gbAlgoBroadcast(g, buf, h->count * es, h->root);
    case GB_COLL_REDUCE:
      return gbAlgoReduce(g, buf, buf, h->count, h->dtype, h->op, h->divisor, h->root);
    case GB_COLL_ALLGATHER:
      return gbAlgoAllGather(g, buf + (size_t)g->me * h->count * es, buf, h->count * es);
    case GB_COLL_REDUCESCATTER:
      return gbAlgoReduceScatter(g, buf, buf + (size_t)g->me * h->count * es, h->count, h->dtype, h->op,
                                 h->divisor);
    case GB_COLL_ALLTOALL:
      return gbAlgoAllToAll(g, buf, h->out, h->count * es);
    default:
      return gbErrorSet(gbInternalError, "private stage: %s has no host step", gbPlanCollName(h->coll));
  }
}

/* ------------------------------------------------------------ a chunk */

static int isBlocks(gbColl_t coll) {
  return coll == GB_COLL_ALLGATHER || coll == GB_COLL_REDUCESCATTER || coll == GB_COLL_ALLTOALL;
}

/* Where the chunk's host step works: the slot, or (direct) the caller's dst. */
static char* workBuf(const gbStageWork_t* w, const gbStageSlot_t* s) { return w->direct ? w->dst : s->buf; }

/* My part into the slot: the chunk, or my block(s) at [member][len]. The
 * proxy reads a direct all-reduce's input where it is, unless it must scale
 * it first (never in the caller's send buffer): *input says so. */
static gbResult_t copyOut(const gbStageCtx_t* ctx, const gbStageWork_t* w, char* buf, int me, int n, void* stream,
                          const void** input) {
  size_t bytes = gbStageWireBytes(w); /* a part or block in the slot (compressed: narrowed) */
  *input = NULL;
  if (!w->stageOut) return gbSuccess;
  /* The pool's memory is mapped at the same address (hostAlloc), where an encoder writes. */
  if (w->coll == GB_COLL_ALLGATHER || (w->coll == GB_COLL_ALLREDUCE && w->wire != GB_WIRE_PLAIN))
    return gbStageCodecOut(ctx, w, buf + (size_t)me * bytes, buf + (size_t)me * bytes, w->src, stream);
  if (isBlocks(w->coll)) {
    for (int r = 0; r < n; r++)
      GB_CHECK(gbStageCodecOut(ctx, w, buf + (size_t)r * bytes, buf + (size_t)r * bytes, gbStageMyBlock(w, r), stream));
    return gbSuccess;
  }
  if (w->src == buf) return gbSuccess;
  if (w->direct && !w->scale) {
    *input = w->src;
    return gbSuccess;
  }
  return ctx->dev->copyAsync(buf, w->src, bytes, stream);
}

static gbResult_t privateOut(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                             gbStageSlot_t* s) {
  gbStagePool_t* p = ((private_t*)st)->pool;
  gbAlgoGroup_t* g = st->group;
  GB_CHECK(poolMemory(p));
  s->slot = p->next++ % (size_t)p->nslots;
  s->use = ++p->uses[s->slot];
  s->buf = (char*)p->base + s->slot * p->slotBytes;
  s->on = stream;
  GB_CHECK(st->ctx.dev->flagWait(flagOf(p, FREED, s->slot), s->use - 1, stream));
  s->queued = 1;
  char* buf = workBuf(w, s);
  const void* input = NULL;
  GB_CHECK(copyOut(&st->ctx, w, buf, g->me, g->n, stream, &input));
  GB_CHECK(st->ctx.dev->flagWrite(flagOf(p, STAGED, s->slot), s->use, stream));
  hostStep_t* h = malloc(sizeof(*h));
  if (!h) return gbErrorSet(gbSystemError, "%s: out of memory for a proxy step", g->name);
  *h = (hostStep_t){.group = g, .coll = w->coll, .buf = buf, .src = input, .count = w->len,
                    .chunkCount = w->hostChunk, .dtype = w->dtype, .op = w->op, .divisor = w->divisor,
                    .root = w->root, .scale = w->scale,
                    .wireBytes = w->wire != GB_WIRE_PLAIN ? gbStageWireBytes(w) : 0};
  if (w->coll == GB_COLL_ALLTOALL) h->out = buf + (size_t)g->n * w->len * w->esize;
  gbResult_t res = gbStagePost(&st->ctx, tag, runHostStep, h, free, flagOf(p, STAGED, s->slot), s->use,
                               flagOf(p, DONE, s->slot), s->use);
  if (res != gbSuccess) free(h);
  return res;
}

/* The result out of the slot: the chunk, my reduced block, or every
 * member's block (all-to-all: from the part that came in). */
static gbResult_t copyIn(const gbStageCtx_t* ctx, const gbStageWork_t* w, const char* buf, int me, int n,
                         void* stream) {
  size_t bytes = w->len * w->esize;
  if (!w->stageIn || w->direct) return gbSuccess;
  if (w->wire != GB_WIRE_PLAIN) { /* every member's part (all-reduce), or its block for me (reduce-scatter) */
    size_t b = gbStageWireBytes(w);
    const char* from = w->coll == GB_COLL_ALLREDUCE ? buf : buf + (size_t)n * b;
    const void* parts[GB_REDUCE_MAX_SRCS];
    for (int r = 0; r < n; r++) parts[r] = from + (size_t)r * b;
    return gbStageCodecFold(ctx, w, parts, n, 0, stream);
  }
  if (w->coll == GB_COLL_REDUCESCATTER) return ctx->dev->copyAsync(w->dst, buf + (size_t)me * bytes, bytes, stream);
  if (!isBlocks(w->coll)) return ctx->dev->copyAsync(w->dst, buf, bytes, stream);
  const char* from = w->coll == GB_COLL_ALLTOALL ? buf + (size_t)n * bytes : buf;
  for (int r = 0; r < n; r++)
    GB_CHECK(ctx->dev->copyAsync(w->dst + (size_t)r * w->dstStride, from + (size_t)r * bytes, bytes, stream));
  return gbSuccess;
}

static gbResult_t privateIn(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbStageSlot_t* s) {
  gbStagePool_t* p = ((private_t*)st)->pool;
  GB_CHECK(st->ctx.dev->flagWait(flagOf(p, DONE, s->slot), s->use, stream));
  GB_CHECK(copyIn(&st->ctx, w, s->buf, st->group->me, st->group->n, stream));
  return st->ctx.dev->flagWrite(flagOf(p, FREED, s->slot), s->use, stream);
}

static void privateDestroy(gbStage_t* st) { free(st); }

static const gbStageOps_t privateOps = {
    .name = "private", .kind = GB_STAGE_PRIVATE, .out = privateOut, .in = privateIn, .destroy = privateDestroy};

gbResult_t gbStagePrivateCreate(const gbStageCtx_t* ctx, gbStagePool_t* pool, gbAlgoGroup_t* g, gbStage_t** out) {
  private_t* st = calloc(1, sizeof(*st));
  if (!st) return gbErrorSet(gbSystemError, "%s: out of memory for its staging", g->name);
  st->base = (gbStage_t){.ops = &privateOps, .ctx = *ctx, .group = g};
  st->pool = pool;
  *out = &st->base;
  return gbSuccess;
}
