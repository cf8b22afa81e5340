/* A chunk's way through staging: one interface, several backends.
 *
 * A walker (core/) hands a backend one chunk's work at a time, described
 * whole (gbStageWork_t: what this rank gives, where the result goes, the
 * host reduction); the backend takes a slot, stages the chunk out, posts
 * the host step on the proxy, and later brings the result in and releases
 * the slot. How the bytes lie in host memory (its wire format), which
 * streams copy them and what the proxy does are the backend's alone, so a
 * walker has no staging branches and a codec or a GPU-driven path is a
 * backend or a backend option.
 *
 * Backends (stage/README.md says what each must provide):
 *  - private: this communicator's own slots; the proxy runs the host
 *    collective (algo/) over the group's transport (stage/private.c);
 *  - shared: slots in one segment every member of a host group on this host
 *    maps; the proxy moves counters only (stage/slots*.c);
 *  - remote: the same layout in each member's own registered memory across
 *    hosts; the proxy moves the parts over the group's transport;
 *  - channels: send/recv through per-pair channels in the world's segment
 *    (stage/channels.c);
 *  - bulk: send/recv through one growable host buffer and one host step
 *    (stage/bulk.c);
 *  - exchange: a small all-reduce over shared slots that the stream drives
 *    alone: one kernel (one stream task on the host device) stages my part,
 *    waits for the members' and reduces them, with flags between members'
 *    streams and no host thread between them (stage/exchange.c).
 * A backend is given a small context (gbStageCtx_t), never the communicator. */
#ifndef GB_STAGE_STAGE_H
#define GB_STAGE_STAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"
#include "device/device.h"
#include "net/net.h"
#include "plan/p2p.h"
#include "plan/plan.h"
#include "proxy/proxy.h"

/* The memory a communicator's stages hold (gbCommGetMemory): pinned host
 * memory of this rank's own, shared segments it maps and registers, device
 * memory. Each stage allocates as its path first runs and counts here. */
typedef struct {
  _Atomic uint64_t pinned, segment, device;
} gbStageMemory_t;
enum { GB_STAGE_MEM_PINNED, GB_STAGE_MEM_SEGMENT, GB_STAGE_MEM_DEVICE };

/* What every backend works with. */
typedef struct {
  const gbDeviceOps* dev;
  gbProxy_t* proxy;
  double timeoutSec;             /* each host step's deadline */
  const atomic_int* abortFlag;   /* the communicator's */
  int64_t pollNs;                /* a host wait's longest sleep between looks (0: by the wait): a GPU's write wakes
                                    nobody */
  gbStageMemory_t* memory;       /* the communicator's count (NULL: none kept) */
} gbStageCtx_t;

/* Counts bytes (negative: freed) of a kind of memory in ctx's count. */
void gbStageMemoryAdd(const gbStageCtx_t* ctx, int kind, int64_t bytes);

/* Zeroes n flags and gives them the context's deadline and poll cap, so a
 * stream's wait for one is bounded by the collective's deadline. */
void gbStageFlagsInit(const gbStageCtx_t* ctx, gbFlag_t* flags, size_t n);

/* One chunk of a collective, as this rank takes part in it: a tagged union
 * in the manner of an executor's task arguments, tagged by coll.
 *  all-reduce, broadcast, reduce: src holds this rank's len elements (read
 *    only with stageOut), dst receives the result (written only with stageIn);
 *  all-gather: src holds my block of the chunk; dst + r * dstStride receives
 *    member r's;
 *  reduce-scatter, all-to-all: src + r * srcStride holds my block for member
 *    r; dst receives my reduced block (reduce-scatter), dst + r * dstStride
 *    member r's block for me (all-to-all). */
typedef struct {
  gbColl_t coll;
  gbDataType_t dtype;
  size_t esize;
  size_t len;            /* elements: of the chunk, or of each block */
  const char* src;
  char* dst;
  size_t srcStride, dstStride; /* bytes between blocks */
  int stageOut, stageIn; /* this rank gives its part, takes the result (plan) */
  int root;              /* broadcast, reduce: member index in the host group */
  gbRedOp_t op;          /* the host reduction: sum, prod, max or min */
  int divisor;           /* avg: divide the finished sum by this (0: none) */
  const void* scale;     /* PreMulSum: the proxy scales my contribution by this host cell first (NULL: none) */
  int direct;            /* host memory: the proxy works in dst and reads src where it is (private) */
  size_t hostChunk;      /* > 0: the proxy reduces len elements as back-to-back chunks of this many (private) */
  int wire;              /* the parts' wire format (plan.wire, base/wire.h; all-reduce, reduce-scatter) */
  int inputReady;        /* src was ready when the call began (not chunk 0; no step of the call writes it): a side
                            stream that waited for the caller's stream in this call need not wait again */
} gbStageWork_t;

/* The slot a chunk took, between out and in (the walker keeps it). */
typedef struct {
  size_t slot;
  uint64_t use;          /* of that slot, from 1 */
  char* buf;             /* this member's part of it (host address) */
  void* on;              /* the stream that copies it out */
  uint64_t seq;          /* the call's sequence number (for the later steps' messages) */
  int queued;            /* out put work on a stream (a failure after it leaves the call half queued) */
} gbStageSlot_t;

/* A send/recv group's host part as a backend carries it out: plan/p2p.c's
 * schedule and the messages' buffers (bufs[i] of plan->ops[i]). */
typedef struct {
  const gbPlanP2p_t* plan;
  void* const* bufs;
  void* stream;
  gbProxyOp_t tag;       /* the walker's fields of every proxy step (sequence, group, record); chunk counts up */
  gbStageSlot_t lastSent[GB_PLAN_P2P_MAX_PEERS]; /* channels: each peer's last chunk out */
} gbStageP2p_t;

typedef struct gbStage gbStage_t;

typedef struct {
  const char* name;      /* "private", "shared", "remote", "channels", "bulk" */
  gbPlanStage_t kind;    /* the plan's name for it (send/recv's: GB_NUM_STAGES) */
  /* Collectives (private, shared, remote). out: take the next slot, stage
   * my part of w into it, post the host step (tag: the walker's proxy
   * fields). in: wait for the host step, copy or reduce the result into w's
   * dst, release the slot. A member that gives or takes nothing still
   * takes both steps. */
  gbResult_t (*out)(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag, gbStageSlot_t* s);
  gbResult_t (*in)(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbStageSlot_t* s);
  /* Send/recv (channels, bulk): chunk k of every stream out, then in; end:
   * the caller's stream waits until the send buffers are the caller's again. */
  gbResult_t (*p2pOut)(gbStage_t* st, gbStageP2p_t* g, size_t k);
  gbResult_t (*p2pIn)(gbStage_t* st, gbStageP2p_t* g, size_t k);
  gbResult_t (*p2pEnd)(gbStage_t* st, gbStageP2p_t* g);
  /* This member failed: tell the others that wait on it (cause: why). */
  void (*fail)(gbStage_t* st, const gbNetCause_t* cause);
  /* Releases everything, once no stream or proxy step uses it. */
  void (*destroy)(gbStage_t* st);
} gbStageOps_t;

/* Every backend's state begins with this. */
struct gbStage {
  const gbStageOps_t* ops;
  gbStageCtx_t ctx;
  gbAlgoGroup_t* group;  /* the host group it serves (its transport, its traffic counter) */
};

/* ------------------------------------------------------------ backends */

/* The private slots: nslots slots of slotBytes in this member's host memory,
 * shared by every private stage of one communicator (they take slots in the
 * one order of its calls). */
typedef struct gbStagePool gbStagePool_t;
gbResult_t gbStagePoolCreate(const gbStageCtx_t* ctx, int nslots, size_t slotBytes, gbStagePool_t** out);
void gbStagePoolDestroy(gbStagePool_t* pool);
size_t gbStagePoolSlotBytes(const gbStagePool_t* pool);
/* A private stage over group g: the proxy runs the host collective. */
gbResult_t gbStagePrivateCreate(const gbStageCtx_t* ctx, gbStagePool_t* pool, gbAlgoGroup_t* g, gbStage_t** out);

/* The send/recv bulk buffer over g (grown on demand). */
gbResult_t gbStageBulkCreate(const gbStageCtx_t* ctx, gbAlgoGroup_t* g, gbStage_t** out);

/* Shared or remote slots of a host group, set up collectively (stage/slots_setup.c). */
typedef struct {
  gbAlgoGroup_t* group;  /* its members, in order; collective set-up over it */
  const int* pids;       /* [n] each member's process id (shared: liveness) */
  const uint64_t* hostIds; /* [n] each member's host */
  int nslots;            /* slots: pipeline depth + 2 */
  size_t slotBytes;      /* a chunk */
  int channels;          /* also hold the send/recv channels (the world's) */
  size_t channelBudget;  /* bytes all channels may take together */
  int enabled;           /* GPUBRIDGE_BRIDGE_SLOTS allows them */
  size_t exchangeBytes;  /* on one host: each member's exchange buffers (two of this; 0: no exchange) */
} gbStageSlotsSpec_t;
/* Sets up spec's slots: shared when every member is on this host and the
 * group has 2..GB_REDUCE_MAX_SRCS members, remote when not and it has
 * 2..GB_STAGE_REMOTE_MAX; *out stays NULL otherwise, or when any member
 * cannot map or register its memory (every member agrees; the group then
 * keeps the private stage). */
gbResult_t gbStageSlotsSetup(const gbStageCtx_t* ctx, const gbStageSlotsSpec_t* spec, gbStage_t** out);
/* The same slots for another host group g when it has exactly their
 * members in their order (every member takes them in the one order of its
 * calls); *out NULL when it has not. */
gbResult_t gbStageSlotsShare(gbStage_t* slots, gbAlgoGroup_t* g, gbStage_t** out);
/* The bytes of the segment gbStageSlotsSetup would make for a group of n
 * members on one host with spec's sizes (its group unused). */
size_t gbStageSlotsLayoutBytes(const gbStageSlotsSpec_t* spec, int n);
/* The exchange over shared slots for host group g (slots' own group or one
 * that shares them; *out NULL: they have no exchange buffers). */
gbResult_t gbStageExchange(gbStage_t* slots, gbAlgoGroup_t* g, gbStage_t** out);
/* The send/recv channels in the same segment (*out NULL: it has none). */
gbResult_t gbStageChannels(gbStage_t* slots, gbStage_t** out);
/* The channels' chunk bytes and depth (plan/p2p.c's facts). */
size_t gbStageChannelBytes(const gbStage_t* channels);
int gbStageChannelDepth(const gbStage_t* channels);

/* Across hosts a member sends its part to each member that needs it (an
 * all-reduce: to every member), where a ring sends 2(n-1)/n parts: from 5
 * members on the ring sends less than half, and the private stage keeps
 * such groups. */
#define GB_STAGE_REMOTE_MAX 4

/* ------------------------------------------------------ the wire format
 * (stage/codec.c) How a reduction's parts lie in the slots, for every
 * backend: as they are (GB_WIRE_PLAIN), or compressed (w->wire): each
 * member encodes its part on its way out (its own part too, so every member
 * folds the same values) and the fold decodes them all. */

/* The bytes one part (a block, for reduce-scatter) of w takes in a slot. */
size_t gbStageWireBytes(const gbStageWork_t* w);
/* w->len elements at src (the device's) into a slot at dst (host address;
 * dstDev: the device's address of it), on stream: a copy, or the encoder. */
gbResult_t gbStageCodecOut(const gbStageCtx_t* ctx, const gbStageWork_t* w, void* dst, void* dstDev, const void* src,
                           void* stream);
/* w->dst = the fold of the n parts (device addresses; a plain part may be
 * the caller's input) in w's op and order (ring: the host ring's, plain
 * parts only), on stream: the reduction, or the decoding fold. */
gbResult_t gbStageCodecFold(const gbStageCtx_t* ctx, const gbStageWork_t* w, const void* const* parts, int n,
                            int ring, void* stream);

/* Dispatch, for readers of walkers. */
static inline gbResult_t gbStageOut(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbProxyOp_t* tag,
                                    gbStageSlot_t* s) {
  return st->ops->out(st, w, stream, tag, s);
}
static inline gbResult_t gbStageIn(gbStage_t* st, const gbStageWork_t* w, void* stream, const gbStageSlot_t* s) {
  return st->ops->in(st, w, stream, s);
}
static inline void gbStageFail(gbStage_t* st, const gbNetCause_t* cause) {
  if (st && st->ops->fail) st->ops->fail(st, cause);
}
static inline void gbStageDestroy(gbStage_t* st) {
  if (st) st->ops->destroy(st);
}

/* Posts fn(arg) on the context's proxy as one step with the walker's tag:
 * it starts once ready reaches readyValue (NULL: at once) and sets done to
 * doneValue after. Takes arg (freeArg frees it after the step); when the
 * post fails arg stays the caller's. */
gbResult_t gbStagePost(const gbStageCtx_t* ctx, const gbProxyOp_t* tag, gbResult_t (*fn)(void*), void* arg,
                       void (*freeArg)(void*), gbFlag_t* ready, uint64_t readyValue, gbFlag_t* done,
                       uint64_t doneValue);

/* Posts one step that runs list (n sends and receives over g, as
 * gbAlgoSendRecv) with the walker's tag, between ready and done as
 * gbStagePost. Takes list, also when it fails. */
gbResult_t gbStagePostMoves(const gbStageCtx_t* ctx, const gbProxyOp_t* tag, gbAlgoGroup_t* g, gbAlgoP2p_t* list,
                            int n, gbFlag_t* ready, uint64_t readyValue, gbFlag_t* done, uint64_t doneValue);

/* Where member r's block of w lies in my input (all-gather: my one block). */
static inline const char* gbStageMyBlock(const gbStageWork_t* w, int r) {
  return w->coll == GB_COLL_ALLGATHER ? w->src : w->src + (size_t)r * w->srcStride;
}

#endif
