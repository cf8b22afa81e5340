/* The exchange stage (stage.h): a small all-reduce over one host's shared
 * slots that each member's stream drives alone. The stream runs one
 * exchange (device.h's gbExchangeArgs_t: on a GPU the reduction kernel in
 * its exchange mode, on the host device a task of its stream thread): it
 * puts my input into my exchange buffer in the segment, tells every member,
 * waits for theirs and folds them into dst in the order every other path
 * folds them (docs/REDUCTION_ORDER.md), block by block, with flags between
 * the members' streams. No host thread is in the hand-over, so a call costs
 * about one kernel: NCCL's LL protocols do the same through host memory.
 *
 * Wire format: member m's buffer for use u (two buffers, used in turn) holds
 * m's input; member m's full flag of block b in my flags says it staged
 * that block of use u. A member's exchanges run in the order of their uses
 * (afterLast), so one that began use u ended use u - 1: then it read the
 * buffer use u + 1 overwrites.
 * The proxy only watches: from when my stream began the exchange
 * (exchangeReady, which only grows as my exchanges run in order) until
 * every member staged every block, with the
 * collective's deadline, hearing a member that failed or died; then, and
 * on any failure, it releases my flags so no stream waits forever
 * (gbSharedRelease). plan/ gives this stage only what it carries: an
 * all-reduce of at most the buffers' size, over a group whose GPUs are not
 * time-sliced between ranks (a spinning kernel keeps its time slice). */
#include <pthread.h>
#include <string.h>

#include "base/result.h"
#include "plan/sizes.h"
#include "stage/slots_impl.h"

static gbFlag_t* flagsOf(const gbSharedSlots_t* sh, int member) { return &gbSharedCtl(sh, member)->exchange[0][0]; }

/* Takes the next use and posts the proxy's watch of it. */
static gbResult_t exchangeOut(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                              gbStageSlot_t* s) {
  (void)stream;
  gbSharedSlots_t* sh = gbSlotsOf(st);
  size_t bytes = w->len * w->esize;
  if (w->coll != GB_COLL_ALLREDUCE || !w->stageOut || !w->stageIn || w->scale || bytes > sh->exchangeBytes)
    return gbErrorSet(gbInternalError, "%s: the exchange carries all-reduces of at most %zu bytes, not this %s of %zu "
                      "bytes (a plan/ bug)", sh->name, sh->exchangeBytes, gbPlanCollName(w->coll), bytes);
  s->use = ++sh->exchangeUses;
  s->seq = tag->seq;
  s->queued = 1;
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  gbSharedStep_t watch = {.sh = sh, .use = s->use, .what = "to stage (exchange)", .group = tag->group,
                          .bytes = bytes, .watch = 1, .span = gbPlanExchangeBlocks(bytes)};
  for (int k = 0; k < sh->n; k++) {
    if (k == sh->me) continue;
    watch.who[watch.nwait] = k;
    watch.wait[watch.nwait++] = &mine->exchange[k][0].value;
  }
  return gbSharedPostStep(&watch, tag, &mine->exchangeReady, s->use, NULL, 0);
}

/* My exchanges run in the order of their uses, also across streams, so
 * every flag only grows: on another stream than the last exchange's, the
 * stream first waits until every block of that one ended (thread block b
 * sets done[b] as it ends; the host device sets them all). The same handle
 * from another thread counts as another stream: CUDA's per-thread default
 * stream (cudaStreamPerThread) is one handle for a stream per thread. A
 * stream destroyed with an exchange still queued and a new one given the
 * same handle in the same thread is not told apart. */
static gbResult_t afterLast(gbSharedSlots_t* sh, uint64_t use, int grid, void* stream) {
  void* last = sh->exchangeStream;
  pthread_t lastThread = sh->exchangeThread;
  int lastGrid = sh->exchangeGrid;
  sh->exchangeStream = stream;
  sh->exchangeThread = pthread_self();
  sh->exchangeGrid = grid;
  if (use == 1 || (last == stream && pthread_equal(lastThread, sh->exchangeThread))) return gbSuccess;
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  for (int i = 0; i < lastGrid; i++) GB_CHECK(sh->ctx.dev->flagWait(&mine->exchangeDone[i], use - 1, stream));
  return gbSuccess;
}

/* The exchange itself, on the caller's stream. */
static gbResult_t exchangeIn(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbStageSlot_t* s) {
  gbSharedSlots_t* sh = gbSlotsOf(st);
  gbSharedCtl_t* mine = gbSharedCtl(sh, sh->me);
  size_t bytes = w->len * w->esize;
  int blocks = gbPlanExchangeBlocks(bytes);
  GB_CHECK(afterLast(sh, s->use, blocks, stream));
  gbExchangeArgs_t x = {.red = {.dst = w->dst, .nsrc = sh->n, .count = w->len, .dtype = w->dtype, .op = w->op,
                                .divisor = w->divisor, .ring = gbAlgoFoldsRing(st->group, bytes)},
                        .me = sh->me, .blocks = blocks, .maxBlocks = GB_STAGE_EXCHANGE_BLOCKS,
                        .use = s->use, .mine = sh->devBase + gbSharedExchangeOffset(sh, sh->me, s->use),
                        .ready = &mine->exchangeReady, .done = mine->exchangeDone, .stop = &mine->exchangeStop};
  x.readyDev = gbSharedDevOf(sh, x.ready);
  x.doneDev = gbSharedDevOf(sh, x.done);
  x.stopDev = gbSharedDevOf(sh, x.stop);
  for (int m = 0; m < sh->n; m++) {
    x.red.src[m] = m == sh->me ? w->src : sh->devBase + gbSharedExchangeOffset(sh, m, s->use);
    x.flags[m] = flagsOf(sh, m);
    x.flagsDev[m] = gbSharedDevOf(sh, x.flags[m]);
  }
  return sh->ctx.dev->exchangeAsync(&x, stream);
}

const gbStageOps_t gbStageExchangeOps = {.name = "exchange", .kind = GB_STAGE_EXCHANGE, .out = exchangeOut,
                                         .in = exchangeIn, .fail = gbSlotsFail, .destroy = gbSlotsViewDestroy};
