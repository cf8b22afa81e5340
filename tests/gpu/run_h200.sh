#!/usr/bin/env bash
# Everything docs/HARDWARE_VALIDATION.md records, in one run on a machine with
# two NVIDIA GPUs: build, the GPU tests, and the figures. Output goes to
# stdout (and $OUT/gpu.log when OUT is set).
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
exec > >(tee "${OUT:-/tmp}/gpu.log") 2>&1
date -u
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv
nvcc --version | tail -1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
cmake -S . -B build-gpu -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build build-gpu -j16 >/dev/null || exit 1
B=build-gpu
export GB_TEST_BUILD_DIR=$PWD/$B GB_TEST_SOURCE_DIR=$PWD
for t in tests/gpu/test_*.py; do echo "== $t"; timeout 400 python3 "$t"; echo "rc $?"; done
echo "== the Python package's GPU suites (the backend; DDP with the weighted average, split-test on one GPU)"
for t in tests/python/test_gpu_*.py; do echo "== $t"; timeout 400 python3 "$t"; echo "rc $?"; done
echo "== call return against stream completion, 256 MiB, split-test (bridged)"
GPUBRIDGE_SPLIT_TEST=half timeout 120 $B/bin/gpubridge-run -n 2 -- $B/tests/rank_enqueue_time 256 3
echo "== native policy against raw NCCL, 1 MiB .. 1 GiB"
timeout 200 $B/bin/gpubridge-run -n 2 -- $B/bin/gpubridge-perf all_reduce -b 1M -e 1G -f 4 -n 20 -w 5 -c 1
timeout 200 torchrun --nproc_per_node 2 bench/nccl_torch_allreduce.py -b 1M -e 1G -f 4 -n 20 -w 5 2>&1 | grep nccl-torch
echo "== bridged (split-test) 256 MiB against pinned copy bandwidth"
timeout 120 python3 bench/pinned_copy_torch.py -s 256
GPUBRIDGE_SPLIT_TEST=half timeout 200 $B/bin/gpubridge-run -n 2 -- $B/bin/gpubridge-perf all_reduce -b 8 -e 256M -f 32 -n 5 -w 2 -c 1
echo "== the GPU bridge's targets (bench/gpu_bridge.sh)"
OUT=${OUT:-/tmp} BUILD=$B timeout 400 bash bench/gpu_bridge.sh | tail -3
echo "== unit tests on the GPU machine"
(cd $B && timeout 200 ctest -L unit -j8 2>&1 | tail -3)
