#!/bin/sh
# Wraps one rank of a two-rank torchrun job: rank 1 becomes an emulated AMD
# rank (HIP and RCCL from the test rig in $GB_RIG, <build>/tests/emulated_amd,
# served by CUDA and NCCL), every other rank an NVIDIA one. Used by
# run_training.sh and run_drop_in.sh:
#   GB_RIG=<rig> torchrun --no-python ... tests/gpu/emulated_amd_rank1.sh python3 JOB ARGS
case "$RANK" in
  1) export GPUBRIDGE_DEVICE_BACKEND=hip GPUBRIDGE_HIP_LIBRARY="$GB_RIG/libamdhip64.so" \
       GPUBRIDGE_RCCL_LIBRARY="$GB_RIG/librccl.so.1" ;;
  *) export GPUBRIDGE_DEVICE_BACKEND=cuda ;;
esac
unset GB_RIG
exec "$@"
