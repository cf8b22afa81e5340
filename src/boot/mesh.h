/* Connections inside one group of ranks (world, an island, the bridge): every
 * pair, each with the job secret in its hello. A rank connects to the members
 * before it and accepts the members after it; connects finish in the kernel's
 * backlog, so no order of arrival can deadlock. */
#ifndef GB_BOOT_MESH_H
#define GB_BOOT_MESH_H

#include <stdatomic.h>

#include "boot/probe.h"
#include "boot/uniqueid.h"
#include "net/net.h"

typedef struct {
  int tag;             /* names the group in hellos */
  const char* name;    /* for messages; must outlive the connections */
  int n;
  const int* ranks;    /* [n] global ranks, ascending */
  int me;              /* my index */
} gbMeshGroup_t;

/* The hello srcRank sends on each of nsocks sockets of a connection for tag
 * (the job's secret and the communicator's hash from id; sockIndex 0). */
gbNetHello_t gbBootHello(const gbBootId_t* id, int srcRank, int tag, int nsocks);

/* conns[n] receives a connection per other member (conns[me] = NULL). On
 * failure the connections made so far stay in conns (NULL for the others),
 * for the caller to shut down with the cause of its failure and close. */
gbResult_t gbBootMeshConnect(const gbNetOps_t* net, gbNetListener_t* listener, const gbProbe_t* probes,
                             const gbBootId_t* id, int nsocks, const gbMeshGroup_t* group, double timeoutSec,
                             const atomic_int* abortFlag, gbNetConn_t** conns);

#endif
