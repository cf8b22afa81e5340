#!/usr/bin/env bash
# libgpubridge-nccl as a drop-in NCCL, on a machine with NVIDIA GPUs and
# torch (docs/DROP_IN.md). Runs the unmodified job tests/gpu/train_job.py
# (backend "nccl") under torchrun, training under DDP and then FSDP2:
#   1. plain NCCL;
#   2. LD_PRELOAD=libgpubridge-nccl.so, one island (policy native: NCCL below);
#   3. preloaded, GPUBRIDGE_SPLIT_TEST=half: two islands of one rank, bridged;
#   4. preloaded, rank 1 an emulated AMD rank (tests/gpu/emulated_amd: HIP and
#      RCCL served by CUDA and NCCL), rank 0 NVIDIA: bridged;
# and compares loss curves and parameter digests with run 1
# (tests/gpu/compare_losses.py). With one GPU, runs 1 and 2 are one process
# training on both ranks' batches (NCCL refuses two ranks on one GPU).
# Then, with two GPUs, all_reduce busbw 1 MiB .. 1 GiB, plain NCCL and
# preloaded native alternating, and preloaded split-test; with one GPU, the
# time per call of one rank, plain and preloaded. Before that it checks that
# torch reaches NCCL through the dynamic linker (else a preload cannot
# interpose) and which of its own exported nccl* functions the NCCL library
# calls through its PLT: the preload interposes those calls, and
# libgpubridge-nccl hands them back to NCCL (abi/nccl/interpose.c); step 2
# lists the ones it forwarded.
# Output: stdout and $OUT/drop_in.log.
#
#   OUT=/tmp/out tests/gpu/run_drop_in.sh        (from the repository root;
#   B=build folder, PY=python with torch, STEP_TIMEOUT=seconds per torchrun)
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
OUT=${OUT:-/tmp}
B=${B:-build-gpu}
PY=${PY:-python3}
mkdir -p "$OUT"
exec > >(tee "$OUT/drop_in.log") 2>&1
date -u
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"
cmake -S . -B $B -DGPUBRIDGE_WERROR=ON >/dev/null &&
  cmake --build $B -j"$(nproc)" --target gpubridge gpubridge-nccl gb_emulated_amdhip64 gb_emulated_rccl >/dev/null || exit 1
LIB=$PWD/$B/lib/libgpubridge-nccl.so
RIG=$PWD/$B/tests/emulated_amd
RUN="timeout ${STEP_TIMEOUT:-300} torchrun --standalone --nproc_per_node 2"
JOB=tests/gpu/train_job.py
fails=0
step() { echo; echo "== $*"; }
verdict() { if [ "$1" -eq 0 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fails=$((fails + 1)); fi; }

step "0. torch reaches NCCL through the dynamic linker; does NCCL call its own nccl* through the PLT?"
TORCH_LIB=$($PY -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
readelf -dW "$TORCH_LIB"/libtorch_cuda.so | grep -E 'NEEDED.*nccl' || echo "libtorch_cuda.so has no NEEDED libnccl"
nm -D --undefined-only "$TORCH_LIB"/libtorch_cuda.so | grep -cE ' ncclAllReduce$' |
  sed 's/^/undefined ncclAllReduce references in libtorch_cuda.so (1 = the preload can interpose): /'
NCCL=$($PY - <<'EOF'
import torch, torch.distributed  # noqa: F401  (loads libnccl)
torch.cuda.nccl.version()
for line in open("/proc/self/maps"):
    if "libnccl.so" in line:
        print(line.split()[-1]); break
EOF
)
echo "NCCL in the torch process: ${NCCL:-not found}"
if [ -n "$NCCL" ]; then
  readelf -dW "$NCCL" | grep -E 'SYMBOLIC|FLAGS' || echo "no DT_SYMBOLIC / DF_SYMBOLIC flag"
  echo "relocations in libnccl against its own exported nccl* names (each one is a call the preload interposes):"
  readelf -rW "$NCCL" | awk '$5 ~ /^p?nccl[A-Z]/ {print "  " $3, $5}' | sort -u | head -40
fi

GPUS=$(nvidia-smi -L | grep -c '^GPU ')
# With one GPU, NCCL refuses two ranks on it: the plain and native runs are
# then one process that trains on the batches of both ranks (--plays 2).
if [ "$GPUS" -ge 2 ]; then ONE="$RUN"; PLAYS=; else ONE="${RUN/--nproc_per_node 2/--nproc_per_node 1}"; PLAYS="--plays 2"; fi
WRAP=tests/gpu/emulated_amd_rank1.sh
export GB_RIG=$RIG
LOGS="GPUBRIDGE_DEBUG=INFO GPUBRIDGE_DEBUG_SUBSYS=INIT,NET"
for mode in ddp fsdp; do
  flag=; [ $mode = fsdp ] && flag=--fsdp
  step "$mode 1. plain NCCL${PLAYS:+ (one GPU: one process, $PLAYS)}"
  $ONE $JOB $flag $PLAYS | tee "$OUT/${mode}_plain.txt"
  verdict "${PIPESTATUS[0]}" "$mode on plain NCCL"

  step "$mode 2. LD_PRELOAD=libgpubridge-nccl.so, one island (native)${PLAYS:+ (one process, $PLAYS)}"
  if [ $mode = ddp ]; then
    LD_PRELOAD=$LIB GPUBRIDGE_DEBUG=INFO GPUBRIDGE_DEBUG_SUBSYS=INIT LD_DEBUG=bindings LD_DEBUG_OUTPUT=$OUT/bind \
      $ONE $JOB $flag $PLAYS 2>&1 | tee "$OUT/${mode}_native.txt"
    verdict "${PIPESTATUS[0]}" "$mode preloaded, native"
    grep -h "binding file [^ ]*libnccl[^ ]* .* to [^ ]*libgpubridge-nccl" "$OUT"/bind.* 2>/dev/null |
      sed "s/.*symbol \`\(.*\)'.*/\1/" | sort -u > "$OUT/nccl_to_preload.txt"
    echo "libnccl's calls to its own nccl* names that the dynamic linker bound to the preload:" \
      "$(tr '\n' ' ' < "$OUT/nccl_to_preload.txt")"
    echo "of those, called during the run and forwarded back to libnccl by libgpubridge-nccl (interpose.c):" \
      "$(grep -ho "called nccl[A-Za-z]* through the dynamic linker" "$OUT/${mode}_native.txt" | awk '{print $2}' |
         sort -u | tr '\n' ' ')"
    grep -c "binding file [^ ]*libtorch_cuda[^ ]* .* to [^ ]*libgpubridge-nccl" "$OUT"/bind.* 2>/dev/null |
      sed 's/^/torch -> libgpubridge-nccl bindings per process: /'
    rm -f "$OUT"/bind.*
  else
    LD_PRELOAD=$LIB GPUBRIDGE_DEBUG=INFO GPUBRIDGE_DEBUG_SUBSYS=INIT $ONE $JOB $flag $PLAYS 2>&1 |
      tee "$OUT/${mode}_native.txt"
    verdict "${PIPESTATUS[0]}" "$mode preloaded, native"
  fi
  grep -E "serves (NCCL calls|this job)" "$OUT/${mode}_native.txt" | head -2

  step "$mode 3. preloaded, GPUBRIDGE_SPLIT_TEST=half (two islands, bridged)"
  env LD_PRELOAD=$LIB GPUBRIDGE_SPLIT_TEST=half $LOGS $RUN $JOB $flag 2>&1 | tee "$OUT/${mode}_split.txt"
  verdict "${PIPESTATUS[0]}" "$mode preloaded, split-test"
  grep -hE "serves (NCCL calls|this job)|traffic: (bridge|world)" "$OUT/${mode}_split.txt" | head -6

  step "$mode 4. preloaded, rank 1 an emulated AMD rank"
  env LD_PRELOAD=$LIB $LOGS $RUN --no-python "$WRAP" $PY $JOB $flag 2>&1 | tee "$OUT/${mode}_amd.txt"
  verdict "${PIPESTATUS[0]}" "$mode preloaded, nvidia + emulated AMD"
  grep -hE "serves (NCCL calls|this job)|emulated|traffic: (bridge|world)" "$OUT/${mode}_amd.txt" | head -8

  step "$mode: loss curves and digests against plain NCCL"
  $PY tests/gpu/compare_losses.py "$OUT/${mode}_plain.txt" "$OUT/${mode}_native.txt" "$OUT/${mode}_split.txt" \
    "$OUT/${mode}_amd.txt"
  verdict $? "$mode loss curves"
done

# The same all_reduce timing (bench/nccl_torch_allreduce.py), plain and
# preloaded, alternating; its lines start with the label.
BENCH=bench/nccl_torch_allreduce.py
if [ "$GPUS" -ge 2 ]; then
  step "5. all_reduce busbw, float32, 1 MiB .. 1 GiB, plain and preloaded alternating (3 rounds)"
  for round in 1 2 3; do
    $RUN $BENCH --label "plain-$round" -b 1M -e 1G -f 4 -n 50 -w 10 2>&1 | grep '^plain'
    LD_PRELOAD=$LIB $RUN $BENCH --label "preload-native-$round" -b 1M -e 1G -f 4 -n 50 -w 10 2>&1 | grep '^preload'
  done
  LD_PRELOAD=$LIB GPUBRIDGE_SPLIT_TEST=half $RUN $BENCH --label preload-split -b 1M -e 1G -f 4 -n 10 -w 2 2>&1 |
    grep '^preload'
else
  step "5. one GPU: time per all_reduce call of one rank, plain and preloaded alternating (3 rounds); the" \
    "difference is what the preload adds to each call"
  for round in 1 2 3; do
    $ONE $BENCH --label "plain-$round" -b 8 -e 1M -f 32 -n 2000 -w 100 2>&1 | grep '^plain'
    LD_PRELOAD=$LIB $ONE $BENCH --label "preload-native-$round" -b 8 -e 1M -f 32 -n 2000 -w 100 2>&1 | grep '^preload'
  done
fi

echo
echo "drop-in: $fails failed"
exit $((fails > 0))
