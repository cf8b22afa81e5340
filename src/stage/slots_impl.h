/* Shared and remote slots, inside (stage/slots*.c and stage/channels.c
 * only): the segment's layout, the flags between a stream and the proxy,
 * and the proxy's counter step.
 *
 * On one host (shared): the members map one nameless segment (os/memfd.h)
 * and register it with their device, so a member reads the others' parts
 * where they lie. The streams hand chunks over themselves: per member and
 * slot, a stream signals every other member in its control area (a flag in
 * the segment that the stream writes with a stream memory op: `full`, this
 * use of my slot holds my chunk; `read`, I have reduced this use of every
 * member's slot) and waits for the others' signals in its own. No host
 * thread is between them: the proxy only watches the same signals with a
 * deadline, hears a peer that failed (its failure cause, also in the
 * segment) or died (its process is gone or a zombie), and then releases this
 * member's waits, so no stream waits forever.
 *
 * Across hosts (remote; groups of at most GB_STAGE_REMOTE_MAX members):
 * every member holds the same layout in its own registered host memory, and
 * the proxy sends its part straight from there to the members that need it
 * and receives theirs straight into their parts, over the group's host
 * transport: the pinned slots are the sockets' source and destination, and
 * the reduction still runs on the device in the documented order.
 *
 * A chunk's way, on the caller's stream and the proxy (the group numbers its
 * slot uses itself: every member sends the same chunks over the group, so
 * the counts agree):
 *  take:    the next slot; the copy stream waits for the caller's stream to
 *           reach this point and until every member read the slot's last
 *           use; the chunk is copied out on it (the caller's own stream for
 *           a small part: gbStageWork_t.sideStreams);
 *  staged:  the copy stream signals `full` to every member and marks it
 *           (remote: the proxy moves the parts the chunk needs, then marks
 *           it full);
 *  arrived: the caller's stream waits for every member's `full` (remote:
 *           the proxy's mark), then reads the members' parts (copies from
 *           their host addresses; reductions through fetch, which brings
 *           large parts to device scratch first);
 *  read:    the caller's stream signals `read` to every member and marks it
 *           (remote: the proxy frees my slot after my read). */
#ifndef GB_STAGE_SLOTS_IMPL_H
#define GB_STAGE_SLOTS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/wire.h"
#include "net/net.h"
#include "plan/sizes.h"
#include "stage/stage.h"

#define GB_STAGE_SLOTS_MAX 64 /* GPUBRIDGE_STAGING_SLOTS + 2 at most (else the private stage) */
#define GB_STAGE_EXCHANGE_BLOCKS GB_PLAN_EXCHANGE_BLOCKS /* an exchange's blocks at most (stage/exchange.c) */

/* One member's counters, failure and signals, in the segment. `sent[k]`
 * and `got[k]`: the send/recv channels between this member and member k
 * (stage/channels.c): this member staged that use of its channel to k, this
 * member read that use of k's channel to it. */
typedef struct {
  _Atomic uint64_t sent[GB_REDUCE_MAX_SRCS][GB_STAGE_SLOTS_MAX];
  _Atomic uint64_t got[GB_REDUCE_MAX_SRCS][GB_STAGE_SLOTS_MAX];
  _Atomic int failed; /* cause is written first */
  gbNetCause_t cause;
  /* Shared slots' signals to this member, written by the members' streams:
   * inFull[k][s], member k staged that use of slot s; inRead[k][s], member k
   * read that use of every member's part of slot s. This member's streams
   * wait on them with stream memory ops, so no host thread is in a chunk's
   * hand-over; its proxy only watches them (deadline, liveness) and on a
   * failure releases them (gbSharedRelease). */
  gbFlag_t inFull[GB_REDUCE_MAX_SRCS][GB_STAGE_SLOTS_MAX];
  gbFlag_t inRead[GB_REDUCE_MAX_SRCS][GB_STAGE_SLOTS_MAX];
  /* The exchange's full flags to this member (device.h's gbExchangeFlag
   * layout, GB_STAGE_EXCHANGE_BLOCKS per member), and its own stream's
   * marks: it began an exchange (for its proxy's watch), and its blocks
   * ended (for a later exchange on another stream). */
  gbFlag_t exchange[GB_REDUCE_MAX_SRCS][GB_STAGE_EXCHANGE_BLOCKS];
  gbFlag_t exchangeReady; /* the use my stream last began (my exchanges run in order, so it only grows) */
  gbFlag_t exchangeDone[GB_STAGE_EXCHANGE_BLOCKS]; /* my exchange's blocks ended (device.h's done) */
  atomic_int exchangeStop; /* my flags were released: every exchange wait of mine ends (device.h's stop) */
} gbSharedCtl_t;

/* Local flags, [flag][nslots] for the group's slots and [flag][member][p2pDepth]
 * for the channels. Group: staged (copy stream), full (proxy: every member
 * staged), consumed (stream: reduced), freed (proxy: every member read),
 * input (the caller's stream reached the call, or the chunk where the call
 * writes its input: the copy stream may copy it out), and fetched (the fetch
 * stream copied a member's part in). Channel to member k: input, staged, sent
 * (the proxy published it) and freed (k read the slot's last use); from
 * member k: arrived (k staged) and consumed. */
enum { FLAG_STAGED, FLAG_FULL, FLAG_CONSUMED, FLAG_FREED, FLAG_INPUT, FLAG_FETCHED, NFLAGS };
enum { P2P_INPUT, P2P_STAGED, P2P_SENT, P2P_FREED, P2P_ARRIVED, P2P_CONSUMED, NP2PFLAGS };

typedef struct gbSharedSlots {
  gbStageCtx_t ctx;
  int remote;          /* members on other hosts: base is this member's own copy of the layout */
  char* base;          /* the segment: a header page, a control area per member, the slots, the channels */
  char* devBase;       /* the device's address of base */
  size_t bytes;
  int n, me;
  const int* ranks;    /* the group's */
  const char* name;    /* the group's */
  int nslots;
  size_t slotBytes;    /* page-rounded */
  int pid[GB_REDUCE_MAX_SRCS];
  /* Caller thread: uses of each slot so far, the next slot. */
  uint64_t uses[GB_STAGE_SLOTS_MAX];
  size_t next;
  uint64_t inputSeq;   /* caller thread: the call (tag seq) whose caller's stream the copy stream last waited for */
  gbFlag_t* flags;     /* [NFLAGS][nslots], then [NP2PFLAGS][n][p2pDepth] */
  void* copyStream;    /* copies chunks out, beside the caller's stream (which reduces) */
  void* fetchStream;   /* a GPU's: copies the others' parts in (to scratch), beside both */
  uint64_t fetches[GB_STAGE_SLOTS_MAX];   /* caller thread: parts fetched into each slot's scratch so far */
  uint64_t fetchUse[GB_STAGE_SLOTS_MAX];  /* and the slot use they were last for */
  char* scratch;       /* device memory ([nslots][n][slotBytes]) the others' parts are copied to before a reduction,
                          made at the first part that needs it (gbSharedScratchBytes); never where device memory
                          is host memory. One per slot: a slot's uses are ordered (the freed flag), also between
                          calls on different streams, so its scratch is too. */
  int64_t counted;     /* bytes of the layout in the communicator's memory count (0: not counted) */
  int views;           /* stages (host groups, the channels) that use it */
  /* Send/recv channels (the world's segment only; p2pDepth 0: none): one per
   * ordered pair of members, p2pDepth slots of p2pBytes each. Caller thread:
   * uses of each channel so far, by direction. */
  int p2pDepth;
  size_t p2pBytes;
  uint64_t p2pSent[GB_REDUCE_MAX_SRCS], p2pGot[GB_REDUCE_MAX_SRCS];
  /* The exchange (stage/exchange.c; 0 bytes: none): two buffers of
   * exchangeBytes per member, used in turn. Caller thread: its uses so far. */
  size_t exchangeBytes;
  uint64_t exchangeUses;
  /* The last exchange's stream, the thread that queued it (CUDA's
   * per-thread stream is one handle for a stream per thread), and its thread
   * blocks (a GPU's: block b sets done[b], among others). */
  void* exchangeStream;
  pthread_t exchangeThread;
  int exchangeGrid;
  const gbNetOps_t* net; /* remote: the group's transport, and its handle of the slots (NULL: not registered) */
  void* netMem;
} gbSharedSlots_t;

/* A stage over the slots: a host group's (shared or remote ops), or the
 * world's channels. */
typedef struct {
  gbStage_t base;
  gbSharedSlots_t* sh;
} gbSlotsView_t;

static inline gbSharedSlots_t* gbSlotsOf(const gbStage_t* st) { return ((const gbSlotsView_t*)st)->sh; }

extern const gbStageOps_t gbStageSharedOps, gbStageRemoteOps, gbStageChannelOps, gbStageExchangeOps;
/* A new view of sh with ops over group g (sh->views counts it). */
gbResult_t gbSlotsViewCreate(gbSharedSlots_t* sh, const gbStageOps_t* ops, gbAlgoGroup_t* g, gbStage_t** out);
/* Releases a view; the last one unregisters and unmaps sh. */
void gbSlotsViewDestroy(gbStage_t* st);
/* Tells sh's members why this member failed. */
void gbSlotsFail(gbStage_t* st, const gbNetCause_t* cause);

gbSharedCtl_t* gbSharedCtl(const gbSharedSlots_t* sh, int member);
/* The local flags sh keeps, and its scratch's bytes. */
static inline size_t gbSharedFlagCount(const gbSharedSlots_t* sh) {
  return NFLAGS * (size_t)sh->nslots + NP2PFLAGS * (size_t)sh->n * (size_t)sh->p2pDepth;
}
static inline size_t gbSharedScratchBytes(const gbSharedSlots_t* sh) {
  return (size_t)sh->nslots * (size_t)sh->n * sh->slotBytes;
}
/* b rounded up to whole pages; the bytes of sh's layout (its fields set). */
size_t gbSharedRoundPage(size_t b);
size_t gbSharedLayoutBytes(const gbSharedSlots_t* sh);
gbFlag_t* gbSharedFlag(const gbSharedSlots_t* sh, int which, size_t slot);
gbFlag_t* gbSharedP2pFlag(const gbSharedSlots_t* sh, int which, int member, size_t slot);
/* Member k's part of slot `slot`: its host address, and the device's. */
char* gbSharedAt(const gbSharedSlots_t* sh, int member, size_t slot);
const char* gbSharedDeviceAt(const gbSharedSlots_t* sh, int member, size_t slot);
/* Slot `slot` of the channel from member `from` to member `to`: its host address. */
char* gbSharedP2pAt(const gbSharedSlots_t* sh, int from, int to, size_t slot);
/* The device's address of a host address in the segment (one mapped range). */
static inline void* gbSharedDevOf(const gbSharedSlots_t* sh, const void* host) {
  return sh->devBase + ((const char*)host - sh->base);
}
/* Member k's exchange buffer for a use (the two alternate): its offset from base. */
size_t gbSharedExchangeOffset(const gbSharedSlots_t* sh, int member, uint64_t use);

/* A proxy step on counters in the segment: publish *publish = use (NULL:
 * nothing), then wait until every counter in wait[] reached use, each
 * member `who[i]`'s, with the collective's deadline, hearing a member that
 * failed or died. Then group (NULL: none) counts bytes as sent. `what`
 * says what is awaited ("to stage"), for messages. watch: the counters are
 * this member's signals, which its streams wait on themselves; when the
 * step fails or never runs, it releases them (gbSharedRelease). A watch is
 * the proxy's (gbProxyOp_t.watch): each run looks once and says
 * gbInProgress while a counter is short, its deadline counted from the
 * first; any other step waits in its run. */
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
  int watch;
  int passed;          /* set by the step when every counter arrived */
  int looks;           /* how often it looked (0: it has not begun) */
  int64_t start;       /* when it began (ns) */
  int span;            /* each wait[i] is the first of span counters a gbFlag_t apart (0: one) */
} gbSharedStep_t;

/* Posts step (copied) as a proxy call with the walker's tag: it starts once
 * ready reaches readyValue (NULL: at once) and sets done to doneValue after. */
gbResult_t gbSharedPostStep(const gbSharedStep_t* step, const gbProxyOp_t* tag, gbFlag_t* ready,
                            uint64_t readyValue, gbFlag_t* done, uint64_t doneValue);

/* Shared slots' signals (SIGNAL_FULL: staged, SIGNAL_READ: read), on a
 * stream: Signal tells every other member that this member reached `use` of
 * slot; Await makes the stream wait until every other member did. Release
 * lets every wait on this member's signals go, now and later, with error
 * for a host device's stream (a GPU sees only the value): after a failure,
 * nothing of a stream may wait for a member that will not come. */
enum { SIGNAL_FULL, SIGNAL_READ };
gbResult_t gbSharedSignal(const gbSharedSlots_t* sh, int which, size_t slot, uint64_t use, void* stream);
gbResult_t gbSharedAwait(const gbSharedSlots_t* sh, int which, size_t slot, uint64_t use, void* stream);
void gbSharedRelease(const gbSharedSlots_t* sh, gbResult_t error);
/* Posts the proxy's watch of this member's signals for use of slot (which):
 * it starts when the stream set ready to use (a local flag), and sets done. */
gbResult_t gbSharedPostWatch(gbSharedSlots_t* sh, const gbProxyOp_t* tag, int which, size_t slot, uint64_t use,
                             uint64_t bytes, gbFlag_t* ready, gbFlag_t* done);

/* Remote: the moves of a staged chunk (slots_remote.c). */
gbResult_t gbSharedPostMoves(gbStage_t* st, const gbStageWork_t* w, const gbStageSlot_t* s, const gbProxyOp_t* tag);
/* Remote, on the host device, uncompressed, over a transport that moves any
 * memory as it is (no memRegister: TCP): my part leaves straight from my
 * input, which is host memory, and is never copied into my slot (a CPU copy
 * for nothing; the staged flag still orders the send after the input). */
static inline int gbSharedSendsInput(const gbSharedSlots_t* sh, const gbStageWork_t* w) {
  return sh->remote && sh->ctx.dev->hostMemory && w->wire == GB_WIRE_PLAIN && sh->net && !sh->net->memRegister;
}
/* Whether a part holds a block for each member (reduce-scatter, all-to-all). */
static inline int gbSharedBlockPerMember(gbColl_t coll) {
  return coll == GB_COLL_REDUCESCATTER || coll == GB_COLL_ALLTOALL;
}
/* Which members' parts member k needs of member from's (the whole part, or its block k). */
int gbSharedNeeds(const gbStageWork_t* w, int k, int from);

#endif
