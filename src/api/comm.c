/* Exported: communicator queries, errors, finalize, destroy, abort. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "base/result.h"

gbResult_t gbApiNotLive(const char* fn, gbComm_t comm) {
  if (!comm) return gbErrorSet(gbInvalidArgument, "%s: comm is NULL", fn);
  return gbErrorSet(gbInvalidArgument, "%s: comm is not a live communicator (destroyed, aborted, or never made)", fn);
}

gbResult_t gbApiCheckComm(const char* fn, gbComm_t comm) {
  if (gbCommInitState(comm) == GB_INIT_RUNNING)
    return gbErrorSet(gbInvalidUsage, "%s: the communicator is still initializing: poll gbCommGetAsyncError until it "
                                      "returns gbSuccess", fn);
  gbResult_t failed = gbCommAsyncError(comm);
  if (failed != gbSuccess)
    return gbErrorSet(failed, "%s: the communicator has failed earlier (%s); destroy or abort it",
                      fn, gbCommErrorText(comm));
  return gbSuccess;
}

const char* gbGetErrorString(gbResult_t result) { return gbResultString(result); }

/* After a failure of comm its first failure answers (the root cause: a
 * verdict, a dead peer); later errors on this thread are mostly its side
 * effects (a connection shut down, a stream dropped). Else the thread's last
 * error, as in NCCL. The comm's text is set once, with its first failure,
 * and copied here into this thread's own buffer inside a counted call: the
 * answer outlives a teardown on another thread. */
const char* gbGetLastError(gbComm_t comm) {
  static _Thread_local char failure[sizeof(((struct gbComm*)0)->errorText)];
  if (comm && gbCommEnter(comm)) {
    const char* text = gbCommFailureText(comm);
    if (text) snprintf(failure, sizeof(failure), "%s", text);
    gbCommLeave(comm);
    if (text) return failure;
  }
  /* Not failed: the comm's text is not read (a proxy thread may be writing
   * the first failure into it now). */
  return gbErrorLast();
}

/* The queries are counted calls (GB_API_ON_COMM), as every call on a
 * communicator: a watchdog thread may poll while another aborts. */
static gbResult_t asyncErrorOf(gbComm_t comm, gbResult_t* asyncError) {
  if (!asyncError) return gbErrorSet(gbInvalidArgument, "gbCommGetAsyncError: asyncError is NULL");
  if (gbCommInitState(comm) == GB_INIT_RUNNING) *asyncError = gbInProgress;
  else *asyncError = gbCommAsyncError(comm);
  if (*asyncError != gbSuccess && *asyncError != gbInProgress) gbErrorRecord(gbCommErrorText(comm));
  return gbSuccess;
}

gbResult_t gbCommGetAsyncError(gbComm_t comm, gbResult_t* asyncError) {
  GB_API_ON_COMM("gbCommGetAsyncError", comm, asyncErrorOf(comm, asyncError));
}

/* An initialized comm, and a place for the answer. */
static gbResult_t checkQuery(const char* fn, gbComm_t comm, const void* out, const char* what) {
  if (!out) return gbErrorSet(gbInvalidArgument, "%s: %s is NULL", fn, what);
  if (gbCommInitState(comm) != GB_INIT_DONE) return gbErrorSet(gbInvalidUsage, "%s: comm is not initialized", fn);
  return gbSuccess;
}

static gbResult_t countOf(gbComm_t comm, int* count) {
  GB_CHECK(checkQuery("gbCommCount", comm, count, "count"));
  *count = comm->nranks;
  return gbSuccess;
}

gbResult_t gbCommCount(const gbComm_t comm, int* count) { GB_API_ON_COMM("gbCommCount", comm, countOf(comm, count)); }

static gbResult_t rankOf(gbComm_t comm, int* rank) {
  GB_CHECK(checkQuery("gbCommUserRank", comm, rank, "rank"));
  *rank = comm->rank;
  return gbSuccess;
}

gbResult_t gbCommUserRank(const gbComm_t comm, int* rank) {
  GB_API_ON_COMM("gbCommUserRank", comm, rankOf(comm, rank));
}

static gbResult_t memoryOf(gbComm_t comm, gbCommMemory_t* memory) {
  GB_CHECK(checkQuery("gbCommGetMemory", comm, memory, "memory"));
  *memory = (gbCommMemory_t){.size = sizeof(*memory), .version = 1,
                             .pinnedBytes = atomic_load(&comm->memory.pinned),
                             .segmentBytes = atomic_load(&comm->memory.segment),
                             .deviceBytes = atomic_load(&comm->memory.device)};
  return gbSuccess;
}

gbResult_t gbCommGetMemory(const gbComm_t comm, gbCommMemory_t* memory) {
  GB_API_ON_COMM("gbCommGetMemory", comm, memoryOf(comm, memory));
}

static gbResult_t topologyOf(gbComm_t comm, gbTopology_t* topology) {
  GB_CHECK(checkQuery("gbCommGetTopology", comm, topology, "topology"));
  *topology = comm->pub;
  return gbSuccess;
}

gbResult_t gbCommGetTopology(const gbComm_t comm, gbTopology_t* topology) {
  GB_API_ON_COMM("gbCommGetTopology", comm, topologyOf(comm, topology));
}

static gbResult_t finalize(gbComm_t comm) {
  int state = gbCommInitState(comm);
  if (state == GB_INIT_RUNNING)
    return gbErrorSet(gbInvalidUsage, "gbCommFinalize: the communicator is still initializing: poll "
                                      "gbCommGetAsyncError, or destroy or abort it");
  if (state == GB_INIT_FAILED) return gbCommAsyncError(comm);
  gbResult_t res = gbCommDrain(comm);
  /* A communicator that failed says so with its first failure, also when
   * nothing was left to drain. */
  gbResult_t failed = gbCommAsyncError(comm);
  if (failed != gbSuccess)
    return gbErrorSet(failed, "gbCommFinalize: the communicator has failed (%s); destroy or abort it",
                      gbCommErrorText(comm));
  return res;
}

gbResult_t gbCommFinalize(gbComm_t comm) { GB_API_ON_COMM("gbCommFinalize", comm, finalize(comm)); }

/* Destroy and abort end their own call before the teardown (gbCommFree
 * waits for every call on the comm to leave); if another thread's teardown
 * took the comm first, theirs does nothing more. */
gbResult_t gbCommDestroy(gbComm_t comm) {
  if (!gbCommEnter(comm)) return gbApiNotLive("gbCommDestroy", comm);
  gbResult_t res = gbSuccess;
  int failed = 1;
  if (gbCommInitState(comm) == GB_INIT_RUNNING) {
    /* Destroying a communicator still initializing: stop its init. */
    gbErrorSet(gbRemoteError, "the communicator was destroyed while it was initializing");
    gbCommFail(comm, gbRemoteError);
  } else {
    res = finalize(comm);
    failed = gbCommAsyncError(comm) != gbSuccess; /* destroyed all the same, as NCCL does */
  }
  gbCommLeave(comm);
  gbCommFree(comm);
  return failed || res == gbSuccess || res == gbRemoteError || res == gbTimeout ? gbSuccess : res;
}

gbResult_t gbCommAbort(gbComm_t comm) {
  if (!gbCommEnter(comm)) return gbApiNotLive("gbCommAbort", comm);
  gbErrorSet(gbRemoteError, "the communicator was aborted (gbCommAbort)");
  gbCommFailFor(comm, gbRemoteError, "abort");
  gbCommLeave(comm);
  gbCommFree(comm);
  return gbSuccess;
}
