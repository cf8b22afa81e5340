/* The communicator: its topology, settings, connections, island, staging
 * slots, proxy thread, and error state. */
#ifndef GB_CORE_COMM_H
#define GB_CORE_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "algo/algo.h"
#include "boot/probe.h"
#include "boot/topology.h"
#include "boot/uniqueid.h"
#include "device/device.h"
#include "island/island.h"
#include "net/net.h"
#include "proxy/proxy.h"

#define GB_COMM_MAGIC 0x67624361u /* "gbCa" */
#define GB_COMM_DEAD 0xdeadbeefu

enum { GB_TAG_WORLD = 1, GB_TAG_ISLAND = 2, GB_TAG_BRIDGE = 3 };
enum { GB_INIT_RUNNING = 0, GB_INIT_DONE = 1, GB_INIT_FAILED = 2 };

/* A host group and its connections. */
typedef struct {
  char name[48];
  int* ranks;
  gbNetConn_t** conns;
  gbAlgoGroup_t algo;
  int active;
} gbCommGroup_t;

/* Host memory the streams and the proxy meet in: nslots chunks, and per slot
 * three monotone flags: staged (stream -> proxy), done (proxy -> stream),
 * freed (the stream copied the result out; the slot may be reused). */
typedef struct {
  void* base;
  size_t slotBytes;
  int nslots;
  gbFlag_t* staged;
  gbFlag_t* done;
  gbFlag_t* freed;
  uint64_t* uses;  /* per slot: how many chunks have used it (caller thread) */
  size_t next;     /* next slot to use */
} gbStaging_t;

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
  gbCommGroup_t world, island, bridge;
  gbIsland_t* islandComm;
  gbStaging_t staging;
  gbProxy_t* proxy;
  void* scratchDev;         /* a small device buffer for gbBarrier */
  gbFlag_t* streamDone;     /* collectives whose stream work ran or was dropped */
  uint64_t streamPosted;    /* collectives enqueued on streams */
  uint64_t seq;             /* collectives enqueued */

  volatile int abortFlag;
  int callsInFlight;        /* threads inside gbCommFinalize (abort waits for them) */
  volatile int asyncError;  /* gbResult_t; first failure wins */
  volatile int initState;
  pthread_t initThread;
  int initThreadStarted;
  pthread_mutex_t errorLock;
  char errorText[1024];
};

/* Records the comm's first asynchronous failure, makes every wait of the comm
 * return, and closes its connections so peers fail fast instead of timing out. */
void gbCommFail(gbComm_t comm, gbResult_t res);

/* Whether comm points to a live communicator. */
int gbCommIsValid(const struct gbComm* comm);

/* Init: the whole start-up (probe, rendezvous, mesh, island, staging, proxy). */
gbResult_t gbCommInitCore(gbComm_t comm, int nranks, const gbBootId_t* id, int rank, int localRank,
                          const gbConfig_t* config);
/* Allocates a comm in state "initializing" (so abort works during init). */
gbResult_t gbCommAlloc(gbComm_t* out);
/* Releases everything; waits (bounded) for the streams the comm used. */
void gbCommFree(gbComm_t comm);

/* Schedules (core/enqueue.c). */
gbResult_t gbCommEnqueueAllReduce(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  gbRedOp_t op, void* stream);
gbResult_t gbCommEnqueueBroadcast(gbComm_t comm, const void* send, void* recv, size_t count, gbDataType_t dt,
                                  int root, void* stream);

#endif
