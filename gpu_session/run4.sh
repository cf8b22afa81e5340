#!/usr/bin/env bash
# session GPU run 4: correctness of the packed exchange, then its sweep against the copy path under MPS
set -u
export NCCL_NVLS_ENABLE=0
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cmake -S . -B build-gpu -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build build-gpu -j16 >/dev/null || { echo BUILD FAILED; exit 1; }
echo "built $(date -u +%T)"
BN=$PWD/build-gpu
rows() { awk '$1=="[0]" && $2 ~ /^[0-9]+$/ && NF>=14 {n++; w+=$10+$14; printf "%s %s %s %s | %s %s\n", $2, $4, $7, $8, $11, $12} END {printf "rows %d wrong %d\n", n, w}'; }
perf() { GPUBRIDGE_SPLIT_TEST=half timeout 90 $BN/bin/gpubridge-run -n 2 -- $BN/bin/gpubridge-perf all_reduce "$@" -c 1 2>&1 | rows; }
echo "== test_gpu_reduce $(date -u +%T)"
GB_TEST_BUILD_DIR=$BN GB_TEST_SOURCE_DIR=$PWD timeout 100 python3 tests/gpu/test_gpu_reduce.py 2>&1 | tail -4
timeout 30 python3 bench/pinned_copy_torch.py -s 256
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up $(date -u +%T)"
echo "== MPS every type and op through the exchange, defaults"; perf -b 4 -e 1M -f 16 -d all -o all -n 2 -w 1 | tail -1
echo "== MPS every type and op, ranges of 8 KiB, 4 a block"; GB_EXP_XRANGE=8192 GB_EXP_XPIECES=4 perf -b 4 -e 1M -f 16 -d all -o all -n 2 -w 1 | tail -1
echo "== MPS copy path (GPUBRIDGE_EXCHANGE=off)"; GPUBRIDGE_EXCHANGE=off perf -b 256K -e 1M -f 4 -n 100 -w 10
echo "== MPS exchange, packs, defaults"; perf -b 8 -e 1M -f 8 -n 100 -w 10
for cfg in "8192 4" "16384 2" "4096 4" "8192 2" "4096 8" "16384 1"; do set -- $cfg
  echo "== MPS exchange, ranges of $1 B, $2 a block"; GB_EXP_XRANGE=$1 GB_EXP_XPIECES=$2 perf -b 256K -e 1M -f 4 -n 100 -w 10
done
echo "== MPS copy path (GPUBRIDGE_EXCHANGE=off) again"; GPUBRIDGE_EXCHANGE=off perf -b 256K -e 1M -f 4 -n 100 -w 10
echo "== MPS 16M 256M"; perf -b 16M -e 256M -f 16 -n 10 -w 3
echo quit | nvidia-cuda-mps-control
echo "== time-sliced defaults"; perf -b 8 -e 16M -f 16 -n 20 -w 3
echo "all done $(date -u +%T)"
