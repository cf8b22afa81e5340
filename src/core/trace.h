/* The communicator's calls into its flight recorder (src/trace/): each
 * passes the comm's ring (comm->trace, NULL when off) and the numbers only
 * the comm holds, so the walkers keep one line per stamp. What the ring is
 * given at create and asks the communicator later is core/recorder.c's. */
#ifndef GB_CORE_TRACE_H
#define GB_CORE_TRACE_H

#include "core/comm.h"
#include "trace/trace.h"

/* Creates comm's ring (comm->trace stays NULL when GPUBRIDGE_TRACE_BUFFER
 * is 0), once its topology, groups and settings are final. */
gbResult_t gbCommTraceCreate(gbComm_t comm);
/* gbProxyConfig_t.onStep: the proxy's stamps. ctx is the communicator. */
void gbCommTraceOnStep(void* ctx, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent);

/* Caller thread, right after the collective took its number (comm->seq). */
static inline void gbTraceBegin(gbComm_t c, int coll, uint64_t count, int dtype, int op, int root) {
  if (c->trace) gbTraceRecordBegin(c->trace, c->seq, coll, count, dtype, op, root);
}

/* Caller thread, right after a send/recv group took its number (comm->p2pSeq). */
static inline void gbTraceBeginP2p(gbComm_t c, const gbCommP2p_t* ops, int nops) {
  if (!c->trace) return;
  uint64_t count = 0;
  int npeers = 0;
  for (int i = 0; i < nops; i++) {
    count += ops[i].count;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = ops[j].peer == ops[i].peer;
    npeers += !seen;
  }
  int dtype = nops > 0 ? (int)ops[0].dt : -1;
  for (int i = 1; i < nops; i++)
    if ((int)ops[i].dt != dtype) dtype = -1;
  gbTraceRecordBeginP2p(c->trace, c->p2pSeq, count, dtype, nops > 0 ? ops[0].peer : -1, npeers);
}

/* The number taken by gbTraceBegin was given back: forget the record. */
static inline void gbTraceCancel(gbComm_t c) {
  if (c->trace) gbTraceRecordCancel(c->trace, c->seq);
}

static inline void gbTraceSetPlan(gbComm_t c, int policy, int nchunks) {
  if (c->trace) gbTraceRecordSetPlan(c->trace, policy, nchunks);
}

static inline void gbTraceAddFlags(gbComm_t c, uint32_t flags) {
  if (c->trace) gbTraceRecordAddFlags(c->trace, flags);
}

static inline void gbTraceAddIslandBytes(gbComm_t c, uint64_t bytes) {
  if (c->trace) gbTraceRecordAddIslandBytes(c->trace, bytes);
}

static inline void gbTraceTagOp(gbComm_t c, gbProxyOp_t* op, int role, uint32_t chunk, uint32_t nchunks) {
  gbTraceRecordTagOp(c->trace, op, role, chunk, nchunks);
}

/* The caller's fields are complete: the entry for the end marker (NULL: unrecorded). */
static inline gbTraceEntry_t* gbTraceEnqueued(gbComm_t c) {
  return c->trace ? gbTraceRecordEnqueued(c->trace) : NULL;
}

/* The done writer, and the stream's drop of a record's end (entries name their comm). */
static inline void gbTraceFinish(gbTraceEntry_t* e, int state, gbResult_t result, uint32_t flags) {
  gbTraceRecordFinish(e->comm->trace, e, state, result, flags);
}

static inline void gbTraceFinishDropped(gbTraceEntry_t* e, uint32_t flags) {
  gbTraceRecordDropped(e->comm->trace, e, flags);
}

/* Puts the write of e's done flag on the stream (rings with done flags). */
static inline gbResult_t gbTraceDonePost(gbTraceEntry_t* e, void* stream) {
  return gbTraceDoneWrite(e->comm->trace, e, stream);
}

#endif
