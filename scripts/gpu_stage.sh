#!/usr/bin/env bash
# Builds the GPU check's programs here and copies them, stripped, with the libraries they need
# that are not CUDA's or the C library's (OpenBLAS, libgomp, libstdc++, ...), into DIR/bin and
# DIR/lib, for a GPU machine that has CUDA but not the project's dependencies:
#
#   scripts/gpu_stage.sh DIR [BUILD_DIR]          # here (BUILD_DIR defaults to build)
#   MACTOR_GPU_CHECK_PREBUILT=1 scripts/gpu_check.sh OUTDIR DIR     # there
#
# DIR is about 45 MB (OpenBLAS is most of it); put it in a folder git ignores.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: scripts/gpu_stage.sh DIR [BUILD_DIR]" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$1
BUILD=${2:-$ROOT/build}
programs=(tensor_cuda_tests kernels_cuda_tests kernels_backend_tests model_cuda_tests pretrain_gpt_cuda_tests
  bench_gpu_kernels bench_gpu_train_step pretrain_gpt)
cmake --build "$BUILD" -j1 --target "${programs[@]}" mactor_cuda_backend
rm -rf "$DIR" && mkdir -p "$DIR/bin" "$DIR/lib"
# The CUDA backend module pretrain_gpt loads from its own folder (its CUDA libraries are the machine's).
strip -o "$DIR/bin/libmactor_cuda_backend.so" "$BUILD/bin/libmactor_cuda_backend.so"
for p in "${programs[@]}"; do
  strip -o "$DIR/bin/$p" "$BUILD/bin/$p"
  # Libraries outside CUDA and glibc (glibc's own must come from the machine).
  ldd "$BUILD/bin/$p" | awk '/=> \// {print $3}' |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|libcuda|libcublas|libcudart' |
    xargs -r -I{} cp -uL {} "$DIR/lib/"
done
du -sh "$DIR"
