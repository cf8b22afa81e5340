# Sourced by bench/gpu_bridge.sh and bench/gpu_compress.sh (from the
# repository root): prints the date and the GPU, builds ${BUILD:-build-gpu},
# and sets B (the build), P (its gpubridge-perf), RUN (two ranks under its
# gpubridge-run), RIG (the emulated AMD rig) and GB_RIG_NVRTC_LIBRARY.
date -u
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
B=${BUILD:-build-gpu}
cmake -S . -B "$B" -DGPUBRIDGE_WERROR=ON >/dev/null && cmake --build "$B" -j"$(nproc)" >/dev/null || exit 1
P=$B/bin/gpubridge-perf
RUN="timeout 300 $B/bin/gpubridge-run -n 2 --"
RIG=$PWD/$B/tests/emulated_amd
# The rig's hiprtc compiles with NVRTC: the toolkit's, or the one pip's CUDA wheels bring.
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so \
  $(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)/nvidia/cu13/lib/libnvrtc.so.13; do
  [ -e "$f" ] && export GB_RIG_NVRTC_LIBRARY=$f && break
done
echo "rig NVRTC: ${GB_RIG_NVRTC_LIBRARY:-none found}"
