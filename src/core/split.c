/* gbCommSplit over the parent's world group: the colors and keys, then the
 * children's unique ids, each one all-gather run on the parent's proxy (so
 * it is ordered with the parent's queued host steps, which use the same
 * connections) and waited for here with the parent's deadline. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"

/* One exchange, shared by the caller and the proxy step: each drops its
 * reference when done with it, and the last one frees it. So neither
 * depends on when the other lets go: the caller may return (a timeout, an
 * abort) while the step is still queued or running, and the proxy may still
 * be setting done when the caller, woken by it, leaves. */
typedef struct {
  gbComm_t comm;
  gbFlag_t done;
  atomic_int refs;
  size_t bytes;
  char all[];     /* [nranks][bytes], mine already in place */
} gather_t;

static void dropGather(void* arg) {
  gather_t* g = arg;
  if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1) free(g);
}

static gbResult_t runGather(void* arg) {
  gather_t* g = arg;
  gbComm_t c = g->comm;
  return gbAlgoAllGather(&c->world.algo, g->all + (size_t)c->rank * g->bytes, g->all, g->bytes);
}

static gbResult_t parentAllGather(gbComm_t c, const void* mine, void* all, size_t bytes) {
  size_t total = (size_t)c->nranks * bytes;
  if (c->nranks == 1) {
    memcpy(all, mine, bytes);
    return gbSuccess;
  }
  gather_t* g = calloc(1, sizeof(gather_t) + total);
  if (!g) return gbErrorSet(gbSystemError, "gbCommSplit: out of memory");
  g->comm = c;
  atomic_init(&g->refs, 2); /* the caller's and the proxy step's (freeArg drops it, also when the step never runs) */
  g->bytes = bytes;
  memcpy(g->all + (size_t)c->rank * bytes, mine, bytes);
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.fn = runGather;
  op.arg = g;
  op.freeArg = dropGather;
  op.done = &g->done;
  op.doneValue = 1;
  op.seq = c->seq;
  gbResult_t res = gbProxyPost(c->proxy, &op);
  if (res != gbSuccess) {
    free(g); /* not queued: the proxy never saw it */
    return res;
  }
  /* Past the step's own deadline: its timeout, which names the ranks it
   * waited on, speaks first. An abort ends the wait at once (the step holds
   * its own reference to the gather). */
  res = gbFlagWaitHost(&g->done, 1, c->settings.timeoutSec + GB_PROXY_STEP_GRACE_S, &c->abortFlag);
  if (res == gbTimeout) {
    res = gbErrorSet(gbTimeout, "gbCommSplit: not every rank of the parent called it within %d s (every rank of the "
                                "parent must call gbCommSplit, NOCOLOR ranks too)", c->settings.timeoutSec);
    gbCommFail(c, res);
  } else if (res != gbSuccess) {
    res = gbErrorSet(res, "gbCommSplit: the parent communicator failed: %s", c->errorText);
  } else {
    memcpy(all, g->all, total);
  }
  dropGather(g);
  return res;
}

typedef struct {
  int32_t color, key;
} colorKey_t;

gbResult_t gbCommSplitRanks(gbComm_t c, int color, int key, int* newRank, int* newN, int* first) {
  colorKey_t* all = calloc((size_t)c->nranks, sizeof(colorKey_t));
  if (!all) return gbErrorSet(gbSystemError, "gbCommSplit: out of memory");
  colorKey_t mine = {color, key};
  gbResult_t res = parentAllGather(c, &mine, all, sizeof(mine));
  *newRank = *newN = *first = 0;
  if (res == gbSuccess && color != GB_SPLIT_NOCOLOR) {
    int lowest = c->rank;
    for (int r = 0; r < c->nranks; r++) {
      if (all[r].color != color) continue;
      (*newN)++;
      if (r < lowest) lowest = r;
      /* Order by key, then by parent rank. */
      if (all[r].key < key || (all[r].key == key && r < c->rank)) (*newRank)++;
    }
    *first = lowest == c->rank;
  }
  free(all);
  return res;
}

typedef struct {
  int32_t color, hasId;
  gbUniqueId id;
} colorId_t;

gbResult_t gbCommSplitShareId(gbComm_t c, int color, int first, const gbUniqueId* mineId, gbUniqueId* out) {
  colorId_t* all = calloc((size_t)c->nranks, sizeof(colorId_t));
  if (!all) return gbErrorSet(gbSystemError, "gbCommSplit: out of memory");
  colorId_t mine;
  memset(&mine, 0, sizeof(mine));
  mine.color = color;
  mine.hasId = first;
  if (first) mine.id = *mineId;
  gbResult_t res = parentAllGather(c, &mine, all, sizeof(mine));
  int found = 0;
  for (int r = 0; r < c->nranks && res == gbSuccess && !found; r++)
    if (all[r].color == color && all[r].hasId) {
      *out = all[r].id;
      found = 1;
    }
  if (res == gbSuccess && !found && color != GB_SPLIT_NOCOLOR)
    res = gbErrorSet(gbInternalError, "gbCommSplit: no unique id arrived for color %d", color);
  free(all);
  return res;
}
