/* An exchange's arguments (device.h's gbExchangeArgs_t), checked alike by
 * every device before anything is queued. */
#include "base/result.h"
#include "device/device.h"

gbResult_t gbDeviceExchangeCheck(const gbExchangeArgs_t* x) {
  if (x == NULL) return gbErrorSet(gbInvalidArgument, "stream exchange: the arguments are NULL");
  const gbReduceArgs_t* r = &x->red;
  int srcs = r->nsrc >= 1 && r->nsrc <= GB_REDUCE_MAX_SRCS;
  for (int s = 0; srcs && s < r->nsrc; s++) srcs = r->src[s] != NULL;
  if (!srcs || x->me < 0 || x->me >= r->nsrc || x->blocks < 1 || x->blocks > x->maxBlocks || !x->mine || !r->dst || !x->stop || !x->stopDev)
    return gbErrorSet(gbInvalidArgument, "stream exchange: member %d of %d sources (1 to %d, none NULL), %d blocks "
                      "of at most %d, my part %p, dst %p, stop word %p", x->me, r->nsrc, GB_REDUCE_MAX_SRCS,
                      x->blocks, x->maxBlocks, x->mine, r->dst, (const void*)x->stop);
  return gbSuccess;
}
