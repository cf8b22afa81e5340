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
  gbSockAddr_t rootBind;/* where rank 0's root listens */
} gbBootEnv_t;

/* Reads the variables. Rank 0 (without GPUBRIDGE_UNIQUE_ID) starts the
 * rendezvous root here, bound to MASTER_ADDR when that is an address of this
 * host (any address otherwise), so that a failure to host it can still be
 * told to the job. A process whose variables are wrong (RANK, WORLD_SIZE, one
 * of them without the other, LOCAL_RANK, MASTER_PORT, GPUBRIDGE_UNIQUE_ID, a
 * second RANK=0) but that can still reach
 * the root reports its problem there, so every rank fails at once with one
 * text naming it; it then returns that verdict (text recorded). */
gbResult_t gbBootEnvRead(gbBootEnv_t* out);

#endif
