/* Send/recv over the world's shared segment (core/shared_slots.h), when
 * every rank runs on this host: one channel per ordered pair of members,
 * p2pDepth slots deep. A group's messages to one peer form one byte stream,
 * cut into chunks of at most gbSharedP2pChunkBytes; per chunk:
 *
 *  SendTake:   the sender takes its channel's next slot. The copy stream
 *              waits for the caller's stream to reach this point and until
 *              the receiver read that slot's last use (a proxy step waits
 *              for the receiver's `got` counter); the caller then copies
 *              the chunk to ch->buf on the copy stream (the caller's own
 *              below GB_SHARED_SIDE_STREAM_BYTES).
 *  SendStaged: the copy stream marks it staged; the proxy publishes `sent`.
 *  RecvArrived: the receiver's proxy waits for the sender's `sent`; the
 *              caller's stream waits for that, then copies the chunk out of
 *              ch->buf.
 *  RecvRead:   the stream marks it read; the proxy publishes `got`.
 *
 * No proxy step waits for anything a later step of its own queue gives, so
 * two ranks may send each other in one group: a sender waits only for
 * reads of uses p2pDepth before, and the walker's pipeline (gbCommPipeline)
 * is at most p2pDepth deep, so that read came before in every queue. Waits have the collective's deadline
 * and hear a peer that failed or died, as the group's slots do. */
#ifndef GB_CORE_SHARED_P2P_H
#define GB_CORE_SHARED_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "core/shared_slots.h"

typedef struct {
  int peer;      /* member index */
  size_t slot;
  uint64_t use;  /* of this slot of the channel */
  char* buf;     /* the slot, host address */
  void* on;      /* a send's: the stream that copies it out */
} gbP2pChunk_t;

/* 0 when sh has no channels (not the world's segment). */
size_t gbSharedP2pChunkBytes(const gbSharedSlots_t* sh);
int gbSharedP2pDepth(const gbSharedSlots_t* sh);

/* op holds the walker's fields for the proxy (sequence; SendStaged and
 * RecvArrived: the flight-recorder tag and group, whose traffic counter
 * counts `bytes` as sent); these fill the rest and post it. */
gbResult_t gbSharedP2pSendTake(gbComm_t comm, gbSharedSlots_t* sh, int peer, void* stream, size_t bytes,
                               gbP2pChunk_t* out, void** copyStream);
gbResult_t gbSharedP2pSendStaged(gbComm_t comm, gbSharedSlots_t* sh, const gbP2pChunk_t* ch, uint64_t bytes,
                                 gbProxyOp_t* op);
/* The caller's stream waits until chunk ch was copied out of the send
 * buffer and the proxy published it (the end of a group: its buffers are
 * the caller's again, and its flight-recorder steps ended). */
gbResult_t gbSharedP2pSendDone(gbComm_t comm, gbSharedSlots_t* sh, const gbP2pChunk_t* ch, void* stream);
gbResult_t gbSharedP2pRecvArrived(gbComm_t comm, gbSharedSlots_t* sh, int peer, void* stream, gbP2pChunk_t* out,
                                  gbProxyOp_t* op);
gbResult_t gbSharedP2pRecvRead(gbComm_t comm, gbSharedSlots_t* sh, const gbP2pChunk_t* ch, void* stream);

#endif
