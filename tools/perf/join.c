/* How this process joins its job: through a launcher's variables
 * (gbCommInitFromEnv reads gpubridge-run's and torchrun's, Slurm's, Open
 * MPI's, or GPUBRIDGE_UNIQUE_ID), or, started with none of them, as a job of
 * one rank, as nccl-tests runs without mpirun. */
#include <stdlib.h>
#include "perf.h"

/* Any of these says a launcher started this process, maybe as one of many:
 * the variables gbCommInitFromEnv reads, and those of launchers it does not
 * read (MPICH, Intel MPI, PMIx), whose ranks must not each run alone. */
static const char* const launcherVars[] = {
    "RANK",         "WORLD_SIZE",           "LOCAL_RANK",           "SLURM_PROCID", "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",     "PMIX_RANK",
    "GPUBRIDGE_UNIQUE_ID"};

const char* perfJoinLauncherVar(void) {
  for (size_t k = 0; k < sizeof(launcherVars) / sizeof(launcherVars[0]); k++) {
    const char* v = getenv(launcherVars[k]);
    if (v && v[0]) return launcherVars[k];
  }
  return NULL;
}

void perfJoin(perfCtx_t* ctx, gbConfig_t* config) {
  if (perfJoinLauncherVar()) {
    perfCheck(gbCommInitFromEnv(&ctx->comm, config), "gbCommInitFromEnv");
    return;
  }
  /* Alone: this process makes the id and is the only rank, as
   * ncclCommInitAll does for nccl-tests' single process. */
  gbUniqueId id;
  perfCheck(gbGetUniqueId(&id), "gbGetUniqueId");
  perfCheck(gbCommInitRankConfig(&ctx->comm, 1, id, 0, config), "gbCommInitRankConfig");
  ctx->alone = 1;
}
