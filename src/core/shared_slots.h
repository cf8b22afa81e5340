/* Staging slots shared by the members of a host group: the bridge without a
 * copy of the payload by a CPU. Each member stages its chunk into its own
 * part of a slot with one copy out, then reduces every member's part (or
 * copies the one it needs) straight out of the slot, on its device.
 *
 * On one host (shared): the members map one nameless segment (os/memfd.h)
 * and register it with their device, so a member reads the others' parts
 * where they lie. The proxy moves only counters: per member and slot, `full`
 * (this use of my slot holds my chunk) and `read` (I have reduced this use
 * of every member's slot), in the segment; a member waits for the others'
 * counters with a deadline, and hears a peer that failed (its failure
 * cause, also in the segment) or died (its process is gone or a zombie).
 *
 * Across hosts (remote; groups of at most GB_REMOTE_SLOTS_MAX members):
 * every member holds the same layout in its own registered host memory, and
 * the proxy sends its part straight from there to the members that need it
 * and receives theirs straight into their parts, over the group's host
 * transport: the pinned slots are the sockets' source and destination, and
 * the reduction still runs on the device in the documented order. */
#ifndef GB_CORE_SHARED_SLOTS_H
#define GB_CORE_SHARED_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"

#define GB_SHARED_SLOTS_MAX 64 /* GPUBRIDGE_STAGING_SLOTS + 2 at most (else the host transport) */
/* Across hosts a member sends its part to each member that needs it (an
 * all-reduce: to every member), where a ring sends 2(n-1)/n parts: from 5
 * members on the ring sends less than half, and the host transport keeps
 * such groups. */
#define GB_REMOTE_SLOTS_MAX 4
/* A chunk part smaller than this is copied out on the caller's own stream
 * (Take), and a GPU's kernel reads the others' parts of it where they lie
 * (Fetch): under it the hand-over between streams (a flag write and wait,
 * ~8 us each on a GPU) or a copy costs more than the overlap gains. */
#define GB_SHARED_SIDE_STREAM_BYTES ((size_t)256 << 10)

typedef struct gbSharedSlots gbSharedSlots_t;

/* Over group g (collective on its members, during init): sets up the
 * group's slots when GPUBRIDGE_BRIDGE_SLOTS is auto and the device can
 * reduce: shared when every member is on this host and the group has
 * 2..GB_REDUCE_MAX_SRCS members, remote when they are not and it has
 * 2..GB_REMOTE_SLOTS_MAX; g->slots stays NULL otherwise, or when any member
 * fails to map or register its memory (all agree; the group then keeps the
 * host transport).
 * When `same` (set up before, or NULL) has exactly g's members in g's
 * order, g shares its segment: every member takes their slots in the one
 * order of its calls either way (two islands: world, bridge and rail 0). */
gbResult_t gbSharedSlotsSetup(gbComm_t comm, gbCommGroup_t* g, const gbProbe_t* probes, const gbCommGroup_t* same);
/* Unregisters and unmaps (teardown, once no stream uses it; a shared
 * segment with the last of its groups). */
void gbSharedSlotsFree(gbComm_t comm, gbCommGroup_t* g);
/* Tells the group's members why this rank failed (comm->cause), so their
 * waits end with it at once. */
void gbSharedSlotsFail(gbComm_t comm, gbCommGroup_t* g);

/* A chunk's way through the group's slots, in four steps on the caller's
 * stream. The group numbers its slot uses itself (every member sends the
 * same chunks over the group, so the counts agree), with four local flags
 * per slot between the stream and the proxy.
 *
 *  Take:    the next slot, for a part of `bytes`. The slots' copy stream
 *           (*copyStream) waits for the caller's stream to reach this point
 *           and until every member read the slot's last use; the caller
 *           then copies its chunk to s->buf (its part) on the copy stream,
 *           so chunk k+1 goes out while the caller's stream reduces chunk
 *           k. Below GB_SHARED_SIDE_STREAM_BYTES *copyStream is the
 *           caller's stream.
 *  Staged:  the copy stream marks it staged; the proxy publishes `full` and
 *           waits for every member's (remote: moves the parts as `chunk`
 *           says). op holds the walker's fields for the proxy (sequence,
 *           flight-recorder tag, and group: the host group whose traffic
 *           counter counts what this member sent, and whose transport a
 *           remote move takes); this fills the rest and posts it.
 *  Arrived: the stream waits for that. The caller then reads the members'
 *           parts (gbSharedSlotsAt for copies, gbSharedSlotsFetch for
 *           kernels).
 *  Read:    mark it read; the proxy publishes `read` and waits for every
 *           member's, which frees the slot for its next use (remote: mine
 *           frees it; the others read their own copies).
 * A member with nothing to send or read still takes every step. */

/* Which parts of a slot a chunk's members need (shared: read where they
 * lie; remote: what the proxy moves). */
typedef enum {
  GB_MOVE_ALL,       /* every member's part, to every member (all-reduce, all-gather) */
  GB_MOVE_FROM_ROOT, /* the root's part, to every member (broadcast) */
  GB_MOVE_TO_ROOT,   /* every member's part, to the root (reduce) */
  GB_MOVE_BLOCKS     /* block k of every member's part, to member k (reduce-scatter, all-to-all) */
} gbSharedMove_t;

typedef struct {
  gbSharedMove_t move;
  int root;      /* GB_MOVE_FROM_ROOT, GB_MOVE_TO_ROOT: member index */
  size_t part;   /* bytes of each member's part in use */
  size_t block;  /* GB_MOVE_BLOCKS: bytes of each block (a part holds one per member) */
} gbSharedChunk_t;

gbResult_t gbSharedSlotsTake(gbComm_t comm, gbSharedSlots_t* sh, void* stream, size_t bytes, gbSlot_t* out,
                             void** copyStream);
gbResult_t gbSharedSlotsStaged(gbComm_t comm, gbSharedSlots_t* sh, const gbSlot_t* s, const gbSharedChunk_t* chunk,
                               gbProxyOp_t* op);
gbResult_t gbSharedSlotsArrived(gbComm_t comm, gbSharedSlots_t* sh, const gbSlot_t* s, void* stream);
gbResult_t gbSharedSlotsRead(gbComm_t comm, gbSharedSlots_t* sh, const gbSlot_t* s, void* stream);

/* Member k's part of slot s: its host address. */
char* gbSharedSlotsAt(const gbSharedSlots_t* sh, int member, const gbSlot_t* s);
/* Bytes [offset, offset + bytes) of member k's part where this device's
 * reduction reads them: in place on the host device, and on a GPU below
 * GB_SHARED_SIDE_STREAM_BYTES (mapped host memory); else the slots'
 * fetch stream first copies them into the slot's device scratch (one per
 * slot and member: the slot's next use waits until every member read this
 * one), so chunk k comes in while the caller's stream reduces chunk k - 1,
 * and the caller's stream waits for the copy. A failed copy sets *res
 * (left alone on success). */
const void* gbSharedSlotsFetch(gbComm_t comm, gbSharedSlots_t* sh, int member, const gbSlot_t* s, size_t offset,
                               size_t bytes, void* stream, gbResult_t* res);
int gbSharedSlotsMembers(const gbSharedSlots_t* sh);
int gbSharedSlotsMe(const gbSharedSlots_t* sh);

#endif
