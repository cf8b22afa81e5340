/* What the algo/ files share: argument checks, scratch, slices, posting.
 * Private to src/algo/. */
#ifndef GB_ALGO_INTERNAL_H
#define GB_ALGO_INTERNAL_H

#include <stddef.h>
#include "algo/algo.h"
#include "base/clock.h"

/* Pieces in flight per pipeline: the one being reduced or forwarded and the
 * ones after it. More than two only helps when the transport progresses
 * requests that are not being waited on. */
#define GB_ALGO_WINDOW 4

#define GB_ALGO_DEFAULT_PIECE_BYTES ((size_t)1 << 20)

/* Checks what every entry point takes; root < 0 means "no root". On success
 * *esize is the element size. */
gbResult_t gbAlgoCheckArgs(const gbAlgoGroup_t* g, const char* what, size_t count,
                           gbDataType_t dt, gbRedOp_t op, int root, size_t* esize);

/* What an exchange of n blocks of bytes each (all-gather, all-to-all) takes
 * beyond gbAlgoCheckArgs: both buffers, and n blocks that fit size_t. Call
 * it with bytes > 0. */
gbResult_t gbAlgoCheckBlocks(const gbAlgoGroup_t* g, const char* what, const void* send, const void* recv,
                             size_t bytes);

/* Elements per pipelined piece (at least 1). */
size_t gbAlgoPieceElems(const gbAlgoGroup_t* g, size_t esize);

/* Grows the group's scratch to at least bytes and returns it. */
gbResult_t gbAlgoScratchGet(gbAlgoGroup_t* g, size_t bytes, void** out);

/* Slice j of count elements over n members starts at floor(j*count/n),
 * computed without overflow. */
static inline size_t gbAlgoSliceBegin(size_t count, int n, int j) {
  size_t q = count / (size_t)n, r = count % (size_t)n;
  return q * (size_t)j + (r * (size_t)j) / (size_t)n;
}

static inline int gbAlgoMod(int a, int n) { return ((a % n) + n) % n; }

/* Post a send or receive of bytes to member peer and append the request to
 * reqs[*nreq]; nothing is posted when bytes is 0 (both sides skip alike). */
gbResult_t gbAlgoPostSend(gbAlgoGroup_t* g, int peer, const void* buf, size_t bytes,
                          gbNetReq_t** reqs, int* nreq);
gbResult_t gbAlgoPostRecv(gbAlgoGroup_t* g, int peer, void* buf, size_t bytes,
                          gbNetReq_t** reqs, int* nreq);

/* The exchange algorithm (algo.h): root < 0 for all-reduce, else only root
 * receives and folds into recv. */
gbResult_t gbAlgoExchange(gbAlgoGroup_t* g, const void* send, void* recv, size_t count,
                          gbDataType_t dt, gbRedOp_t op, int divisor, int root,
                          gbDeadline_t deadline);

/* The ring (algo.h). withGather: all-reduce (reduce-scatter then all-gather
 * into recv, pipelined across both). Without: reduce-scatter only; member
 * me's finished slice goes to out when out is not NULL, and *mine tells
 * where it lies (out, or the group's scratch). */
gbResult_t gbAlgoRing(gbAlgoGroup_t* g, const void* send, void* recv, void* out, size_t count,
                      gbDataType_t dt, gbRedOp_t op, int divisor, int withGather,
                      gbDeadline_t deadline, const void** mine);

/* Whether the exchange order applies to a call of bytes over g. */
static inline int gbAlgoUseExchange(const gbAlgoGroup_t* g, size_t bytes) {
  return bytes < g->ringMinBytes;
}

/* count == 0 or a group of one: the whole call is local. */
void gbAlgoLocal(const void* send, void* recv, size_t count, size_t esize, gbDataType_t dt,
                 int divisor);

#endif
