/* The flight recorder: a ring of a communicator's recent collectives and
 * send/recv groups (gbCollRecord_t), the counters, the observer, and the
 * dumps (dump.c) and their triggers (watch.c).
 *
 * The ring knows nothing of the communicator's structure: what it needs is
 * copied in at create (gbTraceSetup_t), and what only the owner knows when
 * it is asked (its failure, which host group a proxy step's group is,
 * whether it is ready) comes through the callbacks the owner gives
 * (gbTraceOwner_t).
 *
 * The ring is lock-free and every field of an entry has one writer: the
 * calling thread writes what was called (gbTraceRecordBegin ..
 * gbTraceRecordEnqueued, between an odd and an even `version`); the proxy
 * writes the check and bridge stamps and bytes (gbTraceOnStep); the done
 * writer writes done, state and result (gbTraceRecordFinish): the stream's
 * end marker where the device runs host functions, else the watcher thread,
 * which polls a done flag the stream writes (done.c; GPUBRIDGE_TRACE_DONE
 * chooses). Late writers use relaxed atomic stores; readers copy an entry
 * and retry while `version` is odd or moved. An entry still in flight is
 * never reused: a call that would need it goes unrecorded (counted), so the
 * oldest, stuck, call is the one kept. */
#ifndef GB_TRACE_TRACE_H
#define GB_TRACE_TRACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"
#include "boot/topology.h"
#include "device/device.h"
#include "gpubridge/gpubridge.h"
#include "proxy/proxy.h"

/* One ring entry: 192 bytes, three cache lines, so the proxy writing entry
 * k and the caller writing k + 1 share none. */
/* gbCollRecord_t's fields, each atomic: the ring entry's seqlock reads and
 * writes them one by one (trace.c's copyRecord gives the plain record). */
typedef struct {
  _Atomic uint32_t size, version;
  _Atomic uint64_t seq, p2pSeq, count;
  _Atomic int64_t t[gbNumPhases];
  _Atomic uint64_t bytes[gbNumHostGroups];
  _Atomic int32_t coll, dtype, op, root, peer, npeers, policy, nchunks, chunksBridged, flags, state, result;
} gbTraceRecord_t;
_Static_assert(sizeof(gbTraceRecord_t) == sizeof(gbCollRecord_t) &&
                   offsetof(gbTraceRecord_t, result) == offsetof(gbCollRecord_t, result),
               "gbTraceRecord_t is gbCollRecord_t's layout");

typedef struct gbTraceEntry {
  gbTraceRecord_t rec;
  _Atomic uint32_t version; /* odd while the caller writes its fields */
  _Atomic uint16_t byFlag;     /* 1: its done flag write is on the stream and the watcher finishes it */
  _Atomic uint16_t steps;      /* its proxy steps posted and not yet ended (they may still write it), and
                                * whether the call finished and waits for them to publish (trace.c) */
  gbComm_t comm;         /* the owner's handle (gbTraceOwner_t.handle); the ring never reads through it */
  _Atomic uint64_t id;   /* 1-based number of the record; ring index id & mask */
} gbTraceEntry_t;

typedef struct {
  gbObserver_t fn;
  void* userData;
} gbTraceObserver_t;

/* The owner's first failure, as a dump shows it. */
typedef struct {
  gbResult_t code;       /* gbSuccess: none (the rest is not filled) */
  char text[1024];
  int faultRank, seenBy; /* who failed first, and who saw it */
  int64_t wallNs;        /* CLOCK_REALTIME ns of the failure */
} gbTraceFailure_t;

/* What the ring asks its owner (the communicator), with ctx. */
typedef struct {
  void* ctx;
  gbComm_t handle;       /* the observer's first argument; every entry's comm */
  /* The first failure, read without a lock (gbSuccess: none). */
  gbResult_t (*asyncError)(void* ctx);
  /* The first failure with its text and cause, as one consistent copy. */
  void (*failure)(void* ctx, gbTraceFailure_t* out);
  /* The counter a proxy step's host group adds to (gbHostGroupWorld,
   * gbHostGroupBridge, gbHostGroupRail), or -1 for none. Proxy thread. */
  int (*hostGroup)(void* ctx, const gbAlgoGroup_t* group);
  /* Whether the owner finished its start-up: a signal's dump skips it before. */
  int (*ready)(void* ctx);
} gbTraceOwner_t;

/* What a ring is made with; copied, except topo, which the owner keeps
 * alive until gbTraceDestroy. */
typedef struct {
  gbTraceOwner_t owner;
  const gbDeviceOps* dev;
  int rank, nranks;
  uint64_t jobId;         /* the job's id hash: names the dump */
  int timeoutSec;         /* the collectives' deadline (the done flags', the dump's) */
  int policy;             /* gbPolicy_t the communicator resolved */
  int checkCalls;         /* the call check takes part */
  const gbTopo_t* topo;   /* islands, leaders, run kind */
} gbTraceSetup_t;

typedef struct gbTrace {
  gbTraceEntry_t* e;
  uint64_t cap, mask;
  _Atomic uint64_t next;          /* records taken (caller writes, anyone reads) */
  _Atomic uint64_t lastSeq, lastP2p;    /* the caller's numbers, readable from any thread */
  gbTraceEntry_t* now;            /* the record of the call being enqueued (caller thread) */
  /* Counters, each with one writer kind (gbCommCounters_t's meaning). */
  _Atomic uint64_t enqueued, unrecorded; /* caller */
  _Atomic uint64_t completed, failed, latencyNs, byColl[gbNumColls]; /* done writers (several streams: fetch_add) */
  _Atomic uint64_t bytes[gbNumHostGroups]; /* proxy (world, bridge, rail); caller (island) */
  _Atomic uint64_t busyNs[gbNumHostGroups]; /* proxy */
  int64_t stepBegin;              /* proxy: when the running host step began */
  gbTraceObserver_t* _Atomic obs; /* seq_cst */
  atomic_int obsCalls;            /* seq_cst: observer calls running */
  pthread_mutex_t dumpLock;       /* one dump of this ring at a time */
  int dumped;                     /* the trouble dump was written (dumpLock) */
  int watching;                   /* counted by watch.c */
  gbTraceSetup_t setup;
  /* Done by flag (done.c); doneFlags NULL: by the end marker. */
  gbFlag_t* doneFlags;            /* [cap], dev->hostAlloc: entry k's is doneFlags[k] */
  void* doneMapped;               /* their address for the device's streams, looked up once */
  unsigned shift;                 /* log2(cap) */
  _Atomic uint64_t flagsPending;  /* records handed to the watcher, not finished (seq_cst) */
  uint64_t scanFrom;              /* the watcher's: every record below it is finished */
  atomic_int failSettled;         /* the first failure's dump is over: records may end failed */
  struct gbTrace* watchedNext;    /* watch.c's list of the rings it serves (its lock) */
} gbTrace_t;

/* GPUBRIDGE_TRACE_DONE's values, in the order of its choices. */
enum { GB_TRACE_DONE_AUTO = 0, GB_TRACE_DONE_MARKER = 1, GB_TRACE_DONE_FLAG = 2 };

/* Creates a ring (GPUBRIDGE_TRACE_BUFFER entries, rounded up to a power of
 * two), and its done flags where records end by flag; *out stays NULL when
 * the parameter is 0. */
gbResult_t gbTraceCreate(const gbTraceSetup_t* setup, gbTrace_t** out);
/* After the streams drained and the proxy stopped: the observer goes, a
 * dump in progress ends, the ring is freed. NULL: nothing. */
void gbTraceDestroy(gbTrace_t* t);

/* Caller thread, right after the collective took its number seq. */
void gbTraceRecordBegin(gbTrace_t* t, uint64_t seq, int coll, uint64_t count, int dtype, int op, int root);
/* Caller thread, right after a send/recv group took its number p2pSeq:
 * count is the sum over its ops, dtype the ops' (-1 if mixed or none), peer
 * the first op's (-1: none), npeers the distinct peers. */
void gbTraceRecordBeginP2p(gbTrace_t* t, uint64_t p2pSeq, uint64_t count, int dtype, int peer, int npeers);
/* The number taken by gbTraceRecordBegin was given back (seq is the
 * caller's number now): forget the record. */
void gbTraceRecordCancel(gbTrace_t* t, uint64_t seq);
/* Caller fields known after the plan: the policy that runs, and the host
 * steps this rank posts. */
void gbTraceRecordSetPlan(gbTrace_t* t, int policy, int nchunks);
void gbTraceRecordAddFlags(gbTrace_t* t, uint32_t flags);
/* Logical bytes of an island step this call queued. */
void gbTraceRecordAddIslandBytes(gbTrace_t* t, uint64_t bytes);
/* Stamps a proxy op with the current record (t NULL: none): role and its
 * index among the call's host steps (the stream later waits on the op's
 * done flag). */
enum { GB_TRACE_ROLE_NONE = 0, GB_TRACE_ROLE_CHECK = 1, GB_TRACE_ROLE_HOST = 2 };
void gbTraceRecordTagOp(gbTrace_t* t, gbProxyOp_t* op, int role, uint32_t chunk, uint32_t nchunks);
/* Caller thread, at the end of the enqueue: the caller's fields are complete.
 * Returns the entry for the end marker (NULL when the call is unrecorded). */
gbTraceEntry_t* gbTraceRecordEnqueued(gbTrace_t* t);
/* The done writer: stamps done (state gbRecordDone or gbRecordFailed; flags
 * adds GB_RECORD_* bits), adds to the counters and calls the observer, at
 * once or, while proxy steps of the call still run, when the last of them
 * ends. Once per entry. */
void gbTraceRecordFinish(gbTrace_t* t, gbTraceEntry_t* e, int state, gbResult_t result, uint32_t flags);
/* The stream dropped e's end (its stream failed, or its communicator did):
 * failed, with the owner's error, else gbRemoteError. */
void gbTraceRecordDropped(gbTrace_t* t, gbTraceEntry_t* e, uint32_t flags);
/* Whether e's call has not finished yet (no done writer came). */
int gbTraceRecordOpen(const gbTraceEntry_t* e);
/* The proxy's stamps (gbProxyConfig_t.onStep's, for ring t; NULL: none). */
void gbTraceOnStep(gbTrace_t* t, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent);

/* Readers, any thread. A consistent copy of entry id; 0 when the entry is
 * unused, holds another record, or is being written. */
int gbTraceRead(const gbTrace_t* t, uint64_t id, gbCollRecord_t* out);
/* Records oldest first: the newest max (inFlightOnly: those in flight). */
int gbTraceCollect(const gbTrace_t* t, gbCollRecord_t* out, int max, int inFlightOnly);
void gbTraceCounters(const gbTrace_t* t, gbCommCounters_t* out);
gbResult_t gbTraceSetObserver(gbTrace_t* t, gbObserver_t fn, void* userData);
/* "queued" (olderInFlight and in flight), "check", "island", "staged",
 * "bridge", "copy-back", "done", "failed". */
const char* gbTracePhaseName(const gbCollRecord_t* rec, int olderInFlight);
const char* gbTraceCollName(int coll); /* "all_reduce" ...; "?" */

/* dump.c: writes the ring to dir (NULL: GPUBRIDGE_TRACE_DIR) as
 * gpubridge-trace-<id>-r<rank>.json, through a temporary file and rename.
 * why: "timeout", "peer-failure", "abort", "signal", "api", "error". */
gbResult_t gbTraceDump(gbTrace_t* t, const char* dir, const char* why, char* path, size_t pathLen);
/* After the owner's first failure: the dump once, when GPUBRIDGE_TRACE_DIR
 * is set; after it, records that wait for their done flag may end failed. */
void gbTraceDumpOnTrouble(gbTrace_t* t, const char* why);

/* done.c: records that end by a done flag (devices without host
 * functions, or GPUBRIDGE_TRACE_DONE=flag). */
gbResult_t gbTraceDoneCreate(gbTrace_t* t);
void gbTraceDoneDestroy(gbTrace_t* t);
/* Caller thread, at the end of the enqueue: puts the write of e's done flag
 * on the stream and hands e to the watcher. A write that cannot be queued
 * stamps e failed. */
gbResult_t gbTraceDoneWrite(gbTrace_t* t, gbTraceEntry_t* e, void* stream);
/* The watcher: finishes t's handed records whose flag came (done, or failed
 * where the stream dropped the write); once the owner's failure is settled,
 * or final (teardown, streams drained), the others end failed. Returns how
 * many are still pending. */
uint64_t gbTraceDonePoll(gbTrace_t* t, int final);

/* watch.c: the process's watcher thread and GPUBRIDGE_TRACE_SIGNAL,
 * counted by the rings; on the signal it dumps every ring whose owner is
 * ready, and it polls the done flags of the rings that have them every 1 ms
 * while records are pending. Stop returns once the thread no longer uses
 * t (NULL: nothing). */
gbResult_t gbTraceWatchStart(gbTrace_t* t);
void gbTraceWatchStop(gbTrace_t* t);
/* A record was handed to the watcher (flagsPending raised): wakes it if idle. */
void gbTraceWatchWake(void);

#endif
