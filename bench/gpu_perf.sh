#!/usr/bin/env bash
# gpubridge-perf on a machine with NVIDIA GPUs, for docs/PERFORMANCE.md:
# every collective against NCCL alone (--baseline), natively (one island) and
# bridged (split-test: two one-rank islands joined over the host), --tune on
# the bridged job, and the GPU targets of the performance issue: bridged
# all-reduce at 256 MiB against pinned copy bandwidth, bridged 8-byte latency.
# With one GPU both ranks share it: no native two-rank job and no --baseline
# (NCCL refuses two ranks on one GPU). Run from the repository root; output goes to stdout and
# to ${OUT:-/tmp}: gpu_perf.log, tuned_thresholds.txt, perf_*.json.
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
O=${OUT:-/tmp}
exec > >(tee "$O/gpu_perf.log") 2>&1
date -u
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv
B=${BUILD:-build-gpu}
cmake -S . -B "$B" -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build "$B" -j"$(nproc)" >/dev/null || exit 1
RUN="timeout 300 $B/bin/gpubridge-run -n 2 --"
P=$B/bin/gpubridge-perf
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
BASE=; [ "$GPUS" -ge 2 ] && BASE=--baseline
if [ "$GPUS" -ge 2 ]; then
  echo "== all_reduce, one NVIDIA island (native), against NCCL alone"
  $RUN $P all_reduce -b 8 -e 1G -f 4 -n 20 -w 5 -c 1 --baseline -J "$O/perf_native_all_reduce.json"
fi
for c in all_reduce broadcast reduce all_gather reduce_scatter alltoall sendrecv; do
  echo "== $c, split-test (two one-rank islands, bridged)${BASE:+, against NCCL alone}"
  GPUBRIDGE_SPLIT_TEST=half $RUN $P $c -b 8 -e 256M -f 8 -n 10 -w 3 -c 1 $BASE -J "$O/perf_split_$c.json"
done
echo "== --tune all_reduce, split-test"
GPUBRIDGE_SPLIT_TEST=half $RUN $P all_reduce -b 8 -e 256M -f 4 -n 10 -w 3 -c 1 --tune "$O/tuned_thresholds.txt"
echo "== all_reduce, split-test, policy tuned with that file"
GPUBRIDGE_SPLIT_TEST=half GPUBRIDGE_POLICY=tuned GPUBRIDGE_THRESHOLDS="$O/tuned_thresholds.txt" \
  $RUN $P all_reduce -b 8 -e 256M -f 4 -n 10 -w 3 -c 1
echo "== targets: pinned copy bandwidth, then bridged (split-test) all_reduce 8 B and 256 MiB in the same run"
timeout 120 python3 bench/pinned_copy_torch.py -s 256
GPUBRIDGE_SPLIT_TEST=half $RUN $P all_reduce -b 8 -e 8 -n 200 -w 20 -c 1
GPUBRIDGE_SPLIT_TEST=half $RUN $P all_reduce -b 256M -e 256M -n 10 -w 3 -c 1
echo "== --baseline refused on simulated ranks (expect exit 2)"
GPUBRIDGE_VENDOR=nvidia $RUN $P all_reduce -b 8 -e 8 --baseline; echo "rc $?"
