/* Reading a launcher's environment for gbCommInitFromEnv: torchrun and
 * gpubridge-run (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
 * Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), Open MPI
 * (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), or GPUBRIDGE_UNIQUE_ID. */
#ifndef GB_BOOT_ENV_H
#define GB_BOOT_ENV_H

#include "boot/uniqueid.h"

typedef struct {
  int rank, nranks, localRank;
  const char* launcher; /* "torchrun", "slurm", "openmpi" */
  gbBootId_t id;
  int hostsRoot;        /* this rank starts the root, bound to rootBind */
  gbSockAddr_t rootBind;
} gbBootEnv_t;

gbResult_t gbBootEnvRead(gbBootEnv_t* out);

#endif
