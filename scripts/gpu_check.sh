#!/usr/bin/env bash
# The GPU checks (issue 24), for a machine with an NVIDIA GPU: builds the GPU targets, runs every
# GPU test (CTest label gpu: the CUDA device layer, and each CUDA kernel against the CPU kernel in
# double on random inputs of odd shapes) plus the same checks on the CPU backend, then
# bench_gpu_kernels (GEMM TFLOP/s, kernel GB/s), and writes into OUTDIR:
#   summary.txt       device, toolkit, build time, one line per test (Passed/Failed/Skipped), verdict
#   bench.txt, configure.log, build.log, ctest_gpu.log, ctest_cpu.log, nvidia-smi.txt
# Designed to finish in well under 8 minutes on one H200 (the build is the bulk: a few minutes on
# 16 cores from scratch); each phase has its own time limit.
#
#   scripts/gpu_check.sh OUTDIR [BUILD_DIR]
#
# BUILD_DIR defaults to build-gpu. With MACTOR_GPU_CHECK_PREBUILT=1 the build step is skipped and
# BUILD_DIR must hold the built tests (e.g. carried over from a machine with the dependencies).
# CUDA_ARCHS (default 90) sets CMAKE_CUDA_ARCHITECTURES for a fresh configure.
# Exit status: 0 when every GPU test passed, 1 when one failed or the build broke, 3 when no CUDA
# device was found (the GPU tests skipped: that is not a pass).
set -uo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: scripts/gpu_check.sh OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
BUILD=${2:-$ROOT/build-gpu}
mkdir -p "$BUILD" && BUILD=$(cd "$BUILD" && pwd)
JOBS=$(nproc)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

say "mactor GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
  say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
else
  say "device: nvidia-smi not found"
fi
say "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo 'not on PATH')"

if [[ "${MACTOR_GPU_CHECK_PREBUILT:-0}" != 1 ]]; then
  start=$(date +%s)
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    timeout 180 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >"$OUT/configure.log" 2>&1 ||
      { say "FAILED: configure (see configure.log)"; exit 1; }
  fi
  timeout 420 cmake --build "$BUILD" -j"$JOBS" --target tensor_cuda_tests kernels_cuda_tests kernels_backend_tests \
    bench_gpu_kernels \
    >"$OUT/build.log" 2>&1 || { say "FAILED: build (see build.log)"; exit 1; }
  say "build: $(( $(date +%s) - start )) s on $JOBS cores"
fi

cd "$BUILD" || exit 1
timeout 120 ctest -R "cpu backend" --timeout 60 --output-on-failure >"$OUT/ctest_cpu.log" 2>&1
cpu_status=$?
timeout 240 ctest -L gpu --timeout 120 -V >"$OUT/ctest_gpu.log" 2>&1
gpu_status=$?

say ""
say "CPU backend (the same check bodies against the CPU kernels):"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest_cpu.log" | sed 's/^ *[0-9]*\/[0-9]* //' | tee -a "$SUMMARY"
say ""
say "GPU tests (label gpu):"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest_gpu.log" | sed 's/^ *[0-9]*\/[0-9]* //' | tee -a "$SUMMARY"
grep -m1 'SKIPPED: no CUDA device' "$OUT/ctest_gpu.log" | sed 's/^[0-9]*: //' | tee -a "$SUMMARY"

say ""
say "bench_gpu_kernels (bench.txt):"
timeout 150 "$BUILD/bin/bench_gpu_kernels" >"$OUT/bench.txt" 2>&1
bench_status=$?
say "  exit status $bench_status (3: no device)"
cat "$OUT/bench.txt" >>"$SUMMARY"

skipped=$(grep -cE 'Test +#.*Skipped' "$OUT/ctest_gpu.log")
failed=$(grep -cE 'Test +#.*(Failed|Timeout|Exception)' "$OUT/ctest_gpu.log")
passed=$(grep -cE 'Test +#.*Passed' "$OUT/ctest_gpu.log")
say ""
say "GPU tests: $passed passed, $failed failed, $skipped skipped; CPU backend ctest status $cpu_status"
if (( failed > 0 || gpu_status != 0 && skipped == 0 || cpu_status != 0 )); then
  say "VERDICT: FAILED"
  exit 1
fi
if (( skipped > 0 )); then
  say "VERDICT: NO DEVICE (GPU tests skipped; nothing was checked on a GPU)"
  exit 3
fi
say "VERDICT: PASSED"
