#!/usr/bin/env bash
# Unmodified nccl-tests over libgpubridge-nccl.so (LD_PRELOAD), on a machine
# with NVIDIA GPUs, NCCL and Open MPI:
#   1. one rank: one island of one GPU (policy native, NCCL below);
#   2. two ranks under mpirun with GPUBRIDGE_SPLIT_TEST=half: two islands,
#      bridged (both ranks on GPU 0 when only one GPU is visible).
# Every table is run with -c 1 (nccl-tests checks each result; "#wrong" must
# be 0 on every line, in place and out of place).
#
#   NCCL_TESTS=<nccl-tests source> OUT=/tmp/out tests/gpu/run_nccl_tests.sh [perf ...]
#   (from the repository root; B=build folder; default perf: alltoall_perf
#   all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf
#   sendrecv_perf; SIZES="-b 8 -e 64M -f 8")
set -u
export NCCL_NVLS_ENABLE=0 # never create NVLink multicast objects
OUT=${OUT:-/tmp}
B=${B:-build-gpu}
SRC=${NCCL_TESTS:?set NCCL_TESTS to an nccl-tests source tree}
SIZES=${SIZES:--b 8 -e 64M -f 8}
PERFS=${*:-alltoall_perf all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf sendrecv_perf}
mkdir -p "$OUT"
exec > >(tee "$OUT/nccl_tests.log") 2>&1
date -u
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
cmake -S . -B $B -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build $B -j"$(nproc)" --target gpubridge gpubridge-nccl >/dev/null || exit 1
LIB=$PWD/$B/lib/libgpubridge-nccl.so

# NCCL's header and library: a system install, else torch's wheel.
NCCL_H=$(ls /usr/include/nccl.h /usr/local/include/nccl.h 2>/dev/null | head -1)
[ -n "$NCCL_H" ] || NCCL_H=$(find / -path /proc -prune -o -name nccl.h -print 2>/dev/null | grep -m1 nvidia/nccl/include)
[ -n "$NCCL_H" ] || { echo "no nccl.h found"; exit 1; }
NCCL_HOME=$(dirname "$(dirname "$NCCL_H")")
[ -e "$NCCL_HOME/lib/libnccl.so" ] || ln -sf "$(ls "$NCCL_HOME"/lib/libnccl.so.* | head -1)" "$NCCL_HOME/lib/libnccl.so" 2>/dev/null
MPI_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v mpicc)")")")
echo "nccl.h: $NCCL_H; mpi: $MPI_HOME; nccl-tests: $(cat "$SRC/UPSTREAM_COMMIT" 2>/dev/null | cut -c1-12)"
BUILD_NT=$PWD/$B/nccl-tests
rm -rf "$BUILD_NT" && cp -r "$SRC" "$BUILD_NT"
make -C "$BUILD_NT" -j"$(nproc)" MPI=1 MPI_HOME="$MPI_HOME" NCCL_HOME="$NCCL_HOME" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" \
  >"$OUT/nccl_tests_build.log" 2>&1 || { tail -20 "$OUT/nccl_tests_build.log"; exit 1; }
export LD_LIBRARY_PATH=$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}
MPIRUN="timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_PRELOAD=$LIB -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GPUBRIDGE_SPLIT_TEST=half"
for p in $PERFS; do
  echo "== $p, one rank, LD_PRELOAD=libgpubridge-nccl.so (native)"
  LD_PRELOAD=$LIB timeout 300 "$BUILD_NT/build/$p" $SIZES -c 1 -g 1; echo "rc $?"
  echo "== $p, two ranks, split-test (bridged), mpirun"
  $MPIRUN "$BUILD_NT/build/$p" $SIZES -c 1 -g 1; echo "rc $?"
done
