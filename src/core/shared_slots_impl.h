/* Shared staging slots, inside (core/shared_slots.c, shared_slots_setup.c
 * and shared_p2p.c only): the segment's layout, the flags between a stream and the proxy,
 * and the proxy's counter step. Callers use shared_slots.h and
 * shared_p2p.h. */
#ifndef GB_CORE_SHARED_SLOTS_IMPL_H
#define GB_CORE_SHARED_SLOTS_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/shared_slots.h"

/* One member's counters and failure, in the segment. `full` and `read`:
 * the group's slots (shared_slots.h). `sent[k]` and `got[k]`: the send/recv
 * channels between this member and member k (shared_p2p.h): this member
 * staged that use of its channel to k, this member read that use of k's
 * channel to it. */
typedef struct {
  _Atomic uint64_t full[GB_SHARED_SLOTS_MAX];
  _Atomic uint64_t read[GB_SHARED_SLOTS_MAX];
  _Atomic uint64_t sent[GB_REDUCE_MAX_SRCS][GB_SHARED_SLOTS_MAX];
  _Atomic uint64_t got[GB_REDUCE_MAX_SRCS][GB_SHARED_SLOTS_MAX];
  _Atomic int failed; /* cause is written first */
  gbNetCause_t cause;
} gbSharedCtl_t;

/* Local flags, [flag][nslots] for the group's slots and [flag][member][p2pDepth]
 * for the channels. Group: staged (copy stream), full (proxy: every member
 * staged), consumed (stream: reduced), freed (proxy: every member read),
 * input (the caller's stream reached the chunk: the copy stream may copy it
 * out), and fetched (the fetch stream copied a member's part in). Channel
 * to member k: input, staged, sent (the proxy published it) and freed (k
 * read the slot's last use); from member k: arrived (k staged) and
 * consumed. */
enum { FLAG_STAGED, FLAG_FULL, FLAG_CONSUMED, FLAG_FREED, FLAG_INPUT, FLAG_FETCHED, NFLAGS };
enum { P2P_INPUT, P2P_STAGED, P2P_SENT, P2P_FREED, P2P_ARRIVED, P2P_CONSUMED, NP2PFLAGS };

struct gbSharedSlots {
  int remote;          /* members on other hosts: base is this member's own copy of the layout (shared_slots.h) */
  char* base;          /* the segment: a header page, a control area per member, the slots, the channels */
  char* devBase;       /* the device's address of base */
  size_t bytes;
  int n, me;
  const int* ranks;    /* the group's */
  const char* name;    /* the group's */
  int nslots;
  size_t slotBytes;    /* page-rounded */
  int pid[GB_REDUCE_MAX_SRCS];
  double timeoutSec;
  int64_t pollNs;      /* the longest sleep between looks at a peer's counter (os/backoff.h; 0: by the wait) */
  const volatile int* abortFlag;
  /* Caller thread: uses of each slot so far, the next slot. */
  uint64_t uses[GB_SHARED_SLOTS_MAX];
  size_t next;
  gbFlag_t* flags;     /* [NFLAGS][nslots], then [NP2PFLAGS][n][p2pDepth] */
  void* copyStream;    /* copies chunks out, beside the caller's stream (which reduces) */
  void* fetchStream;   /* a GPU's: copies the others' parts in (to scratch), beside both */
  void* stagedOn[GB_SHARED_SLOTS_MAX];    /* caller thread: the stream that copies each slot's chunk out */
  uint64_t fetches[GB_SHARED_SLOTS_MAX];  /* caller thread: parts fetched into each slot's scratch so far */
  uint64_t fetchUse[GB_SHARED_SLOTS_MAX]; /* and the slot use they were last for */
  char* scratch;       /* device memory ([nslots][n][slotBytes]) the others' parts are copied to before a reduction;
                          NULL where device memory is host memory. One per slot: a slot's uses are ordered (the
                          freed flag), also between calls on different streams, so its scratch is too. */
  int groups;          /* host groups with these members that use it */
  /* Send/recv channels (the world's segment only; p2pDepth 0: none): one per
   * ordered pair of members, p2pDepth slots of p2pBytes each. Caller thread:
   * uses of each channel so far, by direction. */
  int p2pDepth;
  size_t p2pBytes;
  uint64_t p2pSent[GB_REDUCE_MAX_SRCS], p2pGot[GB_REDUCE_MAX_SRCS];
};

gbSharedCtl_t* gbSharedCtl(const gbSharedSlots_t* sh, int member);
/* b rounded up to whole pages; the bytes of sh's layout (its fields set). */
size_t gbSharedRoundPage(size_t b);
size_t gbSharedLayoutBytes(const gbSharedSlots_t* sh);
gbFlag_t* gbSharedP2pFlag(const gbSharedSlots_t* sh, int which, int member, size_t slot);
/* Slot `slot` of the channel from member `from` to member `to`: its host address. */
char* gbSharedP2pAt(const gbSharedSlots_t* sh, int from, int to, size_t slot);

/* A proxy step on counters in the segment: publish *publish = use (NULL:
 * nothing), then wait until every counter in wait[] reached use, each
 * member `who[i]`'s, with the collective's deadline, hearing a member that
 * failed or died. Then group (NULL: none) counts bytes as sent. `what`
 * says what is awaited ("to stage"), for messages. */
typedef struct {
  gbSharedSlots_t* sh;
  size_t slot;
  uint64_t use;
  _Atomic uint64_t* publish;
  int nwait;
  int who[GB_REDUCE_MAX_SRCS];
  _Atomic uint64_t* wait[GB_REDUCE_MAX_SRCS];
  const char* what;
  gbAlgoGroup_t* group;
  uint64_t bytes;
} gbSharedStep_t;

/* Posts step (copied) as a proxy call: it starts once ready reaches
 * readyValue (NULL: at once) and sets done to doneValue after. op holds the
 * walker's fields (sequence, flight-recorder tag); this fills the rest. */
gbResult_t gbSharedPostStep(gbComm_t comm, const gbSharedStep_t* step, gbProxyOp_t* op, gbFlag_t* ready,
                            uint64_t readyValue, gbFlag_t* done, uint64_t doneValue);

#endif
