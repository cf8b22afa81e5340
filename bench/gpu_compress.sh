#!/usr/bin/env bash
# Bridge compression on one NVIDIA GPU, in one run: the bridged all-reduce
# (two split-test ranks sharing the GPU, and rank 1 an emulated AMD rank,
# tests/gpu/emulated_amd) uncompressed, with GPUBRIDGE_BRIDGE_COMPRESSION=bf16
# and with fp8, 1 MiB .. 256 MiB, each checked (-c 1). The last line is
#   bf16_speedup_256MiB <x> fp8_speedup_256MiB <y>
# (split-test, out-of-place time off over time compressed). Output also goes
# to ${OUT:-/tmp}/gpu_compress.log. Run from the repository root.
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
O=${OUT:-/tmp}
exec > >(tee "$O/gpu_compress.log") 2>&1
. bench/gpu_env.sh
# One gpubridge-perf line's out-of-place time (us) for a size in bytes.
usAt() { awk -v s="$1" '$2 == s && $4 != "" {print $7; exit}'; }
for c in off bf16 fp8; do
  echo "== all_reduce, split-test, GPUBRIDGE_BRIDGE_COMPRESSION=$c"
  GPUBRIDGE_BRIDGE_COMPRESSION=$c GPUBRIDGE_SPLIT_TEST=half $RUN $P all_reduce -b 1M -e 256M -f 4 -n 10 -w 3 -c 1 |
    tee "$O/compress_$c.txt" | grep -E "float|rror|wrong"
done
for c in off bf16 fp8; do
  echo "== all_reduce, rank 0 NVIDIA, rank 1 emulated AMD, GPUBRIDGE_BRIDGE_COMPRESSION=$c"
  GPUBRIDGE_BRIDGE_COMPRESSION=$c GB_RIG=$RIG GPUBRIDGE_HIPRTC_LIBRARY=$RIG/libhiprtc.so $RUN \
    tests/gpu/emulated_amd_rank1.sh $P all_reduce -b 16M -e 256M -f 4 -n 10 -w 3 -c 1 | grep -E "float|rror|wrong"
done
off=$(usAt 268435456 < "$O/compress_off.txt")
b=$(usAt 268435456 < "$O/compress_bf16.txt")
f=$(usAt 268435456 < "$O/compress_fp8.txt")
awk -v o="${off:-0}" -v b="${b:-0}" -v f="${f:-0}" 'BEGIN {
  printf "bf16_speedup_256MiB %s fp8_speedup_256MiB %s\n", (b > 0 ? sprintf("%.2f", o / b) : "n/a"),
         (f > 0 ? sprintf("%.2f", o / f) : "n/a") }'
