/* The communicator: its topology, settings, connections, island, stages,
 * proxy thread, and error state. */
#ifndef GB_CORE_COMM_H
#define GB_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>

#include "algo/algo.h"
#include "boot/probe.h"
#include "boot/topology.h"
#include "boot/uniqueid.h"
#include "device/device.h"
#include "island/island.h"
#include "net/net.h"
#include "plan/thresholds.h"
#include "proxy/proxy.h"
#include "stage/stage.h"

#define GB_COMM_MAGIC 0x67624361u /* "gbCa" */
#define GB_COMM_DEAD 0xdeadbeefu

struct gbTrace;
struct gbTraceEntry;

enum { GB_TAG_WORLD = 1, GB_TAG_ISLAND = 2, GB_TAG_BRIDGE = 3 };
enum { GB_INIT_RUNNING = 0, GB_INIT_DONE = 1, GB_INIT_FAILED = 2 };

/* A host group and its connections. */
typedef struct {
  char name[48];
  int* ranks;
  gbNetConn_t** conns;
  gbAlgoGroup_t algo;
  int active;
  int borrowed;  /* conns belong to another group (rails use the world's) */
  gbStage_t* stages[GB_NUM_STAGES]; /* by plan/'s gbPlanStage_t: the private stage, and the group's shared or
                                       remote slots where it has them (stage/stage.h) */
} gbCommGroup_t;

/* The host copy of a PreMulSum op's scalar (core/redop.c). Work queued
 * before the op's destroy may still read it (NCCL lets an op go once the
 * calls using it are queued), so the cell of an op that was used is reused
 * only after the proxy has passed the destroy; teardown frees them all. */
typedef struct gbCommCell {
  void* mem;                    /* 16 bytes of device-reachable host memory */
  struct gbComm* comm;
  struct gbCommCell* next;      /* every cell of the communicator */
  struct gbCommCell* nextFree;  /* on cellsFree or cellsReleased */
} gbCommCell_t;

/* A PreMulSum op of this communicator (gbRedOpCreatePreMulSum). */
typedef struct {
  int used;
  int resolved;        /* a call was given it: queued work may read its cell */
  gbDataType_t dtype;
  int residence;       /* gbScalarResidence_t */
  void* scalar;        /* the caller's scalar (device residence: read when the call runs) */
  gbCommCell_t* cell;  /* its host copy, which the proxy scales with */
  void* hostCell;      /* cell->mem */
  gbRedOp_t islandOp;  /* the island's own op for it */
} gbCommRedOp_t;
#define GB_COMM_MAX_REDOPS 64

struct gbComm {
  uint32_t magic;
  int rank, nranks;
  gbSettings_t settings;
  int blocking;
  int policy;               /* auto resolved for this topology */
  gbBootId_t id;
  gbTopo_t topo;
  gbTopology_t pub;
  const gbDeviceOps* dev;
  const gbNetOps_t* net;
  gbNetListener_t* listener;
  gbSockAddr_t* peerAddrs;  /* [nranks] every rank's listener, from the rendezvous (NULL before it) */
  gbCommGroup_t world, island, bridge;
  gbCommGroup_t* rails;     /* [nrails] split-rail links over the world's connections */
  int nrails;
  int myRail;               /* my rail (island index), or -1 */
  gbIsland_t* islandComm;
  gbThresholds_t thresholds; /* policy tuned */
  gbCommRedOp_t redops[GB_COMM_MAX_REDOPS];
  gbCommCell_t* cells;      /* every PreMulSum scalar cell (teardown frees them) */
  gbCommCell_t* cellsFree;  /* reusable now (caller thread) */
  gbCommCell_t* _Atomic cellsReleased; /* reusable, handed back by the proxy (atomic push; the caller takes them all) */
  gbStageCtx_t stageCtx;    /* what every stage of this comm is given */
  gbStagePool_t* pool;      /* the private stages' slots */
  gbStageMemory_t memory;   /* what the stages hold (gbCommGetMemory) */
  gbStage_t* p2p[2];        /* send/recv's host part: [0] bulk, [1] the world's channels (NULL: none) */
  gbFlag_t* checked;        /* proxy -> streams: the first `value` call checks passed */
  uint64_t checksPosted;
  uint64_t p2pSeq;          /* send/recv groups enqueued (for messages) */
  int localRank;            /* as given to init (the device it chose) */
  gbConfig_t config;        /* as given to init (gbCommSplit inherits it) */
  int hasConfig;
  gbProxy_t* proxy;
  void* scratchDev;         /* a small device buffer for gbBarrier */
  gbFlag_t* streamDone;     /* collectives whose stream work ran or was dropped */
  uint64_t streamPosted;    /* collectives enqueued on streams */
  uint64_t seq;             /* collectives enqueued */

  atomic_int abortFlag;
  atomic_int callsInFlight;       /* threads inside calls on it (gbCommEnter; teardown waits for them) */
  atomic_int asyncError;       /* gbResult_t; first failure wins: gbCommAsyncError, set with errorLock held */
  atomic_int initState;
  pthread_t initThread;
  int initThreadStarted;
  pthread_mutex_t errorLock;
  char errorText[1024];
  gbNetCause_t cause;       /* told to peers with the shutdown: who failed first (lifecycle.c) */
  int64_t failWallNs;       /* CLOCK_REALTIME ns of the first failure (errorLock) */

  struct gbTrace* trace;    /* the flight recorder (trace/trace.h, core/trace.h); NULL when off */
};

/* Records the comm's first asynchronous failure, makes every wait of the comm
 * return, and closes its connections so peers fail fast instead of timing out. */
void gbCommFail(gbComm_t comm, gbResult_t res);
/* As gbCommFail; the first failure also writes the flight recorder's dump
 * (GPUBRIDGE_TRACE_DIR) with reason why (NULL: from res and the cause). */
void gbCommFailFor(gbComm_t comm, gbResult_t res, const char* why);
/* A failed start-up, on its thread, once recorded: shuts the connections made
 * so far down with the cause and fails the listener, as gbCommFail does once
 * start-up ended (lifecycle.c). */
void gbCommInitFailTell(gbComm_t comm);
/* After gbCommInitFailTell: tells the ranks that wait for this rank's
 * connection; then, when the failure names a peer, for a short grace asks
 * the peer it blames for a stall for its own verdict (and reports the rank
 * that names) and stays, so that peers can ask this rank (blame.c). */
void gbCommInitFailAsk(gbComm_t comm);

/* The registry of live communicators (core/registry.c). A handle is valid
 * from gbCommRegister (gbCommAlloc) to gbCommUnregister (the start of
 * gbCommFree); gbCommEnter reads nothing at an address it does not hold,
 * so a destroyed or never-made handle is refused, never dereferenced.
 * gbCommRelease frees a communicator's memory after a few later frees, so
 * that a new communicator does not take a just-destroyed one's address. */
gbResult_t gbCommRegister(gbComm_t comm);
/* 1 when this call took comm out of the registry, 0 when it was not there
 * (another thread's teardown took it): of two teardowns, one runs. */
int gbCommUnregister(gbComm_t comm);
/* A call begins on comm: 1 (counted in callsInFlight, atomically with the
 * check of the registry) when comm is live, else 0. gbCommLeave ends it.
 * gbCommFree waits for every call to leave before it frees anything. */
int gbCommEnter(gbComm_t comm);
void gbCommLeave(gbComm_t comm);
void gbCommRelease(gbComm_t comm);

/* Where start-up is (GB_INIT_*), read with acquire: a thread that sees
 * GB_INIT_DONE also sees everything init built (core/state.c). */
int gbCommInitState(gbComm_t comm);
/* The end of start-up with res: a failure becomes the first failure (unless
 * an abort's came first), then the state turns done or failed (release). */
void gbCommInitEnd(gbComm_t comm, gbResult_t res);
/* The first failure's text ("" before one); written once (a failed start-up
 * may still rewrite it before its state says so, blame.c), so it stays while
 * comm lives. */
const char* gbCommErrorText(gbComm_t comm);
/* The same text, read under errorLock: NULL unless comm failed with one and
 * is not starting up. */
const char* gbCommFailureText(gbComm_t comm);
/* Waits, within the comm's timeout, until every host step posted to its
 * proxy ran (inside gbCommFinalize's counted call: an abort waits for it).
 * A failure leaves the comm's first failure as the thread's error. */
gbResult_t gbCommDrain(gbComm_t comm);

/* Init: the whole start-up (probe, rendezvous, mesh, island, staging, proxy). */
gbResult_t gbCommInitCore(gbComm_t comm, int nranks, const gbBootId_t* id, int rank, int localRank,
                          const gbConfig_t* config);
/* Allocates a comm in state "initializing" (so abort works during init). */
gbResult_t gbCommAlloc(gbComm_t* out);
/* Releases everything; waits (bounded) for the streams the comm used. */
void gbCommFree(gbComm_t comm);

/* Schedules (core/enqueue*.c). */
/* Island and host ops for a reduction op (PreMulSum resolved). */
typedef struct {
  gbRedOp_t island;   /* op the island uses for the collective itself */
  gbRedOp_t partial;  /* op of an island step that feeds the bridge (avg -> sum) */
  gbRedOp_t host;     /* op of the host step (sum, prod, max, min) */
  int divisor;        /* avg: divide once by the world size */
  const void* scale;  /* PreMulSum on flat: scale every contribution by this host cell */
  const gbCommRedOp_t* premul;
} gbCommOps_t;
/* Resolves op once per call, as the walker enqueues it (a PreMulSum op is
 * marked used: queued work may read its cell). */
gbResult_t gbCommResolveOp(gbComm_t comm, gbRedOp_t op, gbDataType_t dt, gbCommOps_t* out);
/* Whether op is dt's op of this communicator (the argument check; resolves nothing). */
gbResult_t gbCommCheckOp(gbComm_t comm, gbRedOp_t op, gbDataType_t dt);
gbResult_t gbCommRedOpCreate(gbComm_t comm, void* scalar, gbDataType_t dt, int residence, gbRedOp_t* op);
gbResult_t gbCommRedOpDestroy(gbComm_t comm, gbRedOp_t op);
/* device residence: enqueue the copy of the scalar into its host cell. */
gbResult_t gbCommStageScalar(gbComm_t comm, const gbCommOps_t* ops, void* stream);

gbResult_t gbCommEnqueueAllReduce(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  gbRedOp_t op, void* stream);
gbResult_t gbCommEnqueueBroadcast(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  int root, void* stream);
/* gbBarrier: a sum of one int32 in the communicator's scratch, which the
 * call check names as a barrier. */
gbResult_t gbCommEnqueueBarrier(gbComm_t comm, void* stream);
gbResult_t gbCommEnqueueReduce(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                               gbRedOp_t op, int root, void* stream);
gbResult_t gbCommEnqueueAllGather(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  void* stream);
gbResult_t gbCommEnqueueReduceScatter(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                      gbRedOp_t op, void* stream);
gbResult_t gbCommEnqueueAllToAll(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                 void* stream);

/* One send or receive of a group; peer is a global rank. */
typedef struct {
  int peer;
  int isSend;
  void* buf;
  size_t count;
  gbDataType_t dt;
  void* stream;
} gbCommP2p_t;
/* A send/recv group of this comm (all ops on one stream). */
gbResult_t gbCommEnqueueSendRecv(gbComm_t comm, const gbCommP2p_t* ops, int nops, void* stream);

/* The call check (core/check.c): posts, on the proxy, the comparison of this
 * call with every rank's (GPUBRIDGE_CHECK_CALLS), and makes the stream wait
 * for its verdict before any island step. No-op when checks are off. */
typedef struct {
  int coll;       /* gbColl_t */
  uint64_t count;
  int dtype, op, root;
  int barrier;    /* gbBarrier's all-reduce: the check names it "barrier" */
} gbCommCall_t;
gbResult_t gbCommCheckCall(gbComm_t comm, const gbCommCall_t* call, void* stream);
/* Whether calls of comm take part in the call check. */
int gbCommChecking(gbComm_t comm);
gbResult_t gbCommCheckSendRecv(gbComm_t comm, const gbCommP2p_t* ops, int nops, void* stream);

/* gbCommSplit's exchanges over the parent (core/split.c), each an
 * all-gather on the parent's proxy, waited for by the caller. First: my
 * rank and size in my color's child (0 with GB_SPLIT_NOCOLOR), and whether
 * I am its first rank (which makes the child's unique id). Then: the id
 * travels from each color's first rank to the rest of the color. */
gbResult_t gbCommSplitRanks(gbComm_t parent, int color, int key, int* newRank, int* newN, int* first);
gbResult_t gbCommSplitShareId(gbComm_t parent, int color, int first, const gbUniqueId* mine, gbUniqueId* out);

/* Which slots group g has beyond its private stage: shared, remote, or
 * none (GB_STAGE_PRIVATE). */
static inline gbPlanStage_t gbCommGroupSlots(const gbCommGroup_t* g) {
  if (g->stages[GB_STAGE_SHARED]) return GB_STAGE_SHARED;
  return g->stages[GB_STAGE_REMOTE] ? GB_STAGE_REMOTE : GB_STAGE_PRIVATE;
}
/* The largest all-reduce g's exchange takes (0: it has none). */
static inline size_t gbCommGroupExchangeBytes(const gbCommGroup_t* g) {
  return g->stages[GB_STAGE_EXCHANGE] ? GB_PLAN_EXCHANGE_BYTES : 0;
}

/* The stages (core/stages.c): set up (collective over each group, during
 * init, once the proxy runs), told this rank failed, freed at teardown. */
gbResult_t gbCommStagesSetup(gbComm_t comm, const gbProbe_t* probes);
/* What a rank of `ranks` on one host in two islands would hold for staging
 * under the current settings, on a GPU or simulated (gbGetMemoryEstimate):
 * segmentBytes the segments it maps, deviceBytes the most scratch they make,
 * pinnedBytes the private slots a call that takes them makes. */
gbResult_t gbCommMemoryEstimate(int ranks, int gpu, gbCommMemory_t* out);
void gbCommStagesFail(gbComm_t comm);
void gbCommStagesFree(gbComm_t comm);

/* Zeroes n flags of comm and gives them its timeout, so that a stream's wait
 * for one is bounded by the collective's deadline (gbFlagStreamWaitSec). */
void gbCommFlagsInit(gbComm_t comm, gbFlag_t* flags, size_t n);
/* Counts the end of one collective's stream work (teardown waits for it)
 * and, with record, stamps its flight-recorder record done there. */
gbResult_t gbCommMarkStreamWork(gbComm_t comm, void* stream, struct gbTraceEntry* record);
/* Chunks software-pipelined over `depth` slots: front(k) stages chunk k out,
 * back(k) takes it back in, back(k) after front(k + depth - 1). */
gbResult_t gbCommPipeline(size_t nchunks, int depth, gbResult_t (*front)(void* arg, size_t k),
                          gbResult_t (*back)(void* arg, size_t k), void* arg);
/* The end of every enqueue: res, after marking the stream work when
 * anything was queued, and failing the comm when a queued call failed. */
gbResult_t gbCommEnqueueEnd(gbComm_t comm, void* stream, int queued, gbResult_t res);
/* A count-0 collective: a no-op (as NCCL) unless the call check is on; then
 * it takes part in the check like any call (enqueue_walk.c). */
gbResult_t gbCommEnqueueEmpty(gbComm_t comm, const gbCommCall_t* call, void* stream);

/* The first failure, read without the lock from any thread. Acquire pairs
 * with the release in gbCommSetAsyncError: a reader that sees a failure also
 * sees its whole errorText, which is written before. */
static inline gbResult_t gbCommAsyncError(gbComm_t comm) {
  return (gbResult_t)atomic_load_explicit(&comm->asyncError, memory_order_acquire);
}
/* Records res as the first failure (errorLock held): the text, then the code. */
static inline void gbCommSetAsyncError(gbComm_t comm, gbResult_t res, const char* text) {
  snprintf(comm->errorText, sizeof(comm->errorText), "%s", text);
  atomic_store_explicit(&comm->asyncError, (int)res, memory_order_release);
}

#endif
