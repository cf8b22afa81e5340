/* The communicator's side of its flight recorder (src/trace/): what the
 * ring is given at create, and what it asks the communicator later (its
 * first failure, which host group a proxy step ran on, whether start-up
 * is over). */
#include <stdio.h>

#include "core/trace.h"

static gbResult_t asyncError(void* ctx) { return gbCommAsyncError((gbComm_t)ctx); }

/* Under errorLock: the code, text and cause of one failure. */
static void failure(void* ctx, gbTraceFailure_t* out) {
  gbComm_t c = ctx;
  pthread_mutex_lock(&c->errorLock);
  out->code = gbCommAsyncError(c);
  if (out->code != gbSuccess) {
    snprintf(out->text, sizeof(out->text), "%s", c->errorText);
    out->faultRank = c->cause.faultRank;
    out->seenBy = c->cause.seenBy;
    out->wallNs = c->failWallNs;
  }
  pthread_mutex_unlock(&c->errorLock);
}

static int hostGroup(void* ctx, const gbAlgoGroup_t* g) {
  gbComm_t c = ctx;
  if (g == &c->world.algo) return gbHostGroupWorld;
  if (g == &c->bridge.algo) return gbHostGroupBridge;
  for (int i = 0; i < c->nrails; i++)
    if (g == &c->rails[i].algo) return gbHostGroupRail;
  return -1;
}

static int ready(void* ctx) { return gbCommInitState((gbComm_t)ctx) == GB_INIT_DONE; }

gbResult_t gbCommTraceCreate(gbComm_t c) {
  gbTraceSetup_t s = {
      .owner = {.ctx = c, .handle = c, .asyncError = asyncError, .failure = failure, .hostGroup = hostGroup,
                .ready = ready},
      .dev = c->dev,
      .rank = c->rank,
      .nranks = c->nranks,
      .jobId = gbBootIdHash(&c->id),
      .timeoutSec = c->settings.timeoutSec,
      .policy = c->pub.policy,
      .checkCalls = gbCommChecking(c),
      .topo = &c->topo,
  };
  return gbTraceCreate(&s, &c->trace);
}

void gbCommTraceOnStep(void* ctx, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent) {
  gbTraceOnStep(((gbComm_t)ctx)->trace, op, event, res, bytesSent);
}
