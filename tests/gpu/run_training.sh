#!/usr/bin/env bash
# The torch.distributed backend "gpubridge" on real GPUs (docs/PYTHON.md):
# tests/gpu/train_job.py trains the same model under DDP and under FSDP2
#   1. with backend "nccl" (the reference; with one GPU, NCCL refuses two
#      ranks on it, so one process trains on both ranks' batches: --plays 2);
#   2. with backend "gpubridge", GPUBRIDGE_SPLIT_TEST=half: two islands of one
#      rank, joined by the bridge;
#   3. with backend "gpubridge", rank 1 an emulated AMD rank (tests/gpu/
#      emulated_amd: HIP and RCCL served by CUDA and NCCL), rank 0 NVIDIA;
# and compares each run's loss curve and final-parameter digest with the
# reference (tests/gpu/compare_losses.py). The
# gpubridge runs log at INFO, so their "traffic: bridge sent N bytes" lines
# show the gradients crossed the bridge.
# Output: stdout and $OUT/training.log.
#
#   OUT=/tmp/out tests/gpu/run_training.sh   (repository root; B=build folder,
#   PY=python with torch, STEPS=training steps, STEP_TIMEOUT=seconds per run)
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
OUT=${OUT:-/tmp}
B=${B:-build-gpu}
PY=${PY:-python3}
STEPS=${STEPS:-20}
mkdir -p "$OUT"
exec > >(tee "$OUT/training.log") 2>&1
date -u
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
cmake -S . -B $B -DGPUBRIDGE_WERROR=ON >/dev/null &&
  cmake --build $B -j"$(nproc)" --target gpubridge gb_emulated_amdhip64 gb_emulated_rccl >/dev/null || exit 1
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
RIG=$PWD/$B/tests/emulated_amd
RUN="timeout ${STEP_TIMEOUT:-300} torchrun --standalone --nproc_per_node 2"
JOB=tests/gpu/train_job.py
if [ "$GPUS" -ge 2 ]; then ONE="$RUN"; PLAYS=; else ONE="${RUN/--nproc_per_node 2/--nproc_per_node 1}"; PLAYS="--plays 2"; fi
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} GPUBRIDGE_LIBRARY=$PWD/$B/lib/libgpubridge.so
LOGS="GPUBRIDGE_DEBUG=INFO GPUBRIDGE_DEBUG_SUBSYS=INIT,NET"
WRAP=tests/gpu/emulated_amd_rank1.sh
export GB_RIG=$RIG
fails=0
verdict() { if [ "$1" -eq 0 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }
for mode in ddp fsdp; do
  flag=; [ $mode = fsdp ] && flag=--fsdp
  echo; echo "== $mode: backend nccl (reference)${PLAYS:+, one GPU: one process, $PLAYS}"
  $ONE $JOB --steps $STEPS $flag $PLAYS 2>&1 | tee "$OUT/${mode}_nccl.txt"
  verdict "${PIPESTATUS[0]}" "$mode on NCCL"
  echo; echo "== $mode: backend gpubridge, split-test (two islands of one rank, bridged)"
  env $LOGS GPUBRIDGE_SPLIT_TEST=half $RUN $JOB --backend gpubridge --steps $STEPS $flag 2>&1 |
    tee "$OUT/${mode}_split.txt"
  verdict "${PIPESTATUS[0]}" "$mode on gpubridge, split-test"
  echo; echo "== $mode: backend gpubridge, rank 0 NVIDIA, rank 1 emulated AMD (bridged)"
  env $LOGS $RUN --no-python "$WRAP" $PY $JOB --backend gpubridge --steps $STEPS $flag 2>&1 |
    tee "$OUT/${mode}_amd.txt"
  verdict "${PIPESTATUS[0]}" "$mode on gpubridge, nvidia + emulated AMD"
  echo; echo "== $mode: what crossed the bridge, and the islands"
  grep -hE "traffic: (bridge|world)|ready: island" "$OUT/${mode}_split.txt" "$OUT/${mode}_amd.txt" |
    sed 's/^.*gpubridge/gpubridge/' | sort | uniq -c | head -12
  echo; echo "== $mode: loss curves against the reference"
  $PY tests/gpu/compare_losses.py "$OUT/${mode}_nccl.txt" "$OUT/${mode}_split.txt" "$OUT/${mode}_amd.txt"
  verdict $? "$mode loss curves"
done
echo
echo "training: $fails failed"
exit $((fails > 0))
