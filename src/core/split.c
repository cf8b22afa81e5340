/* gbCommSplit over the parent's world group: the colors and keys, then the
 * children's unique ids, each one all-gather run on the parent's proxy (so
 * it is ordered with the parent's queued host steps, which use the same
 * connections) and waited for here with the parent's deadline. */
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "core/comm.h"

typedef struct {
  gbComm_t comm;
  void* all;      /* [nranks][bytes], mine already in place */
  size_t bytes;
} gather_t;

static gbResult_t runGather(void* arg) {
  gather_t* g = arg;
  gbComm_t c = g->comm;
  return gbAlgoAllGather(&c->world.algo, (char*)g->all + (size_t)c->rank * g->bytes, g->all, g->bytes);
}

static void noFree(void* arg) { (void)arg; }

static gbResult_t parentAllGather(gbComm_t c, const void* mine, void* all, size_t bytes) {
  memcpy((char*)all + (size_t)c->rank * bytes, mine, bytes);
  if (c->nranks == 1) return gbSuccess;
  gbFlag_t* done = calloc(1, sizeof(gbFlag_t));
  if (!done) return gbErrorSet(gbSystemError, "gbCommSplit: out of memory");
  gather_t g = {c, all, bytes};
  gbProxyOp_t op;
  memset(&op, 0, sizeof(op));
  op.kind = GB_PROXY_CALL;
  op.fn = runGather;
  op.arg = &g;
  op.freeArg = noFree;
  op.done = done;
  op.doneValue = 1;
  op.seq = c->seq;
  gbResult_t res = gbProxyPost(c->proxy, &op);
  if (res == gbSuccess) {
    res = gbFlagWaitHost(done, 1, c->settings.timeoutSec, NULL);
    if (res == gbTimeout)
      res = gbErrorSet(gbTimeout, "gbCommSplit: not every rank of the parent called it within %d s (every rank of the "
                                  "parent must call gbCommSplit, NOCOLOR ranks too)", c->settings.timeoutSec);
    else if (res != gbSuccess)
      res = gbErrorSet(res, "gbCommSplit: the parent communicator failed: %s", c->errorText);
  }
  /* The proxy sets done on every path (also after a failure), so g is no
   * longer used once the wait returned; a timeout fails the comm first. */
  if (res == gbTimeout) {
    gbCommFail(c, res);
    (void)gbFlagWaitHost(done, 1, 5.0, NULL);
  }
  free(done);
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
