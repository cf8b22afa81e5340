/* The progress thread: an ordered runner of closures. Each step waits for
 * its input to be staged (a flag a stream sets), runs its closure (a host
 * collective, a counter step, an exchange), and releases the stream with
 * another flag; dead-peer detection lives in the closures, deadlines here.
 * Watches (gbProxyOp_t.watch) are the exception to the order: they end when
 * what they watch happens, beside the steps after them.
 * After a failure every later step releases its flag with the error at once,
 * so no stream waits forever. */
#ifndef GB_PROXY_PROXY_H
#define GB_PROXY_PROXY_H

#include <stdatomic.h>
#include <stddef.h>
#include "algo/algo.h"
#include "base/clock.h"
#include "device/device.h"

/* How long past its own deadline a wait gives the step it waits on (the
 * proxy on a stream's island step, gbCommSplit's caller on its proxy step),
 * so that the step's timeout, which names the peer it waited on, speaks
 * first. */
#define GB_PROXY_STEP_GRACE_S 2

/* One step: fn(arg) on the proxy thread, then freeArg(arg). The closures
 * come from stage/ backends and core/ (the call check, split's exchanges);
 * the proxy knows no collective. */
typedef struct {
  gbResult_t (*fn)(void* arg);
  void (*freeArg)(void* arg);
  void* arg;
  gbFlag_t* ready;           /* wait until ready->value >= readyValue (NULL: run at once) */
  uint64_t readyValue;
  gbFlag_t* done;            /* then set done->value = doneValue */
  uint64_t doneValue;
  gbAlgoGroup_t* group;      /* the host group whose traffic counter the step's bytes go to (NULL: none) */
  uint64_t seq;              /* the collective's sequence number, for messages */
  void* trace;               /* the caller's flight-recorder entry (NULL: none), for onStep */
  int traceRole;             /* what the step is for the recorder (trace/trace.h) */
  uint32_t chunk, nchunks;   /* this step's index among its call's host steps, and their number */
  /* A watch: fn only looks at flags (it sends nothing, and no stream waits
   * for its done flag before later steps run) and returns gbInProgress
   * while what it watches has not happened. Once its ready flag is in, the
   * proxy keeps it aside and looks again between later steps and while it
   * has nothing else to run, so a later step (the next call's check) does
   * not wait behind it. */
  int watch;
} gbProxyOp_t;

/* onStep's events, for a step with a trace: it was posted (on the
 * poster's thread); its input is ready and it starts; it ended; or it ended
 * without running (its input never came, or an earlier step failed). Every
 * posted step ends once, as END or DROPPED. */
enum { GB_PROXY_STEP_READY = 0, GB_PROXY_STEP_END = 1, GB_PROXY_STEP_POSTED = 2, GB_PROXY_STEP_DROPPED = 3 };

typedef struct gbProxy gbProxy_t;

typedef struct {
  double timeoutSec;
  const atomic_int* abortFlag;
  void (*onError)(void* ctx, gbResult_t res); /* the first failure */
  /* For steps with a trace (NULL: none): called when the step is posted,
   * and on the proxy thread when it starts and when it ended, with its
   * result and the bytes its group sent (or when it was dropped); the END
   * call comes before the step's done flag is set. */
  void (*onStep)(void* ctx, const gbProxyOp_t* op, int event, gbResult_t res, uint64_t bytesSent);
  void* ctx;
  int64_t pollNs; /* the nap between looks at watches when nothing else is queued (0: os/backoff.h's
                     GB_OS_SLEEP_MAX_NS) */
} gbProxyConfig_t;

gbResult_t gbProxyCreate(const gbProxyConfig_t* cfg, gbProxy_t** out);
/* Enqueues; never blocks on running work. Takes arg: freeArg frees it after
 * the step (or at destroy when it never runs); when it fails it stays the
 * caller's. */
gbResult_t gbProxyPost(gbProxy_t* p, const gbProxyOp_t* op);
/* Waits until every posted step ran (or failed). */
gbResult_t gbProxyDrain(gbProxy_t* p, gbDeadline_t deadline);
/* Stops the thread once it is idle (abort makes running steps fail first). */
void gbProxyDestroy(gbProxy_t* p);

#endif
