#!/usr/bin/env bash
# The GPU checks (issue 24), for a machine with an NVIDIA GPU. Runs every GPU test (the CUDA device
# layer, each CUDA kernel against the CPU kernel in double on random inputs of odd shapes, and a
# GPT chunk's whole training step, Adam included, on the GPU against the host),
# the same check bodies on the CPU backend, pretrain_gpt on the GPU against the host, then
# bench_gpu_kernels (GEMM TFLOP/s, kernel GB/s) and bench_gpu_train_step (a 1.3B GPT's training
# step, tokens/s and MFU, against PyTorch), and writes into OUTDIR:
#   summary.txt   device, toolkit, build time, one line per test (Passed/Failed/Skipped), verdict
#   gpu_tests.log, cpu_tests.log, bench.txt, train_step.txt (its runs' logs in train_step_logs/),
#   nvidia-smi.txt, build.log, configure.log
# Each test case runs as its own process (as CTest runs them; status 77 is "Skipped"), so no
# CTest files are needed and a staged build from another machine runs as well.
#
#   scripts/gpu_check.sh OUTDIR [BUILD_DIR]
#
# BUILD_DIR (default build-gpu) is configured and built with the GPU targets first; that needs the
# project's dependencies (CAF, Catch2, OpenBLAS, ...). On a machine without them, build here with
# scripts/gpu_stage.sh DIR and run with MACTOR_GPU_CHECK_PREBUILT=1 and BUILD_DIR=DIR: the staged
# binaries and their non-CUDA libraries are used, CUDA's libraries are looked up on the machine.
# CUDA_ARCHS (default 90) sets CMAKE_CUDA_ARCHITECTURES for a fresh configure;
# MACTOR_GPU_CHECK_JOBS (default: every core) the build's parallelism.
# Budget: prebuilt (scripts/gpu_stage.sh), about 1 minute of tests and at most 5 of
# bench_gpu_train_step; a fresh build on 16 cores adds up to 7 (pretrain_gpt is most of the project).
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
JOBS=${MACTOR_GPU_CHECK_JOBS:-$(nproc)}
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
say "nvcc: $( (nvcc --version 2>/dev/null || echo 'not on PATH') | tail -1)"

if [[ "${MACTOR_GPU_CHECK_PREBUILT:-0}" != 1 ]]; then
  start=$(date +%s)
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    timeout 180 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >"$OUT/configure.log" 2>&1 ||
      { say "FAILED: configure (see configure.log)"; exit 1; }
  fi
  timeout 420 cmake --build "$BUILD" -j"$JOBS" --target tensor_cuda_tests kernels_cuda_tests kernels_backend_tests \
    model_cuda_tests pretrain_gpt_cuda_tests bench_gpu_kernels bench_gpu_train_step >"$OUT/build.log" 2>&1 || { say "FAILED: build (see build.log)"; exit 1; }
  say "build: $(( $(date +%s) - start )) s on $JOBS cores"
fi

# Staged libraries first, then wherever this machine keeps CUDA's (toolkit or pip wheels).
lib_path=$BUILD/lib
nvidia_wheels=$(python3 -c 'import glob, site
print(" ".join(d for s in site.getsitepackages() for d in glob.glob(s + "/nvidia/*/lib")))' 2>/dev/null)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib $nvidia_wheels; do
  [[ -d "$d" ]] && lib_path=$lib_path:$d
done
export LD_LIBRARY_PATH=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# Runs every test case of binary $1 (whose names match $2) as its own process into log $3;
# prints "<status> <name>" lines. Counts go to the globals passed/failed/skipped.
passed=0 failed=0 skipped=0
run_cases() {
  local binary=$BUILD/bin/$1 filter=$2 log=$3 name status
  if [[ ! -x "$binary" ]]; then
    say "Failed   $1: not built"
    failed=$((failed + 1))
    return
  fi
  while IFS= read -r name; do
    [[ -z "$name" || ! "$name" =~ $filter ]] && continue
    echo "=== $name" >>"$log"
    timeout 120 "$binary" "$name" >>"$log" 2>&1
    status=$?
    case $status in
      0) say "Passed   $name"; passed=$((passed + 1)) ;;
      77) say "Skipped  $name"; skipped=$((skipped + 1)) ;;
      124) say "Timeout  $name"; failed=$((failed + 1)) ;;
      *) say "Failed   $name (status $status)"; failed=$((failed + 1)) ;;
    esac
  done < <("$binary" --list-test-names-only 2>/dev/null)
}

say ""
say "CPU backend (the same check bodies against the CPU kernels):"
: >"$OUT/cpu_tests.log"
run_cases kernels_backend_tests "^cpu backend" "$OUT/cpu_tests.log"
cpu_failed=$failed
passed=0 failed=0 skipped=0
say ""
say "GPU tests:"
: >"$OUT/gpu_tests.log"
run_cases tensor_cuda_tests "." "$OUT/gpu_tests.log"
run_cases kernels_cuda_tests "." "$OUT/gpu_tests.log"
run_cases model_cuda_tests "." "$OUT/gpu_tests.log"
MACTOR_TEST_BIN_DIR=$BUILD/bin run_cases pretrain_gpt_cuda_tests "." "$OUT/gpu_tests.log"
grep -m1 'SKIPPED: no CUDA device' "$OUT/gpu_tests.log" | tee -a "$SUMMARY"

say ""
say "bench_gpu_kernels (bench.txt):"
timeout 150 "$BUILD/bin/bench_gpu_kernels" >"$OUT/bench.txt" 2>&1
bench_status=$?
say "  exit status $bench_status (3: no device)"
cat "$OUT/bench.txt" >>"$SUMMARY"

say ""
say "bench_gpu_train_step (train_step.txt): pretrain_gpt against PyTorch, 1.3B parameters, sequence 4096, bf16:"
timeout 300 "$BUILD/bin/bench_gpu_train_step" --keep-logs "$OUT/train_step_logs" >"$OUT/train_step.txt" 2>&1
say "  exit status $? (3: no device)"
cat "$OUT/train_step.txt" >>"$SUMMARY"

say ""
say "GPU tests: $passed passed, $failed failed, $skipped skipped; CPU backend: $cpu_failed failed"
if (( failed > 0 || cpu_failed > 0 )); then
  say "VERDICT: FAILED"
  exit 1
fi
if (( skipped > 0 || passed == 0 )); then
  say "VERDICT: NO DEVICE (GPU tests skipped; nothing was checked on a GPU)"
  exit 3
fi
say "VERDICT: PASSED"
