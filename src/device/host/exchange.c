/* The host device's exchange (device.h's gbExchangeArgs_t), on its stream
 * thread: the GPU kernel's steps (device/gpu/kernels/reduce.cu, exchange
 * mode) in the same order, each block's flags as the kernel's, so the same
 * stage runs on both. Host addresses are the device's here. */
#include <string.h>

#include "base/dtype.h"
#include "base/result.h"
#include "device/device.h"

static gbResult_t await(const gbExchangeArgs_t* x, gbFlag_t* f, uint64_t value, double fallbackSec) {
  return gbFlagWaitHost(f, value, gbFlagStreamWaitSec(f, fallbackSec), x->stop);
}

gbResult_t gbDeviceHostExchange(const gbExchangeArgs_t* x, double fallbackSec) {
  const gbReduceArgs_t* r = &x->red;
  int n = r->nsrc, me = x->me;
  if (x->ready) gbFlagSetHost(x->ready, x->use, 0);
  for (int k = 0; k < n && x->use > 2; k++)
    if (k != me) GB_CHECK(await(x, gbExchangeFlag(x->flags[me], k, 0, x->maxBlocks), x->use - 1, fallbackSec));
  memcpy(x->mine, r->src[me], r->count * gbDtypeSize((gbDataType_t)r->dtype));
  for (int k = 0; k < n; k++)
    for (int b = 0; b < x->blocks && k != me; b++) gbFlagSetHost(gbExchangeFlag(x->flags[k], me, b, x->maxBlocks), x->use, 0);
  for (int k = 0; k < n; k++)
    for (int b = 0; b < x->blocks && k != me; b++)
      GB_CHECK(await(x, gbExchangeFlag(x->flags[me], k, b, x->maxBlocks), x->use, fallbackSec));
  gbReduceOrdered(r->dst, r->src, n, r->count, (gbDataType_t)r->dtype, (gbRedOp_t)r->op, r->divisor, r->ring);
  for (int i = 0; i < x->maxBlocks && x->done; i++) gbFlagSetHost(&x->done[i], x->use, 0);
  return gbSuccess;
}
