/* Errors, and the small collectives that combine per-rank numbers (times,
 * wrong counts, the rank descriptions of the header, the choices of --tune)
 * through gpubridge itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perf.h"

static gbComm_t abortComm;

void perfCheckUseComm(gbComm_t comm) {
  abortComm = comm;
}

void perfCheck(gbResult_t res, const char* call) {
  if (res == gbSuccess) return;
  fprintf(stderr, "gpubridge-perf: %s failed: %s: %s\n", call, gbGetErrorString(res),
          gbGetLastError(abortComm));
  fflush(stderr);
  /* Closing the connections now tells the other ranks at once, rather than
   * at their deadline. */
  if (abortComm) gbCommAbort(abortComm);
  exit(1);
}

void perfFail(const char* why) {
  fprintf(stderr, "gpubridge-perf: %s\n", why);
  fflush(stderr);
  if (abortComm) gbCommAbort(abortComm);
  exit(1);
}

void perfSyncComm(perfCtx_t* ctx, gbComm_t comm) {
  perfCheck(gbStreamSynchronize(ctx->stream), "gbStreamSynchronize");
  gbResult_t async = gbSuccess;
  perfCheck(gbCommGetAsyncError(comm, &async), "gbCommGetAsyncError");
  perfCheck(async, "gbCommGetAsyncError (asynchronous error)");
}

void perfSync(perfCtx_t* ctx) {
  perfSyncComm(ctx, ctx->comm);
}

/* Runs an all-reduce of n elements of host data through the scratch buffer. */
static void scratchFits(const perfCtx_t* ctx, size_t bytes) {
  if (bytes <= ctx->scratchBytes) return;
  char why[128];
  snprintf(why, sizeof(why), "internal: %zu bytes exceed the %zu-byte scratch", bytes, ctx->scratchBytes);
  perfFail(why);
}

static void allReduceHost(perfCtx_t* ctx, void* data, size_t n, gbDataType_t dt, gbRedOp_t op) {
  size_t bytes = n * perfTypeSize(dt);
  scratchFits(ctx, bytes);
  perfCheck(gbMemcpyToDevice(ctx->scratch, data, bytes), "gbMemcpyToDevice");
  perfCheck(gbAllReduce(ctx->scratch, ctx->scratch, n, dt, op, ctx->comm, ctx->stream), "gbAllReduce");
  perfSync(ctx);
  perfCheck(gbMemcpyToHost(data, ctx->scratch, bytes), "gbMemcpyToHost");
}

void perfRanksCombineDouble(perfCtx_t* ctx, double* values, int n, gbRedOp_t op) {
  allReduceHost(ctx, values, (size_t)n, gbFloat64, op);
}

void perfRanksSumU64(perfCtx_t* ctx, uint64_t* values, int n) {
  allReduceHost(ctx, values, (size_t)n, gbUint64, gbSum);
}

void perfRanksBroadcast(perfCtx_t* ctx, void* data, size_t n, int root) {
  scratchFits(ctx, n);
  if (ctx->topo.rank == root) perfCheck(gbMemcpyToDevice(ctx->scratch, data, n), "gbMemcpyToDevice");
  perfCheck(gbBroadcast(ctx->scratch, ctx->scratch, n, gbUint8, root, ctx->comm, ctx->stream), "gbBroadcast");
  perfSync(ctx);
  perfCheck(gbMemcpyToHost(data, ctx->scratch, n), "gbMemcpyToHost");
}

perfRankInfo_t* perfRanksGather(perfCtx_t* ctx) {
  int n = ctx->topo.nranks;
  perfRankInfo_t* all = calloc((size_t)n, sizeof(*all));
  if (!all) {
    fprintf(stderr, "gpubridge-perf: out of host memory\n");
    exit(1);
  }
  perfDescribeSelf(ctx, &all[ctx->topo.rank]);
  /* Every other slot is zero, so a byte-wise sum is a gather. */
  allReduceHost(ctx, all, (size_t)n * sizeof(*all), gbUint8, gbSum);
  return all;
}
