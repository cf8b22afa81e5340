/* The host device's exchange (device.h's gbExchangeArgs_t), on its stream
 * thread: the GPU kernel's steps (device/gpu/kernels/reduce.cu, exchange
 * mode) in the same order, each block's flags as the kernel's, so the same
 * stage runs on both. Host addresses are the device's here. */
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "device/device.h"

static gbResult_t await(gbFlag_t* f, uint64_t value, double fallbackSec) {
  return gbFlagWaitHost(f, value, gbFlagStreamWaitSec(f, fallbackSec), NULL);
}

gbResult_t gbDeviceHostExchange(const gbExchangeArgs_t* x, double fallbackSec) {
  const gbReduceArgs_t* r = &x->red;
  int n = r->nsrc, me = x->me;
  if (x->ready) gbFlagSetHost(x->ready, x->use, 0);
  for (int k = 0; k < n && x->use > 2; k++)
    for (int i = 0; i < x->maxBlocks && k != me; i++)
      GB_CHECK(await(gbExchangeFlag(x->flags[me], GB_EXCHANGE_READ, k, i, x->maxBlocks), x->use - 2, fallbackSec));
  memcpy(x->mine, r->src[me], r->count * gbDtypeSize((gbDataType_t)r->dtype));
  for (int k = 0; k < n; k++)
    for (int b = 0; b < x->blocks && k != me; b++)
      gbFlagSetHost(gbExchangeFlag(x->flags[k], GB_EXCHANGE_FULL, me, b, x->maxBlocks), x->use, 0);
  for (int k = 0; k < n; k++)
    for (int b = 0; b < x->blocks && k != me; b++)
      GB_CHECK(await(gbExchangeFlag(x->flags[me], GB_EXCHANGE_FULL, k, b, x->maxBlocks), x->use, fallbackSec));
  gbReduceOrdered(r->dst, r->src, n, r->count, (gbDataType_t)r->dtype, (gbRedOp_t)r->op, r->divisor, r->ring);
  for (int i = 0; i < x->maxBlocks; i++) {
    for (int k = 0; k < n; k++)
      if (k != me) gbFlagSetHost(gbExchangeFlag(x->flags[k], GB_EXCHANGE_READ, me, i, x->maxBlocks), x->use, 0);
    if (x->done) gbFlagSetHost(&x->done[i], x->use, 0);
  }
  return gbSuccess;
}
