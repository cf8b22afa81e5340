/* Host-memory collectives over a group of net connections. Used by the bridge
 * (among island leaders), by flat (among all ranks) and by host islands.
 *
 * Reduction order (docs/REDUCTION_ORDER.md), per call of count elements over
 * n members (member order = group order):
 *  - bytes < ringMinBytes: "exchange": every member receives every
 *    contribution and folds x0 op x1 op ... op x(n-1), left to right.
 *  - otherwise "ring": slice j = [floor(j*count/n), floor((j+1)*count/n)) is
 *    folded x(j+1) op x(j+2) op ... op x(j) (indices mod n, left to right),
 *    on member j, then all-gathered. With n = 2 both slices are folded
 *    x0 op x1, so two members always get the exchange's bits.
 *  Reduce uses the all-reduce's order. divisor > 0 divides the result once,
 *  where it is reduced, before it is copied (avg). */
#ifndef GB_ALGO_ALGO_H
#define GB_ALGO_ALGO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "gpubridge/gpubridge.h"
#include "net/net.h"

typedef struct {
  int n;                       /* members */
  int me;                      /* my index */
  gbNetConn_t** conns;         /* [n]; conns[me] is NULL */
  const int* ranks;            /* [n] global ranks, for messages */
  const char* name;            /* "bridge", "world", "island nvidia" */
  const gbNetOps_t* net;
  double timeoutSec;           /* each call's deadline is now + timeoutSec */
  const atomic_int* abortFlag;
  size_t ringMinBytes;
  size_t pieceBytes;           /* pipelining unit inside an algorithm */
  void* scratch;               /* owned by the group, grown on demand */
  size_t scratchBytes;
  uint64_t bytesSent;          /* payload bytes this member sent (statistics) */
} gbAlgoGroup_t;

/* One send or receive of gbAlgoSendRecv; peer is a member index. */
typedef struct {
  int peer;
  int isSend;
  void* buf;     /* const for a send */
  size_t bytes;
} gbAlgoP2p_t;

/* Whether an all-reduce of bytes over g folds in the ring's order (else in
 * the exchange's, which a ring of two members gives too). */
static inline int gbAlgoFoldsRing(const gbAlgoGroup_t* g, size_t bytes) {
  return g->n >= 3 && bytes >= g->ringMinBytes;
}

/* recv = op over members of send (send may equal recv). op: sum, prod, max,
 * min (pass avg as sum with divisor). */
gbResult_t gbAlgoAllReduce(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                           gbDataType_t dt, gbRedOp_t op, int divisor);
/* One gbAlgoAllReduce per chunk of `chunk` elements (the last may be
 * shorter; 0: one call), back to back, in order, with their bits; all of them
 * within one deadline (timeoutSec from the start), as one collective is. */
gbResult_t gbAlgoAllReduceChunks(gbAlgoGroup_t* g, const void* send, void* recv, size_t count, size_t chunk,
                                 gbDataType_t dt, gbRedOp_t op, int divisor);
/* recv on member root only (recv may be NULL elsewhere); same order as all-reduce. */
gbResult_t gbAlgoReduce(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                        gbDataType_t dt, gbRedOp_t op, int divisor, int root);
/* Pipelined broadcast of bytes from member root along a chain. */
gbResult_t gbAlgoBroadcast(gbAlgoGroup_t* g, void* buf, size_t bytes, int root);

/* recv[i*bytes ..] = member i's send (bytes each). In place when
 * send == recv + me*bytes. */
gbResult_t gbAlgoAllGather(gbAlgoGroup_t* g, const void* send, void* recv, size_t bytes);
/* recv (count elements) = op over members of send[me*count ..], folded
 * x0 op x1 op ... op x(n-1) left to right on the member that owns the block;
 * divisor as in all-reduce. In place when recv == send + me*count. */
gbResult_t gbAlgoReduceScatter(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                               gbDataType_t dt, gbRedOp_t op, int divisor);
/* recv[i*bytes ..] = member i's send[me*bytes ..]. send and recv must not
 * overlap. */
gbResult_t gbAlgoAllToAll(gbAlgoGroup_t* g, const void* send, void* recv, size_t bytes);
/* Runs every send and receive together; per peer and direction they match
 * the peer's in list order (the peer's k-th send to me fills my k-th
 * receive from it). A send to or receive from myself pairs with my own in
 * list order too (a copy). */
gbResult_t gbAlgoSendRecv(gbAlgoGroup_t* g, const gbAlgoP2p_t* ops, int nops);

void gbAlgoGroupFree(gbAlgoGroup_t* g); /* frees scratch only */

#endif
