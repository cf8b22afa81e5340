#!/usr/bin/env bash
# session GPU run 5: the exchange at 1 MiB: ranges and pieces, against the copy path, under MPS
set -u
export NCCL_NVLS_ENABLE=0
date -u
cmake -S . -B build-gpu -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build build-gpu -j16 >/dev/null || { echo BUILD FAILED; exit 1; }
BN=$PWD/build-gpu
rows() { awk '$1=="[0]" && $2 ~ /^[0-9]+$/ && NF>=14 {n++; w+=$10+$14; printf "%s %s %s %s | %s %s\n", $2, $4, $7, $8, $11, $12} END {printf "rows %d wrong %d\n", n, w}'; }
perf() { GPUBRIDGE_SPLIT_TEST=half timeout 90 $BN/bin/gpubridge-run -n 2 -- $BN/bin/gpubridge-perf all_reduce "$@" -c 1 2>&1 | rows; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up $(date -u +%T)"
echo "== copy path"; GPUBRIDGE_EXCHANGE=off perf -b 128K -e 1M -f 2 -n 100 -w 10
echo "== defaults"; perf -b 128K -e 1M -f 2 -n 100 -w 10
for cfg in "65536 1" "131072 1" "262144 1" "65536 1" "131072 1" "262144 1" "131072 2" "524288 1"; do set -- $cfg
  echo "== ranges of $1 B, $2 a block"; GB_EXP_XRANGE=$1 GB_EXP_XPIECES=$2 perf -b 128K -e 1M -f 2 -n 100 -w 10
done
echo "== copy path again"; GPUBRIDGE_EXCHANGE=off perf -b 128K -e 1M -f 2 -n 100 -w 10
echo quit | nvidia-cuda-mps-control
echo "all done $(date -u +%T)"
