/*
 * gpubridge: one collective-communication library for jobs that mix GPU vendors.
 *
 * The API is NCCL's under the prefix `gb`: same argument order, counts in
 * elements, streams as `void*` (a cudaStream_t, a hipStream_t, or a stream made
 * by gbStreamCreate), same in-place rules, same enum values. Porting is a rename.
 *
 * Threading: a communicator may be used by one thread at a time, except
 * gbCommAbort, gbCommGetAsyncError and the flight-recorder functions
 * (gbCommSetObserver .. gbCommDumpTrace), which may be called from any thread.
 *
 * Vendor-neutral: this header needs only <stddef.h> and <stdint.h> (and
 * gpubridge/version.h, generated from the file VERSION and installed next to it).
 *
 * Every function declared here, and nothing else, is exported by
 * libgpubridge.so: each declaration carries GB_API (tests/install checks it).
 */
#ifndef GPUBRIDGE_GPUBRIDGE_H
#define GPUBRIDGE_GPUBRIDGE_H

#include <stddef.h>
#include <stdint.h>

/* GB_MAJOR, GB_MINOR, GB_PATCH, GB_VERSION_STRING ("0.1.0") and
 * GB_VERSION_CODE (MAJOR * 10000 + MINOR * 100 + PATCH, NCCL's rule). */
#include "gpubridge/version.h"

/* The library is built with hidden visibility; GB_API exports a declaration. */
#if defined(__GNUC__) || defined(__clang__)
#define GB_API __attribute__((visibility("default")))
#else
#define GB_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ types */

/* An opaque communicator. */
typedef struct gbComm* gbComm_t;

#define GB_UNIQUE_ID_BYTES 128
/* Holds the rendezvous root's address and a random job secret. Made by one
 * process with gbGetUniqueId and handed to every rank out of band. */
typedef struct {
  char internal[GB_UNIQUE_ID_BYTES];
} gbUniqueId;

/* Result codes. 0..7 equal ncclResult_t's values; 8 equals ncclTimeout of
 * NCCL 2.30 and later (earlier NCCL has no timeout code). */
typedef enum {
  gbSuccess = 0,
  gbUnhandledCudaError = 1, /* a CUDA or HIP runtime call failed */
  gbSystemError = 2,        /* an OS call failed: socket, thread, memory */
  gbInternalError = 3,      /* a bug in gpubridge */
  gbInvalidArgument = 4,    /* a bad argument: the message says which */
  gbInvalidUsage = 5,       /* a call the communicator's state forbids */
  gbRemoteError = 6,        /* another rank failed or closed its connection */
  gbInProgress = 7,         /* non-blocking communicator: not finished yet */
  gbTimeout = 8,            /* a wait passed GPUBRIDGE_TIMEOUT */
  gbNumResults = 9
} gbResult_t;

/* Data types. Values equal ncclDataType_t's. */
typedef enum {
  gbInt8 = 0, gbChar = 0,
  gbUint8 = 1,
  gbInt32 = 2, gbInt = 2,
  gbUint32 = 3,
  gbInt64 = 4,
  gbUint64 = 5,
  gbFloat16 = 6, gbHalf = 6,
  gbFloat32 = 7, gbFloat = 7,
  gbFloat64 = 8, gbDouble = 8,
  gbBfloat16 = 9,
  gbFloat8e4m3 = 10, /* OCP FP8 E4M3 ("fn": no infinities, NaN 0x7f/0xff, max 448) */
  gbFloat8e5m2 = 11, /* OCP FP8 E5M2 (IEEE-like: infinities, max 57344) */
  gbNumTypes = 12
} gbDataType_t;

/* Reduction operations. Values equal ncclRedOp_t's. gbAvg is the sum divided
 * by the number of ranks; it needs a floating-point type. Values from
 * gbNumOps up are ops made by gbRedOpCreatePreMulSum for one communicator. */
typedef enum {
  gbSum = 0,
  gbProd = 1,
  gbMax = 2,
  gbMin = 3,
  gbAvg = 4,
  gbNumOps = 5,
  gbMaxRedOp = 0x7fffffff
} gbRedOp_t;

/* How a collective crosses vendor islands. */
typedef enum {
  gbPolicyAuto = 0,         /* measured rules: native (one island), flat (islands of one rank),
                               split-rail (large all-reduce), else hierarchical */
  gbPolicyHierarchical = 1, /* island reduce, bridge among leaders, island broadcast */
  gbPolicyNative = 2,       /* one island only: the vendor library alone */
  gbPolicyFlat = 3,         /* every rank stages to host; one host collective: the reference */
  gbPolicySplitRail = 4,    /* all-reduce: k bridge links carry 1/k of the bytes each */
  gbPolicyTuned = 5,        /* picks by the thresholds file GPUBRIDGE_THRESHOLDS */
  gbNumPolicies = 6
} gbPolicy_t;

/* Where a PreMulSum scalar lives. Values equal ncclScalarResidence_t's. */
typedef enum {
  gbScalarDevice = 0,        /* device memory, read when the collective runs */
  gbScalarHostImmediate = 1  /* host memory, read when the op is created */
} gbScalarResidence_t;

/* gbCommSplit's color for a rank that joins no new communicator. */
#define GB_SPLIT_NOCOLOR (-1)

/* The bridge's transport between hosts. */
typedef enum {
  gbTransportTcp = 0,
  gbTransportUcx = 1, /* UCX, loaded at run time (docs/UCX.md) */
  gbNumTransports = 2
} gbTransport_t;

/* Whether this rank's GPU is real or simulated on the host. */
typedef enum {
  gbRunReal = 0,      /* a real GPU and its vendor library */
  gbRunSimulated = 1, /* GPUBRIDGE_VENDOR: a simulated GPU on the host */
  gbRunCpu = 2        /* no GPU: a host island (plain CPU job) */
} gbRunKind_t;

/* How bridged floating-point all-reduces and reduce-scatters cross between
 * islands (gbConfig_t.bridgeCompression, GPUBRIDGE_BRIDGE_COMPRESSION):
 * as they are, or narrowed to bfloat16 (float32) or to fp8 e4m3 with a
 * power-of-two scale per 256 elements (float32, float16, bfloat16). Islands
 * keep full precision; every rank ends with the same bits, which differ
 * from the uncompressed sum within docs/REDUCTION_ORDER.md's bounds. */
typedef enum { gbCompressionOff = 0, gbCompressionBf16 = 1, gbCompressionFp8 = 2, gbNumCompressions = 3 } gbCompression_t;

/* The value of a gbConfig_t field left unset. */
#define GB_CONFIG_UNDEF_INT (-2147483647 - 1)
#define GB_CONFIG_MAGIC 0xcafebeefu

/* Communicator settings. Start from GB_CONFIG_INITIALIZER; a field left unset
 * takes its GPUBRIDGE_* environment variable, then the default.
 * Errors follow NCCL's rule: the config is an argument, so a malformed struct
 * (magic, size) or a field out of range (blocking not 0 or 1, policy not a
 * gbPolicy_t, transport not a gbTransport_t, timeoutSeconds below 1,
 * chunkBytes below 4096, bridgeCompression not a gbCompression_t) makes gbCommInitRankConfig and gbCommSplit return
 * gbInvalidArgument on the calling rank at once, before anything is started
 * or sent (as in NCCL, the other ranks then wait for it until their timeout).
 * An invalid GPUBRIDGE_* variable is judged at start-up instead, and every
 * rank fails with gbInvalidUsage naming the rank and the variable. */
typedef struct {
  size_t size;           /* sizeof(gbConfig_t) */
  unsigned int magic;    /* GB_CONFIG_MAGIC */
  unsigned int version;  /* GB_VERSION_CODE */
  int blocking;          /* 1 (default): init blocks; 0: init returns gbInProgress */
  int policy;            /* a gbPolicy_t; default GPUBRIDGE_POLICY */
  int transport;         /* a gbTransport_t; default GPUBRIDGE_TRANSPORT */
  int timeoutSeconds;    /* every wait's deadline; default GPUBRIDGE_TIMEOUT */
  int chunkBytes;        /* pipeline chunk of a bridged collective; default GPUBRIDGE_CHUNK_BYTES */
  int bridgeCompression; /* a gbCompression_t; default GPUBRIDGE_BRIDGE_COMPRESSION */
} gbConfig_t;

#define GB_CONFIG_INITIALIZER                                                  \
  {                                                                            \
    sizeof(gbConfig_t), GB_CONFIG_MAGIC, GB_VERSION_CODE, GB_CONFIG_UNDEF_INT, \
        GB_CONFIG_UNDEF_INT, GB_CONFIG_UNDEF_INT, GB_CONFIG_UNDEF_INT,         \
        GB_CONFIG_UNDEF_INT, GB_CONFIG_UNDEF_INT                               \
  }

/* The shape of a communicator. Arrays are owned by the communicator and valid
 * until it is destroyed. Islands are numbered in the order of their leaders'
 * ranks; an island's leader is its lowest rank. */
typedef struct {
  int nranks;
  int rank;
  int nislands;
  int island;                    /* this rank's island */
  int runKind;                   /* a gbRunKind_t, the same on every rank */
  int policy;                    /* the gbPolicy_t a large all-reduce runs: the configured one, with
                                    auto and tuned resolved for the largest sizes (split-rail where
                                    every island has 2+ ranks and
                                    GPUBRIDGE_RAILS allows 2+, else hierarchical, flat or native) */
  int splitTest;                 /* nonzero: a one-vendor job relabelled into islands, for testing only */
  const int* islandOfRank;       /* [nranks] */
  const int* leaderOfIsland;     /* [nislands] global rank of each island's leader */
  const int* islandSize;         /* [nislands] */
  const char* const* islandVendor; /* [nislands] "nvidia", "amd", "cpu", ... */
} gbTopology_t;

/* ---------------------------------------------------------- version, errors */

/* Writes GB_VERSION_CODE of the loaded library. */
GB_API gbResult_t gbGetVersion(int* version);

/* A short, static description of a result code. */
GB_API const char* gbGetErrorString(gbResult_t result);

/* The last error message this process recorded, with its cause and what to do;
 * "" if none. comm may be NULL. The text is valid until the next gpubridge call
 * on this thread. */
GB_API const char* gbGetLastError(gbComm_t comm);

/* ----------------------------------------------------------- communicators */

/* Makes a new unique id and starts, in this process, the rendezvous root that
 * serves the ranks which init with it. Call once per communicator, on one
 * process, and pass the bytes to every rank. Does not block. */
GB_API gbResult_t gbGetUniqueId(gbUniqueId* uniqueId);

/* Creates a communicator of nranks ranks; this process is `rank`. Collective:
 * every rank calls it with the same id and nranks. Blocks until every rank
 * joined and the root's one verdict arrived: either the topology, or an error
 * (the same text on every rank, see gbGetLastError) naming each rank at fault. */
GB_API gbResult_t gbCommInitRank(gbComm_t* comm, int nranks, gbUniqueId commId, int rank);

/* As gbCommInitRank, with settings. With config->blocking == 0 it returns
 * gbInProgress at once; poll gbCommGetAsyncError until it stops saying so. */
GB_API gbResult_t gbCommInitRankConfig(gbComm_t* comm, int nranks, gbUniqueId commId,
                                       int rank, gbConfig_t* config);

/* Creates a communicator from a launcher's environment: GPUBRIDGE_UNIQUE_ID, or
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun, gpubridge-run),
 * SLURM_PROCID/SLURM_NTASKS (Slurm), OMPI_COMM_WORLD_RANK/SIZE (Open MPI).
 * Rank 0 hosts the rendezvous root on MASTER_ADDR:MASTER_PORT. config may be
 * NULL. Blocks like gbCommInitRank. */
GB_API gbResult_t gbCommInitFromEnv(gbComm_t* comm, gbConfig_t* config);

/* Waits (up to the deadline) until every collective enqueued on comm has
 * finished its host steps. Collective in effect: do it on every rank. */
GB_API gbResult_t gbCommFinalize(gbComm_t comm);

/* Finalizes if needed, then frees every resource of comm. */
GB_API gbResult_t gbCommDestroy(gbComm_t comm);

/* Stops comm at once, from any thread: every wait inside gpubridge for comm
 * returns, pending work is dropped, peers see the connections close. Frees comm. */
GB_API gbResult_t gbCommAbort(gbComm_t comm);

/* gbSuccess, gbInProgress while a non-blocking init runs, or the first error
 * of asynchronous work (a peer that failed, a deadline passed). Any thread. */
GB_API gbResult_t gbCommGetAsyncError(gbComm_t comm, gbResult_t* asyncError);

GB_API gbResult_t gbCommCount(const gbComm_t comm, int* count);
GB_API gbResult_t gbCommUserRank(const gbComm_t comm, int* rank);
GB_API gbResult_t gbCommGetTopology(const gbComm_t comm, gbTopology_t* topology);

/* The memory comm holds on this rank for staging (docs/ARCHITECTURE.md, "Memory per rank"): pinned host memory of
 * its own (private slots, send/recv buffers, slots across hosts, flags), the shared staging segments it maps and
 * registers with its device (one physical copy per host, shared by the host group's members), and device memory
 * (the shared slots' scratch). Each path allocates when it first runs. Any thread. */
typedef struct {
  uint32_t size, version; /* sizeof, 1 */
  uint64_t pinnedBytes, segmentBytes, deviceBytes;
} gbCommMemory_t;
GB_API gbResult_t gbCommGetMemory(const gbComm_t comm, gbCommMemory_t* memory);
/* For planning (gpubridge-info): what a rank of a job of `ranks` ranks on one host (2 to 8) in two islands would hold
 * under the current GPUBRIDGE_* settings, on a GPU (gpu 1) or simulated: segmentBytes, the shared segments it maps;
 * deviceBytes, the most device scratch they make; pinnedBytes, the private slots a call that takes them makes. */
GB_API gbResult_t gbGetMemoryEstimate(int ranks, int gpu, gbCommMemory_t* memory);

/* ------------------------------------------------------------ collectives
 * Each call checks its arguments on the calling thread and returns an error
 * before anything is enqueued; then it enqueues the work on `stream` and
 * returns without waiting for the GPU or the network. Results are ready when
 * the stream reaches that point (gbStreamSynchronize, cudaStreamSynchronize).
 * Every rank must call the same collectives in the same order.
 * A count of 0 is valid and does nothing.
 *
 * Results are bit-identical on every rank: each element is reduced in exactly
 * one place, in the order docs/REDUCTION_ORDER.md documents, then copied.
 *
 * Each collective says below when it runs in place; sendbuff and recvbuff
 * that overlap in any other way are gbInvalidArgument (NCCL leaves that
 * undefined but for all-to-all, which it also refuses).
 */

/* recvbuff[i] = op over ranks of sendbuff[i]. In place when sendbuff == recvbuff. */
GB_API gbResult_t gbAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                              gbDataType_t datatype, gbRedOp_t op, gbComm_t comm,
                              void* stream);

/* Copies root's sendbuff into every rank's recvbuff. sendbuff is read on the
 * root only. In place when sendbuff == recvbuff. */
GB_API gbResult_t gbBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                              gbDataType_t datatype, int root, gbComm_t comm,
                              void* stream);

/* recvbuff on root = op over ranks of sendbuff; recvbuff is not touched (and
 * may be NULL) elsewhere. In place on the root when sendbuff == recvbuff. */
GB_API gbResult_t gbReduce(const void* sendbuff, void* recvbuff, size_t count,
                           gbDataType_t datatype, gbRedOp_t op, int root, gbComm_t comm,
                           void* stream);

/* recvbuff[r*sendcount .. (r+1)*sendcount) = rank r's sendbuff. In place when
 * sendbuff == recvbuff + rank*sendcount. */
GB_API gbResult_t gbAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                              gbDataType_t datatype, gbComm_t comm, void* stream);

/* recvbuff = op over ranks of sendbuff[rank*recvcount .. (rank+1)*recvcount).
 * In place when recvbuff == sendbuff + rank*recvcount. */
GB_API gbResult_t gbReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                  gbDataType_t datatype, gbRedOp_t op, gbComm_t comm,
                                  void* stream);

/* recvbuff[r*count ..] = rank r's sendbuff[rank*count ..]: count elements to
 * and from every rank. In place when sendbuff == recvbuff (NCCL 2.28's rule). */
GB_API gbResult_t gbAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                             gbDataType_t datatype, gbComm_t comm, void* stream);

/* Point to point. Outside a group each call is its own operation; between
 * gbGroupStart and gbGroupEnd, the sends and receives of one communicator
 * run together as one operation (so a rank may send to and receive from
 * the same peer without deadlock). A send of count elements must meet a
 * receive of the same count and type on the peer, in the same order. */
GB_API gbResult_t gbSend(const void* sendbuff, size_t count, gbDataType_t datatype, int peer,
                         gbComm_t comm, void* stream);
GB_API gbResult_t gbRecv(void* recvbuff, size_t count, gbDataType_t datatype, int peer,
                         gbComm_t comm, void* stream);

/* Groups nest; the outermost gbGroupEnd issues what the group collected (per
 * communicator, in call order). Thread-local, as in NCCL. */
GB_API gbResult_t gbGroupStart(void);
GB_API gbResult_t gbGroupEnd(void);

/* The stream passes this point once every rank's stream reached it. */
GB_API gbResult_t gbBarrier(gbComm_t comm, void* stream);

/* Creates an op that sums scalar * x over ranks (what FSDP uses for its
 * gradient pre-division). *scalar has type datatype; residence says where.
 * Each rank's scalar scales its own x and may differ from rank to rank: with
 * w_r / W (W the all-reduced sum of the weights w_r) the op averages by
 * weight (docs/REDUCTION_ORDER.md, "Weighted average").
 * The op belongs to comm and is valid until gbRedOpDestroy. */
GB_API gbResult_t gbRedOpCreatePreMulSum(gbRedOp_t* op, void* scalar, gbDataType_t datatype,
                                         gbScalarResidence_t residence, gbComm_t comm);
GB_API gbResult_t gbRedOpDestroy(gbRedOp_t op, gbComm_t comm);

/* ------------------------------------------------------------ split
 * Collective over comm's ranks: ranks with the same color form a new
 * communicator, ordered by key (ties by parent rank). color
 * GB_SPLIT_NOCOLOR gives *newcomm = NULL. The child finds its own topology:
 * a child within one vendor runs native, a mixed one bridges. Parent and
 * children are independent afterwards (any use order, any destroy order).
 * config NULL inherits the parent's settings. */
GB_API gbResult_t gbCommSplit(gbComm_t comm, int color, int key, gbComm_t* newcomm,
                              gbConfig_t* config);

/* ------------------------------------------------ device helpers (gpubridge)
 * Vendor-neutral access to this process's device, so tools and tests need no
 * CUDA or HIP headers: the real GPU, or host memory and worker-thread streams
 * when simulated. The device is chosen on first use from GPUBRIDGE_VENDOR. */

GB_API gbResult_t gbMemAlloc(void** ptr, size_t size);
GB_API gbResult_t gbMemFree(void* ptr);
/* Synchronous copies between host memory and device memory. */
GB_API gbResult_t gbMemcpyToDevice(void* dst, const void* src, size_t size);
GB_API gbResult_t gbMemcpyToHost(void* dst, const void* src, size_t size);

GB_API gbResult_t gbStreamCreate(void** stream);
/* Waits until the stream's work is done. Returns the stream's first error:
 * a failed collective on a simulated device shows here as well as through
 * gbCommGetAsyncError. */
GB_API gbResult_t gbStreamSynchronize(void* stream);
GB_API gbResult_t gbStreamDestroy(void* stream);

/* What this process's device is: the one the helpers above and every
 * communicator use, chosen and opened on first use as by gbMemAlloc. Strings
 * are static. A GPU that is present but cannot be opened is an error
 * (gbGetLastError says why). */
typedef struct {
  const char* backend; /* the device implementation: "cuda", "hip" or "host" */
  const char* vendor;  /* the island this rank joins: "nvidia", "amd", GPUBRIDGE_VENDOR's value, "cpu" */
  int runKind;         /* a gbRunKind_t */
} gbDeviceInfo_t;

GB_API gbResult_t gbGetDeviceInfo(gbDeviceInfo_t* info);

/* The network interface and address this process's communicators would
 * listen on: GPUBRIDGE_SOCKET_IFNAME's pick, else the first interface that is
 * up, not loopback (loopback when nothing else is up). For a preflight
 * (gpubridge-info --preflight). */
GB_API gbResult_t gbGetNetInterface(char* name, size_t nameLen, char* address, size_t addressLen);

/* ------------------------------------------------ flight recorder (gpubridge)
 * Each communicator keeps a ring of its recent collectives and send/recv
 * groups (GPUBRIDGE_TRACE_BUFFER entries; 0 turns it off): what was called and
 * when each phase began. On a timeout, a peer's failure, gbCommAbort or
 * GPUBRIDGE_TRACE_SIGNAL every rank writes it to GPUBRIDGE_TRACE_DIR as
 * gpubridge-trace-<id>-r<rank>.json (schema gpubridge-trace/1, docs/TRACE.md);
 * `gpubridge-info --trace DIR` names the rank at fault. */

typedef enum { gbCollAllReduce = 0, gbCollBroadcast = 1, gbCollReduce = 2, gbCollAllGather = 3,
               gbCollReduceScatter = 4, gbCollAllToAll = 5, gbCollSendRecv = 6, gbNumColls = 7 } gbCollKind_t;
/* A phase's time is when it began; it ends where the next reached one begins. */
typedef enum { gbPhaseEnqueued = 0, gbPhaseCheckBegin = 1, gbPhaseCheckEnd = 2, gbPhaseStaged = 3,
               gbPhaseBridgeBegin = 4, gbPhaseBridgeEnd = 5, gbPhaseDone = 6, gbNumPhases = 7 } gbPhase_t;
typedef enum { gbHostGroupWorld = 0, gbHostGroupBridge = 1, gbHostGroupRail = 2, gbHostGroupIsland = 3,
               gbNumHostGroups = 4 } gbHostGroup_t;
typedef enum { gbRecordInFlight = 1, gbRecordDone = 2, gbRecordFailed = 3 } gbRecordState_t;
#define GB_RECORD_HAS_CHECK 1u      /* the call check ran for it */
#define GB_RECORD_HAS_HOST_STEP 2u  /* this rank stages chunks to the proxy (leader, flat, rail member) */
#define GB_RECORD_DEVICE_DONE 4u    /* t[gbPhaseDone] is when a host thread saw the stream's flag (GPU), not exact */

/* One collective or send/recv group as this rank saw it. */
typedef struct {
  uint32_t size;        /* sizeof(gbCollRecord_t): 168 */
  uint32_t version;     /* 1 */
  uint64_t seq;         /* collective number, 1-based, equal on every rank; 0 for a send/recv group */
  uint64_t p2pSeq;      /* send/recv group number on this rank; 0 for a collective */
  uint64_t count;       /* elements as passed (send/recv group: the sum over its ops) */
  int64_t t[gbNumPhases];            /* CLOCK_MONOTONIC ns when the phase began; 0: not reached or not seen */
  uint64_t bytes[gbNumHostGroups];   /* payload bytes this rank sent per host group; island: logical bytes of its island steps */
  int32_t coll;         /* gbCollKind_t */
  int32_t dtype;        /* gbDataType_t (send/recv group: the first op's; -1 if mixed) */
  int32_t op;           /* gbRedOp_t, -1 where none */
  int32_t root;         /* broadcast and reduce; -1 elsewhere */
  int32_t peer;         /* send/recv group: its first peer; -1 elsewhere */
  int32_t npeers;       /* send/recv group: distinct peers */
  int32_t policy;       /* gbPolicy_t the call ran (auto and tuned resolved); -1 for send/recv */
  int32_t nchunks;      /* host steps this call posts on this rank */
  int32_t chunksBridged;/* host steps the proxy finished */
  int32_t flags;        /* GB_RECORD_* */
  int32_t state;        /* gbRecordState_t */
  int32_t result;       /* gbResult_t once done or failed */
} gbCollRecord_t;

typedef void (*gbObserver_t)(gbComm_t comm, const gbCollRecord_t* record, void* userData);
/* Calls fn once per finished collective or send/recv group of comm (done or failed), with a copy of its record,
 * on a gpubridge thread (the stream's worker on a simulated device; the flight-recorder thread on a GPU). fn must
 * return quickly and must not call collectives on comm. fn NULL removes it; returns once no call of the previous
 * observer is running (unless called from inside it). gbInvalidUsage when GPUBRIDGE_TRACE_BUFFER=0. Any thread. */
GB_API gbResult_t gbCommSetObserver(gbComm_t comm, gbObserver_t fn, void* userData);
/* Records of comm still in flight, oldest first (up to maxRecords); *count gets how many. Any thread. */
GB_API gbResult_t gbCommGetInFlight(gbComm_t comm, gbCollRecord_t* records, int maxRecords, int* count);
/* The newest maxRecords records (in flight or not), oldest first. Any thread. */
GB_API gbResult_t gbCommGetRecords(gbComm_t comm, gbCollRecord_t* records, int maxRecords, int* count);
/* "queued" is not returned: the caller knows that records behind the oldest in-flight one wait behind it. */
GB_API const char* gbCollRecordPhase(const gbCollRecord_t* record); /* "check","island","staged","bridge","copy-back","done","failed" */

/* What a communicator did since its init. */
typedef struct {
  uint32_t size, version;         /* sizeof, 1 */
  uint64_t enqueued, completed, failed, unrecorded;
  uint64_t byColl[gbNumColls];     /* completed, per gbCollKind_t */
  uint64_t bytes[gbNumHostGroups]; /* sent per host group (island: logical) */
  uint64_t busyNs[gbNumHostGroups];/* proxy time in steps of each group (island: 0) */
  uint64_t latencyNs;              /* sum over completed of t[Done] - t[Enqueued] */
} gbCommCounters_t;
GB_API gbResult_t gbCommGetCounters(gbComm_t comm, gbCommCounters_t* counters);
/* Writes comm's flight recorder now; dir NULL: GPUBRIDGE_TRACE_DIR (gbInvalidUsage when unset). path receives
 * the file's path when pathLen > 0. Any thread; works on a failed communicator until it is destroyed. */
GB_API gbResult_t gbCommDumpTrace(gbComm_t comm, const char* dir, char* path, size_t pathLen);

/* ------------------------------------------------ configuration (gpubridge)
 * The GPUBRIDGE_* environment variables the library reads (docs/ENV.md is
 * generated from this table by `gpubridge-info -c --markdown`). They are read
 * once, at the first call that needs them; later changes to the environment
 * are not seen. Strings are owned by the library and valid for the life of
 * the process. */

typedef struct {
  const char* name;         /* "GPUBRIDGE_TIMEOUT" */
  const char* type;         /* "int 1..86400", "size 4K..1G", "enum: auto, hierarchical, ...", "string" */
  const char* defaultValue; /* as a user would write it; "" when there is none */
  const char* value;        /* the value in effect: the environment's when set and valid, else
                               defaultValue; "(set, not shown)" for a secret (job secret, unique id) */
  const char* error;        /* NULL, or the line of gbGetParamErrors that names this variable */
  int isSet;                /* set: in the environment (an empty value counts as unset), or
                               derived from another variable (GPUBRIDGE_VENDOR from GPUBRIDGE_VENDORS) */
  int mustAgree;            /* every rank must hold the same value */
  const char* doc;          /* one line */
} gbParamInfo_t;

/* The number of parameters; they are numbered 0 .. count-1, in the order of docs/ENV.md. */
GB_API gbResult_t gbGetParamCount(int* count);
/* Parameter `index`, with this process's value. */
GB_API gbResult_t gbGetParamInfo(int index, gbParamInfo_t* info);
/* Every invalid value found, one per line ("" when all are valid): a
 * communicator init fails on every rank with these lines. */
GB_API gbResult_t gbGetParamErrors(const char** errors);

#ifdef __cplusplus
}
#endif

#endif /* GPUBRIDGE_GPUBRIDGE_H */
