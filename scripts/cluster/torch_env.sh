#!/bin/sh
# torch.distributed's env:// variables from Slurm's, for a rank that srun
# started (MASTER_ADDR and MASTER_PORT come from the kit, exported by srun):
#   srun ... sh torch_env.sh python3 train_job.py ...
export RANK="${SLURM_PROCID:?not under srun}" WORLD_SIZE="${SLURM_NTASKS:?not under srun}"
export LOCAL_RANK="${SLURM_LOCALID:-0}"
exec "$@"
