/* What every backend shares: its flags' deadlines, and posting a closure
 * on the proxy with the walker's tag. */
#include "stage/stage.h"

#include <stdlib.h>
#include <string.h>

#include "base/result.h"

void gbStageFlagsInit(const gbStageCtx_t* ctx, gbFlag_t* flags, size_t n) {
  memset(flags, 0, n * sizeof(*flags));
  for (size_t i = 0; i < n; i++) {
    flags[i].timeoutSec = (int)ctx->timeoutSec;
    flags[i].pollNs = (int)ctx->pollNs;
  }
}

void gbStageMemoryAdd(const gbStageCtx_t* ctx, int kind, int64_t bytes) {
  if (!ctx->memory) return;
  _Atomic uint64_t* c = kind == GB_STAGE_MEM_PINNED    ? &ctx->memory->pinned
                        : kind == GB_STAGE_MEM_SEGMENT ? &ctx->memory->segment
                                                       : &ctx->memory->device;
  atomic_fetch_add_explicit(c, (uint64_t)bytes, memory_order_relaxed);
}

gbResult_t gbStagePost(const gbStageCtx_t* ctx, const gbProxyOp_t* tag, gbResult_t (*fn)(void*), void* arg,
                       void (*freeArg)(void*), gbFlag_t* ready, uint64_t readyValue, gbFlag_t* done,
                       uint64_t doneValue) {
  gbProxyOp_t op = *tag;
  op.fn = fn;
  op.arg = arg;
  op.freeArg = freeArg;
  op.ready = ready;
  op.readyValue = readyValue;
  op.done = done;
  op.doneValue = doneValue;
  return gbProxyPost(ctx->proxy, &op);
}

typedef struct {
  gbAlgoGroup_t* group;
  gbAlgoP2p_t* list;
  int n;
} moves_t;

static gbResult_t runMoves(void* arg) {
  moves_t* m = arg;
  return gbAlgoSendRecv(m->group, m->list, m->n);
}

static void freeMoves(void* arg) {
  moves_t* m = arg;
  free(m->list);
  free(m);
}

gbResult_t gbStagePostMoves(const gbStageCtx_t* ctx, const gbProxyOp_t* tag, gbAlgoGroup_t* g, gbAlgoP2p_t* list,
                            int n, gbFlag_t* ready, uint64_t readyValue, gbFlag_t* done, uint64_t doneValue) {
  moves_t* m = malloc(sizeof(*m));
  if (!m) {
    free(list);
    return gbErrorSet(gbSystemError, "%s: out of memory for a proxy step", g->name);
  }
  *m = (moves_t){g, list, n};
  gbResult_t res = gbStagePost(ctx, tag, runMoves, m, freeMoves, ready, readyValue, done, doneValue);
  if (res != gbSuccess) freeMoves(m);
  return res;
}
