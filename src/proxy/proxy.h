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

typedef enum { GB_PROXY_ALLREDUCE, GB_PROXY_BCAST } gbProxyKind_t;

typedef struct {
  gbProxyKind_t kind;
  gbAlgoGroup_t* group;
  void* buf;                 /* the staging slot, in place */
  size_t count;
  gbDataType_t dtype;
  gbRedOp_t op;
  int divisor;
  int root;                  /* broadcast: index in group */
  gbFlag_t* ready;           /* wait until ready->value >= readyValue */
  uint64_t readyValue;
  gbFlag_t* done;            /* then set done->value = doneValue */
  uint64_t doneValue;
  uint64_t seq;              /* the collective's sequence number, for messages */
} gbProxyOp_t;

typedef struct gbProxy gbProxy_t;

typedef struct {
  double timeoutSec;
  const volatile int* abortFlag;
  void (*onError)(void* ctx, gbResult_t res); /* the first failure */
  void (*onIdle)(void* ctx);                  /* called about every 100 ms while idle */
  void* ctx;
} gbProxyConfig_t;

gbResult_t gbProxyCreate(const gbProxyConfig_t* cfg, gbProxy_t** out);
/* Enqueues; never blocks on running work. */
gbResult_t gbProxyPost(gbProxy_t* p, const gbProxyOp_t* op);
/* Waits until every posted step ran (or failed). */
gbResult_t gbProxyDrain(gbProxy_t* p, gbDeadline_t deadline);
/* Stops the thread once it is idle (abort makes running steps fail first). */
void gbProxyDestroy(gbProxy_t* p);

#endif
