#!/usr/bin/env bash
# The GPU bridge's targets in one run, on one NVIDIA GPU (two split-test
# ranks share it): pinned copy bandwidth; bridged all-reduce of 8 B and
# 256 MiB over shared staging slots and, as the baseline in the same run, over
# the host transport (GPUBRIDGE_BRIDGE_SLOTS=off); the same with rank 1 an
# emulated AMD rank (tests/gpu/emulated_amd); the other collectives at
# 128 MiB; the all-reduce across simulated hosts (remote slots); with MPS=1
# 8 B, 1 MiB and 16 MiB all-reduces under MPS (and 8 B and 1 MiB without the
# exchange); with SWEEP=1 chunk sizes and depths. The last line is
#   bridged_over_pinned_256MiB <x> small_8B_us <y> mid_16MiB_over_pinned_mps <z>
# (x: out-of-place algbw over pinned device-to-host; y: the 8-byte time,
# time-sliced; z: the 16 MiB algbw under MPS over pinned d2h, n/a without MPS=1).
# Run from the repository root; output also goes to ${OUT:-/tmp}/gpu_bridge.log.
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
O=${OUT:-/tmp}
exec > >(tee "$O/gpu_bridge.log") 2>&1
. bench/gpu_env.sh
# One gpubridge-perf line's field for a size: out-of-place time (us) or algbw.
field() { awk -v s="$1" -v f="$2" '$2 == s && $4 != "" {print $f; exit}'; }
splittest() { GPUBRIDGE_SPLIT_TEST=half "$@"; }

pinned=$(timeout 120 python3 bench/pinned_copy_torch.py -s 256)
echo "$pinned"
d2h=$(echo "$pinned" | awk '{print $5}')

for mode in auto off; do
  echo "== all_reduce, split-test, GPUBRIDGE_BRIDGE_SLOTS=$mode: 8 B, then 256 MiB"
  GPUBRIDGE_BRIDGE_SLOTS=$mode splittest $RUN $P all_reduce -b 8 -e 8 -n 200 -w 20 -c 1 | tee "$O/ar8_$mode.txt" | grep float
  GPUBRIDGE_BRIDGE_SLOTS=$mode splittest $RUN $P all_reduce -b 256M -e 256M -n 10 -w 3 -c 1 | tee "$O/ar256_$mode.txt" |
    grep float
done
echo "== all_reduce, rank 0 NVIDIA, rank 1 emulated AMD: 8 B .. 256 MiB"
GB_RIG=$RIG GPUBRIDGE_HIPRTC_LIBRARY=$RIG/libhiprtc.so $RUN tests/gpu/emulated_amd_rank1.sh \
  $P all_reduce -b 8 -e 256M -f 32 -n 10 -w 3 -c 1 | tee "$O/ar_amd.txt" | grep -E "float|wrong|rror"
for c in all_gather reduce_scatter broadcast alltoall sendrecv; do
  echo "== $c, split-test, 128 MiB"
  splittest $RUN $P $c -b 128M -e 128M -n 10 -w 3 -c 1 | grep -E "float|rror"
done
# Across hosts: each rank names a host of its own (GPUBRIDGE_SIM_HOST), so the
# bridge crosses the network transport (TCP on this machine) with remote
# slots (pinned slots as the sockets' source and destination, the reduction
# on the GPU); the baseline is the host transport's CPU path.
for mode in auto off; do
  echo "== all_reduce across simulated hosts, GPUBRIDGE_BRIDGE_SLOTS=$mode: 1 MiB .. 256 MiB"
  GPUBRIDGE_BRIDGE_SLOTS=$mode splittest $RUN sh -c 'export GPUBRIDGE_SIM_HOST=host$RANK; exec "$@"' sh \
    $P all_reduce -b 1M -e 256M -f 16 -n 5 -w 2 -c 1 | grep -E "float|rror"
done
# MPS=1: the 8-byte all-reduce again with the two ranks' work under one MPS
# server (started here with its own pipe directory and quit after), which
# removes the time-slicing between the two processes' contexts.
if [ "${MPS:-0}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=$O/mps-pipe CUDA_MPS_LOG_DIRECTORY=$O/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  if nvidia-cuda-mps-control -d; then
    echo "== all_reduce under MPS, split-test: 8 B, 1 MiB, 16 MiB (the exchange up to 1 MiB, GPUBRIDGE_EXCHANGE=auto)"
    splittest $RUN $P all_reduce -b 8 -e 8 -n 200 -w 20 -c 1 | tee "$O/mps8.txt" | grep -E "float|rror"
    splittest $RUN $P all_reduce -b 1M -e 1M -n 50 -w 5 -c 1 | tee "$O/mps1m.txt" | grep -E "float|rror"
    splittest $RUN $P all_reduce -b 16M -e 16M -n 20 -w 3 -c 1 | tee "$O/mps16m.txt" | grep -E "float|rror"
    echo "== the same with GPUBRIDGE_EXCHANGE=off (the slots' copy path), the baseline"
    GPUBRIDGE_EXCHANGE=off splittest $RUN $P all_reduce -b 8 -e 8 -n 200 -w 20 -c 1 | grep -E "float|rror"
    GPUBRIDGE_EXCHANGE=off splittest $RUN $P all_reduce -b 1M -e 1M -n 50 -w 5 -c 1 | grep -E "float|rror"
  fi
  echo quit | nvidia-cuda-mps-control
  trap - EXIT
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
if [ "${SWEEP:-0}" = 1 ]; then
  for chunk in 1M 4M 16M; do
    for slots in 4 8; do
      echo "== sweep: all_reduce 256 MiB, GPUBRIDGE_CHUNK_BYTES=$chunk GPUBRIDGE_STAGING_SLOTS=$slots"
      GPUBRIDGE_CHUNK_BYTES=$chunk GPUBRIDGE_STAGING_SLOTS=$slots splittest $RUN $P all_reduce -b 256M -e 256M -n 5 -w 2 \
        -c 1 | grep float
    done
  done
fi
bw=$(field 268435456 8 <"$O/ar256_auto.txt")
base=$(field 268435456 8 <"$O/ar256_off.txt")
us=$(field 8 7 <"$O/ar8_auto.txt")
echo "baseline (host transport): 256 MiB $base GB/s, 8 B $(field 8 7 <"$O/ar8_off.txt") us"
mid="n/a"
if [ -s "$O/mps16m.txt" ]; then
  echo "under MPS: 8 B $(field 8 7 <"$O/mps8.txt") us, 1 MiB $(field 1048576 7 <"$O/mps1m.txt") us"
  mid=$(awk -v b="$(field 16777216 8 <"$O/mps16m.txt")" -v d="$d2h" 'BEGIN {printf "%.3f", b / d}')
fi
echo "bridged_over_pinned_256MiB $(awk -v b="$bw" -v d="$d2h" 'BEGIN {printf "%.3f", b / d}') small_8B_us $us mid_16MiB_over_pinned_mps $mid"
