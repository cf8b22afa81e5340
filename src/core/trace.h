/* The flight recorder: a ring per communicator of its recent collectives and
 * send/recv groups (gbCollRecord_t), the counters, the observer, and the
 * dumps (trace_dump.c) and their triggers (trace_watch.c).
 *
 * The ring is lock-free and every field of an entry has one writer: the
 * calling thread writes what was called (gbTraceBegin .. gbTraceEnqueued,
 * between an odd and an even `version`); the proxy writes the check and
 * bridge stamps and bytes (gbTraceOnStep); the done writer writes done,
 * state and result (gbTraceFinish): the stream's end marker where the
 * device runs host functions, else the watcher thread, which polls a done
 * flag the stream writes (trace_done.c; GPUBRIDGE_TRACE_DONE chooses).
 * Late writers use relaxed atomic stores; readers copy an entry and retry
 * while `version` is odd or moved. An entry still in flight is never
 * reused: a call that would need it goes unrecorded (counted), so the
 * oldest, stuck, call is the one kept. */
#ifndef GB_CORE_TRACE_H
#define GB_CORE_TRACE_H

#include <pthread.h>
#include <stdint.h>

#include "device/device.h"
#include "gpubridge/gpubridge.h"
#include "proxy/proxy.h"

struct gbComm;

/* One ring entry: 192 bytes, three cache lines, so the proxy writing entry
 * k and the caller writing k + 1 share none. */
typedef struct gbTraceEntry {
  gbCollRecord_t rec;
  uint32_t version;      /* odd while the caller writes its fields */
  uint32_t byFlag;       /* 1: its done flag write is on the stream and the watcher finishes it */
  struct gbComm* comm;
  uint64_t id;           /* 1-based number of the record; ring index id & mask */
} gbTraceEntry_t;

typedef struct {
  gbObserver_t fn;
  void* userData;
} gbTraceObserver_t;

struct gbTrace {
  gbTraceEntry_t* e;
  uint64_t cap, mask;
  uint64_t next;                  /* records taken (caller writes, anyone reads) */
  uint64_t lastSeq, lastP2p;      /* the caller's numbers, readable from any thread */
  /* Counters, each with one writer kind (gbCommCounters_t's meaning). */
  uint64_t enqueued, unrecorded;  /* caller */
  uint64_t completed, failed, latencyNs, byColl[gbNumColls]; /* done writers (several streams: fetch_add) */
  uint64_t bytes[gbNumHostGroups]; /* proxy (world, bridge, rail); caller (island) */
  uint64_t busyNs[gbNumHostGroups];/* proxy */
  int64_t stepBegin;              /* proxy: when the running host step began */
  gbTraceObserver_t* obs;         /* atomic, seq_cst */
  int obsCalls;                   /* atomic, seq_cst: observer calls running */
  pthread_mutex_t dumpLock;       /* one dump of this communicator at a time */
  int dumped;                     /* the trouble dump was written (dumpLock) */
  int watching;                   /* counted by trace_watch.c */
  struct gbComm* comm;
  /* Done by flag (trace_done.c); doneFlags NULL: by the end marker. */
  gbFlag_t* doneFlags;            /* [cap], dev->hostAlloc: entry k's is doneFlags[k] */
  void* doneMapped;               /* their address for the device's streams, looked up once */
  unsigned shift;                 /* log2(cap) */
  uint64_t flagsPending;          /* records handed to the watcher, not finished (atomic, seq_cst) */
  uint64_t scanFrom;              /* the watcher's: every record below it is finished */
  int failSettled;                /* the first failure's dump is over: records may end failed (atomic) */
  struct gbTrace* polledNext;     /* trace_watch.c's list of rings it polls (its lock) */
};

/* GPUBRIDGE_TRACE_DONE's values, in the order of its choices. */
enum { GB_TRACE_DONE_AUTO = 0, GB_TRACE_DONE_MARKER = 1, GB_TRACE_DONE_FLAG = 2 };

/* Creates comm's ring (GPUBRIDGE_TRACE_BUFFER entries, rounded up to a power
 * of two), and its done flags where records end by flag; comm->trace stays
 * NULL when the parameter is 0. */
gbResult_t gbTraceCreate(struct gbComm* comm);
/* After the streams drained and the proxy stopped: the observer goes, a
 * dump in progress ends, the ring is freed. */
void gbTraceDestroy(struct gbComm* comm);

/* Caller thread, right after the collective took its number (comm->seq). */
void gbTraceBegin(struct gbComm* comm, int coll, uint64_t count, int dtype, int op, int root);
/* Caller thread, right after a send/recv group took its number (comm->p2pSeq). */
void gbTraceBeginP2p(struct gbComm* comm, const void* ops /* gbCommP2p_t[] */, int nops);
/* The number taken by gbTraceBegin was given back: forget the record. */
void gbTraceCancel(struct gbComm* comm);
/* Caller fields known after the plan: the policy that runs, and the host
 * steps this rank posts. */
void gbTraceSetPlan(struct gbComm* comm, int policy, int nchunks);
void gbTraceAddFlags(struct gbComm* comm, uint32_t flags);
/* Logical bytes of an island step this call queued. */
void gbTraceAddIslandBytes(struct gbComm* comm, uint64_t bytes);
/* Stamps a proxy op with the current record: role and its index among the
 * call's host steps (the stream later waits on the op's done flag). */
enum { GB_TRACE_ROLE_NONE = 0, GB_TRACE_ROLE_CHECK = 1, GB_TRACE_ROLE_HOST = 2 };
void gbTraceTagOp(struct gbComm* comm, gbProxyOp_t* op, int role, uint32_t chunk, uint32_t nchunks);
/* Caller thread, at the end of the enqueue: the caller's fields are complete.
 * Returns the entry for the end marker (NULL when the call is unrecorded). */
gbTraceEntry_t* gbTraceEnqueued(struct gbComm* comm);
/* The done writer: stamps done (state gbRecordDone or gbRecordFailed; flags
 * adds GB_RECORD_* bits), adds to the counters and calls the observer. Once
 * per entry. */
void gbTraceFinish(gbTraceEntry_t* e, int state, gbResult_t result, uint32_t flags);
/* The stream dropped e's end (its stream failed, or its communicator did):
 * failed, with the communicator's error, else gbRemoteError. */
void gbTraceFinishDropped(gbTraceEntry_t* e, uint32_t flags);
/* gbProxyConfig_t.onStep: the proxy's stamps. ctx is the communicator. */
void gbTraceOnStep(void* ctx, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent);

/* Readers, any thread. A consistent copy of entry id; 0 when the entry is
 * unused, holds another record, or is being written. */
int gbTraceRead(const struct gbTrace* t, uint64_t id, gbCollRecord_t* out);
/* Records oldest first: the newest max (inFlightOnly: those in flight). */
int gbTraceCollect(const struct gbTrace* t, gbCollRecord_t* out, int max, int inFlightOnly);
void gbTraceCounters(const struct gbTrace* t, gbCommCounters_t* out);
gbResult_t gbTraceSetObserver(struct gbComm* comm, gbObserver_t fn, void* userData);
/* "queued" (olderInFlight and in flight), "check", "island", "staged",
 * "bridge", "copy-back", "done", "failed". */
const char* gbTracePhaseName(const gbCollRecord_t* rec, int olderInFlight);
const char* gbTraceCollName(int coll); /* "all_reduce" ...; "?" */

/* trace_dump.c: writes comm's ring to dir (NULL: GPUBRIDGE_TRACE_DIR) as
 * gpubridge-trace-<id>-r<rank>.json, through a temporary file and rename.
 * why: "timeout", "peer-failure", "abort", "signal", "api", "error". */
gbResult_t gbTraceDump(struct gbComm* comm, const char* dir, const char* why, char* path, size_t pathLen);
/* After comm's first failure (gbCommFailFor): the dump once, when
 * GPUBRIDGE_TRACE_DIR is set; after it, records that wait for their done
 * flag may end failed. */
void gbTraceDumpOnTrouble(struct gbComm* comm, const char* why);

/* trace_done.c: records that end by a done flag (devices without host
 * functions, or GPUBRIDGE_TRACE_DONE=flag). */
gbResult_t gbTraceDoneCreate(struct gbComm* comm);
void gbTraceDoneDestroy(struct gbComm* comm);
/* Caller thread, at the end of the enqueue: puts the write of e's done flag
 * on the stream and hands e to the watcher. A write that cannot be queued
 * stamps e failed. */
gbResult_t gbTraceDonePost(gbTraceEntry_t* e, void* stream);
/* The watcher: finishes t's handed records whose flag came (done, or failed
 * where the stream dropped the write); once the communicator's failure is
 * settled, or final (teardown, streams drained), the others end failed.
 * Returns how many are still pending. */
uint64_t gbTraceDonePoll(struct gbTrace* t, int final);

/* trace_watch.c: the process's watcher thread and GPUBRIDGE_TRACE_SIGNAL,
 * counted by the communicators with a recorder; it polls the done flags of
 * the rings that have them every 1 ms while records are pending. Stop
 * returns once the thread no longer polls comm's ring. */
gbResult_t gbTraceWatchStart(struct gbComm* comm);
void gbTraceWatchStop(struct gbComm* comm);
/* A record was handed to the watcher (flagsPending raised): wakes it if idle. */
void gbTraceWatchWake(void);

#endif
