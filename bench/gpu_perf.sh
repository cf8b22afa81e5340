#!/usr/bin/env bash
# gpubridge-perf on a machine with two NVIDIA GPUs, for docs/PERFORMANCE.md:
# every collective against NCCL alone (--baseline), natively (one island) and
# bridged (split-test: two one-GPU islands joined over the host), and --tune
# on the bridged job. Run from the repository root; output goes to stdout and
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
echo "== all_reduce, one NVIDIA island (native), against NCCL alone"
$RUN $P all_reduce -b 8 -e 1G -f 4 -n 20 -w 5 -c 1 --baseline -J "$O/perf_native_all_reduce.json"
for c in all_reduce broadcast reduce all_gather reduce_scatter alltoall sendrecv; do
  echo "== $c, split-test (two one-GPU islands, bridged), against NCCL alone"
  GPUBRIDGE_SPLIT_TEST=half $RUN $P $c -b 8 -e 256M -f 8 -n 10 -w 3 -c 1 --baseline -J "$O/perf_split_$c.json"
done
echo "== --tune all_reduce, split-test"
GPUBRIDGE_SPLIT_TEST=half $RUN $P all_reduce -b 8 -e 256M -f 4 -n 10 -w 3 -c 1 --tune "$O/tuned_thresholds.txt"
echo "== all_reduce, split-test, policy tuned with that file"
GPUBRIDGE_SPLIT_TEST=half GPUBRIDGE_POLICY=tuned GPUBRIDGE_THRESHOLDS="$O/tuned_thresholds.txt" \
  $RUN $P all_reduce -b 8 -e 256M -f 4 -n 10 -w 3 -c 1
echo "== --baseline refused on simulated ranks (expect exit 2)"
GPUBRIDGE_VENDOR=nvidia $RUN $P all_reduce -b 8 -e 8 --baseline; echo "rc $?"
