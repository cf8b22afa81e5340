/* A send/recv group's schedule (plan/p2p.c). Messages to peers in my
 * island go through the island's own fused group, unless the policy is
 * flat; the others through the host. The host part takes the world's
 * send/recv channels (stage/channels.c) when there are any: each peer's
 * messages form one byte stream per direction, cut into chunks of the
 * channel's chunk bytes and pipelined; my stream to myself is copied
 * directly, receive by receive (gbPlanP2pSelf). Otherwise one bulk buffer stages every message whole and one
 * host step moves them all. Pure: facts in, never the communicator. */
#ifndef GB_PLAN_P2P_H
#define GB_PLAN_P2P_H

#include <stddef.h>

#include "boot/topology.h"
#include "gpubridge/gpubridge.h"

/* The most ranks a world with send/recv channels has: per-peer streams are
 * kept for this many; a larger world takes the bulk path. */
#define GB_PLAN_P2P_MAX_PEERS 8

/* Where a bulk message starts is aligned to this many bytes. */
#define GB_PLAN_P2P_BULK_ALIGN 64

/* One send or receive of the group; peer is a global rank. */
typedef struct {
  int peer;
  int isSend;
  size_t bytes;
} gbPlanP2pMsg_t;

typedef struct {
  const gbTopo_t* topo;       /* ranks, mine, islands */
  int policy;                 /* the configured gbPolicy_t: flat sends every message through the host */
  const gbPlanP2pMsg_t* msgs; /* the group, in order */
  int nmsgs;
  size_t channelBytes;        /* a send/recv channel's chunk bytes; 0: the world has no channels */
  int channelDepth;           /* a channel's slots */
  int stagingSlots;           /* GPUBRIDGE_STAGING_SLOTS */
} gbPlanP2pInput_t;

/* One message's part of the schedule. */
typedef struct {
  gbPlanP2pMsg_t msg;
  int viaIsland;   /* the island's fused group; else the host */
  size_t streamAt; /* channels: where it starts in its peer's stream that way */
  size_t bulkAt;   /* bulk: where it lies in the bulk buffer */
} gbPlanP2pOp_t;

/* A piece of a channel chunk: bytes [from, from + bytes) of message op lie
 * at `into` in chunk `chunk` of its peer's stream that way. */
typedef struct {
  int op;
  size_t chunk;
  size_t from, into, bytes;
} gbPlanP2pPiece_t;

/* Channels, my messages to myself: bytes [from, from + bytes) of send op
 * sendOp go to `into` of receive op recvOp. */
typedef struct {
  int recvOp, sendOp;
  size_t from, into, bytes;
} gbPlanP2pSelfCopy_t;

typedef struct {
  gbPlanP2pOp_t* ops;    /* [nops], the group's order; gbPlanP2pFree */
  int nops;
  int nisland, nhost;    /* messages each way */
  int channels;          /* the host part over the channels; else the bulk buffer */
  int me;                /* this rank */
  /* Channels: per peer, the byte stream each way; chunks of chunkBytes;
   * nchunks, the most of any stream; depth chunks in flight. Bulk: one
   * chunk (none without a host message), depth 1. */
  size_t sendBytes[GB_PLAN_P2P_MAX_PEERS];
  size_t recvBytes[GB_PLAN_P2P_MAX_PEERS];
  size_t chunkBytes;
  size_t nchunks;
  int depth;
  /* Channels: every piece of every chunk, listed once, chunk by chunk
   * (chunk k's are pieces[chunkPieces[k]] .. pieces[chunkPieces[k + 1] - 1],
   * in the group's order), and my copies to myself. */
  gbPlanP2pPiece_t* pieces;
  size_t* chunkPieces;   /* [nchunks + 1] */
  gbPlanP2pSelfCopy_t* selfCopies;
  int nselfCopies;
  /* Bulk: the buffer's bytes, every host message at its aligned place. */
  size_t bulkBytes;
  /* Host steps this rank posts (the flight recorder's): channels, the chunks
   * of every stream each way; bulk, one when there is a host message. 0:
   * the host part has nothing to do. */
  size_t hostSteps;
} gbPlanP2p_t;

/* The schedule of in's group; out is released with gbPlanP2pFree (also
 * after an error). */
gbResult_t gbPlanP2pBuild(const gbPlanP2pInput_t* in, gbPlanP2p_t* out);
void gbPlanP2pFree(gbPlanP2p_t* p);

/* Chunk k of peer's stream one way (isSend): where it starts in the stream
 * and its length; 0 when the stream has no chunk k. */
void gbPlanP2pChunk(const gbPlanP2p_t* p, int peer, int isSend, size_t k, size_t* off, size_t* len);

/* Queries of the lists above (tests, messages). The self copy from send op
 * sendOp into receive op recvOp: its bytes (0: none), from and into. The
 * piece of op i in chunk k: its bytes (0: none), from and into. */
size_t gbPlanP2pSelf(const gbPlanP2p_t* p, int recvOp, int sendOp, size_t* from, size_t* into);
size_t gbPlanP2pPiece(const gbPlanP2p_t* p, int i, size_t k, size_t* from, size_t* into);

#endif
