#!/usr/bin/env bash
# session GPU run 6: the exchange as planned (16-byte loads; blocks by size), its correctness and figures
set -u
export NCCL_NVLS_ENABLE=0
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1
cmake -S . -B build-gpu -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build build-gpu -j16 >/dev/null || { echo BUILD FAILED; exit 1; }
BN=$PWD/build-gpu
rows() { awk '$1=="[0]" && $2 ~ /^[0-9]+$/ && NF>=14 {n++; w+=$10+$14; printf "%s %s %s %s | %s %s\n", $2, $4, $7, $8, $11, $12} END {printf "rows %d wrong %d\n", n, w}'; }
perf() { GPUBRIDGE_SPLIT_TEST=half timeout 120 $BN/bin/gpubridge-run -n 2 -- $BN/bin/gpubridge-perf all_reduce "$@" -c 1 2>&1 | rows; }
echo "== test_gpu_reduce $(date -u +%T)"
GB_TEST_BUILD_DIR=$BN GB_TEST_SOURCE_DIR=$PWD timeout 100 python3 tests/gpu/test_gpu_reduce.py 2>&1 | tail -2
timeout 30 python3 bench/pinned_copy_torch.py -s 256
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up $(date -u +%T)"
echo "== MPS every type and op, 4 B .. 1 MiB"; perf -b 4 -e 1M -f 4 -d all -o all -n 2 -w 1 | tail -1
echo "== MPS the exchange, 8 B .. 1 MiB"; perf -b 8 -e 1M -f 2 -n 100 -w 10
echo "== MPS the copy path (GPUBRIDGE_EXCHANGE=off), 8 B .. 1 MiB"; GPUBRIDGE_EXCHANGE=off perf -b 8 -e 1M -f 2 -n 100 -w 10
echo "== MPS the exchange again, 256 KiB .. 1 MiB"; perf -b 256K -e 1M -f 2 -n 100 -w 10
echo "== MPS 16 MiB, 256 MiB"; perf -b 16M -e 256M -f 16 -n 10 -w 3
for c in 2M 4M 8M; do for k in 2 4; do
  echo "== MPS 16 MiB chunk $c slots $k"; GPUBRIDGE_CHUNK_BYTES=$c GPUBRIDGE_STAGING_SLOTS=$k perf -b 16M -e 16M -n 20 -w 3
done; done
for c in 8M 16M 32M; do for k in 2 4; do
  echo "== MPS 256 MiB chunk $c slots $k"; GPUBRIDGE_CHUNK_BYTES=$c GPUBRIDGE_STAGING_SLOTS=$k perf -b 256M -e 256M -n 5 -w 2
done; done
echo quit | nvidia-cuda-mps-control
echo "== time-sliced 8 B .. 256 MiB"; perf -b 8 -e 256M -f 16 -n 10 -w 3
echo "all done $(date -u +%T)"
