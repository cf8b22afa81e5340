/* The progress thread: runs the host steps of schedules in the order they
 * were enqueued. Each step waits for its input to be staged (a flag a stream
 * sets), runs a host collective, and releases the stream with another flag.
 * After a failure every later step releases its flag with the error at once,
 * so no stream waits forever. */
#ifndef GB_PROXY_PROXY_H
#define GB_PROXY_PROXY_H

#include <stddef.h>
#include "algo/algo.h"
#include "base/clock.h"
#include "device/device.h"

typedef enum {
  GB_PROXY_ALLREDUCE,
  GB_PROXY_BCAST,
  GB_PROXY_REDUCE,
  GB_PROXY_ALLGATHER,     /* buf holds [n][count]; mine at buf + me*count */
  GB_PROXY_REDUCESCATTER, /* buf holds [n][count]; my block is reduced in place */
  GB_PROXY_ALLTOALL,      /* buf holds [n][count] to send, out [n][count] received */
  GB_PROXY_SENDRECV,      /* p2p[np2p] (freed after the step) */
  GB_PROXY_CALL           /* fn(arg) on the proxy thread, then freeArg(arg) */
} gbProxyKind_t;

typedef struct {
  gbProxyKind_t kind;
  gbAlgoGroup_t* group;
  void* buf;                 /* the staging slot, in place */
  const void* src;           /* all-reduce: the input, when not buf (NULL: buf) */
  size_t count;
  size_t chunkCount;         /* all-reduce: one host all-reduce per chunkCount elements, back to back (0: one) */
  gbDataType_t dtype;
  gbRedOp_t op;
  int divisor;
  int root;                  /* broadcast, reduce: index in group */
  void* out;                 /* all-to-all's receive area */
  const void* scale;         /* PreMulSum: scale every contribution by *scale first (NULL: none) */
  gbAlgoP2p_t* p2p;
  int np2p;
  gbResult_t (*fn)(void* arg);
  void (*freeArg)(void* arg);
  void* arg;
  gbFlag_t* ready;           /* wait until ready->value >= readyValue (NULL: run at once) */
  uint64_t readyValue;
  gbFlag_t* done;            /* then set done->value = doneValue */
  uint64_t doneValue;
  uint64_t seq;              /* the collective's sequence number, for messages */
  void* trace;               /* the caller's flight-recorder entry (NULL: none), for onStep */
  int traceRole;             /* what the step is for the recorder (core/trace.h) */
  uint32_t chunk, nchunks;   /* this step's index among its call's host steps, and their number */
} gbProxyOp_t;

/* onStep's events: the step's input is ready and it starts; it ended. */
enum { GB_PROXY_STEP_READY = 0, GB_PROXY_STEP_END = 1 };

typedef struct gbProxy gbProxy_t;

typedef struct {
  double timeoutSec;
  const volatile int* abortFlag;
  void (*onError)(void* ctx, gbResult_t res); /* the first failure */
  /* For steps with a trace (NULL: none): called on the proxy thread when the
   * step starts and when it ended, with its result and the bytes its group
   * sent; the END call comes before the step's done flag is set. */
  void (*onStep)(void* ctx, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent);
  void* ctx;
} gbProxyConfig_t;

gbResult_t gbProxyCreate(const gbProxyConfig_t* cfg, gbProxy_t** out);
/* Enqueues; never blocks on running work. Takes p2p and arg: they are freed
 * after the step (or at destroy when it never runs); when it fails they stay
 * the caller's. */
gbResult_t gbProxyPost(gbProxy_t* p, const gbProxyOp_t* op);
/* Waits until every posted step ran (or failed). */
gbResult_t gbProxyDrain(gbProxy_t* p, gbDeadline_t deadline);
/* Stops the thread once it is idle (abort makes running steps fail first). */
void gbProxyDestroy(gbProxy_t* p);

#endif
