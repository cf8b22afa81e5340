#!/bin/sh
# One rank of a local kit job on NVIDIA GPUs (kit.py's
# local_job): ranks from GB_KIT_AMD_FROM on are emulated AMD ranks (HIP,
# HIPRTC and RCCL of the test rig in GB_KIT_RIG, <build>/tests/emulated_amd,
# served by CUDA, NVRTC and NCCL), the ranks before them NVIDIA ones; every
# rank on GPU LOCAL_RANK modulo GB_KIT_GPUS, as tests/gpu/train_job.py places
# its tensors.
#   GB_KIT_RIG=RIG GB_KIT_AMD_FROM=K GB_KIT_GPUS=G gpubridge-run -n N -- sh emulated_amd.sh PROGRAM ARGS...
export GPUBRIDGE_DEVICE=$((${LOCAL_RANK:-0} % ${GB_KIT_GPUS:-1}))
if [ "${RANK:-0}" -ge "${GB_KIT_AMD_FROM:?}" ]; then
  export GPUBRIDGE_DEVICE_BACKEND=hip GPUBRIDGE_HIP_LIBRARY="$GB_KIT_RIG/libamdhip64.so" \
    GPUBRIDGE_HIPRTC_LIBRARY="$GB_KIT_RIG/libhiprtc.so" GPUBRIDGE_RCCL_LIBRARY="$GB_KIT_RIG/librccl.so.1"
else
  export GPUBRIDGE_DEVICE_BACKEND=cuda
fi
unset GB_KIT_RIG GB_KIT_AMD_FROM GB_KIT_GPUS
exec "$@"
