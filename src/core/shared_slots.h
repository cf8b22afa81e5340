/* Shared staging slots: the bridge between members of a host group that all
 * run on one host. The members map one nameless segment (os/memfd.h) and
 * register it with their device, so a member's stream copies its chunk into
 * its own slot there and reduces every member's chunk straight out of the
 * others' slots: one copy out and one reduction per chunk, no copy of the
 * payload by a CPU. The proxy moves only counters: per member and slot,
 * `full` (this use of my slot holds my chunk) and `read` (I have reduced
 * this use of every member's slot), in the segment; a member waits for the
 * others' counters with a deadline, and hears a peer that failed (its
 * failure cause, also in the segment) or died (its pidfd). */
#ifndef GB_CORE_SHARED_SLOTS_H
#define GB_CORE_SHARED_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/comm.h"

#define GB_SHARED_SLOTS_MAX 64 /* twice GPUBRIDGE_STAGING_SLOTS at most (else the host transport) */

typedef struct gbSharedSlots gbSharedSlots_t;

/* Over group g (collective on its members, during init): maps the group's
 * segment when every member is on this host, GPUBRIDGE_BRIDGE_SLOTS is
 * auto, the group has 2..GB_REDUCE_MAX_SRCS members and the device can
 * reduce; g->slots stays NULL otherwise, or when any member fails to map
 * or register it (all agree; the group then keeps the host transport). */
gbResult_t gbSharedSlotsSetup(gbComm_t comm, gbCommGroup_t* g, const gbProbe_t* probes);
/* Unregisters and unmaps (teardown, once no stream uses it). */
void gbSharedSlotsFree(gbComm_t comm, gbCommGroup_t* g);
/* Tells the group's members why this rank failed (comm->cause), so their
 * waits end with it at once. */
void gbSharedSlotsFail(gbComm_t comm, gbCommGroup_t* g);

/* A chunk's way through the group's slots. The group numbers its slot uses
 * itself (every member sends the same chunks over the group, so the counts
 * agree), with four local flags per slot between the stream and the proxy.
 *
 * gbSharedSlotsOut: take the next slot (the stream waits until every member
 * read its last use), copy bytes from src into my part of it, mark it
 * staged; the proxy publishes `full` and waits for every member's. op holds
 * the walker's fields for the proxy (sequence, flight-recorder tag); this
 * fills the rest and posts it.
 *
 * gbSharedSlotsIn: the stream waits for that, then reduces every member's
 * chunk into dst (red: count, dtype, op, divisor, ring; my own contribution
 * is read from mine, the bits the others read from my slot), marks the slot
 * read; the proxy publishes `read` and waits for every member's. */
gbResult_t gbSharedSlotsOut(gbComm_t comm, gbSharedSlots_t* sh, const void* src, size_t bytes, void* stream,
                            gbProxyOp_t* op, gbSlot_t* out);
gbResult_t gbSharedSlotsIn(gbComm_t comm, gbSharedSlots_t* sh, const gbSlot_t* s, const void* mine, void* dst,
                           const gbReduceArgs_t* red, void* stream);

#endif
