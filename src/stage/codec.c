/* The staging layer's wire format in one place (stage.h): how a part goes
 * into a slot and how the members' parts are folded out of them, plain or
 * compressed (base/wire.h). The backends call these and hold no codec of
 * their own. */
#include "stage/stage.h"

#include "base/result.h"
#include "base/wire.h"

_Static_assert(GB_PLAN_FOLD_MAX_PARTS == GB_REDUCE_MAX_SRCS, "plan/ compresses what a fold can take");

size_t gbStageWireBytes(const gbStageWork_t* w) { return gbWireBytes(w->wire, w->dtype, w->len); }

gbResult_t gbStageCodecOut(const gbStageCtx_t* ctx, const gbStageWork_t* w, void* dst, void* dstDev, const void* src,
                           void* stream) {
  if (w->wire == GB_WIRE_PLAIN) return ctx->dev->copyAsync(dst, src, w->len * w->esize, stream);
  gbEncodeArgs_t e = {.dst = dstDev, .src = src, .count = w->len, .dtype = w->dtype, .wire = w->wire};
  return ctx->dev->encodeAsync(&e, stream);
}

gbResult_t gbStageCodecFold(const gbStageCtx_t* ctx, const gbStageWork_t* w, const void* const* parts, int n,
                            int ring, void* stream) {
  gbReduceArgs_t red = {.dst = w->dst, .nsrc = n, .count = w->len, .dtype = w->dtype, .op = w->op,
                        .divisor = w->divisor, .ring = w->wire == GB_WIRE_PLAIN ? ring : 0, .wire = w->wire};
  for (int m = 0; m < n; m++) red.src[m] = parts[m];
  return ctx->dev->reduceAsync(&red, stream);
}
