/* The rendezvous under a real torchrun. Its agent already listens on
 * MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), serving torch's TCPStore,
 * so rank 0 cannot host the root there: it starts the root on a free port
 * and publishes the unique id (root address and a random secret) in that
 * store under a key of this run (TORCHELASTIC_RUN_ID, the restart count and
 * this process's count of such inits); the other ranks wait for the key and
 * read it. Everything has the deadline GPUBRIDGE_TIMEOUT. */
#ifndef GB_BOOT_ENV_STORE_H
#define GB_BOOT_ENV_STORE_H

#include <stddef.h>
#include "boot/uniqueid.h"

/* Whether this process runs under torchrun with its agent's store
 * (TORCHELASTIC_USE_AGENT_STORE=True, as torch itself tests it). */
int gbBootEnvAgentStore(void);

typedef struct {
  const gbSockAddr_t* store; /* MASTER_ADDR:MASTER_PORT */
  const gbSockAddr_t* bind;  /* where rank 0's root listens (port ignored), or NULL: the chosen interface */
  int claimRoot;             /* this process is RANK=0 */
  int rank;                  /* for messages; -1 when unknown */
  double timeoutSec;
} gbBootStoreRdv_t;

/* Fills *id (root address and secret); *hostsRoot says whether this process
 * started the root. A process claiming rank 0 after another one did gets
 * the id too and *rival describes the first ("pid 42 on node1"), so it can
 * report itself to that root. Rank 0 that cannot start the root publishes
 * why, so every rank fails at once with that text. */
gbResult_t gbBootStoreRendezvous(const gbBootStoreRdv_t* in, gbBootId_t* id, int* hostsRoot, char* rival,
                                 size_t rivalLen);

#endif
