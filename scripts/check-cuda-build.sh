#!/usr/bin/env bash
# CI check that the `cuda` feature still compiles, on a machine without a GPU:
# sets up the CUDA 13.0 build pieces (scripts/setup-cuda-build.sh, cached in
# $HOME/.cache/go-train) and runs `cargo check --features nccl,cudnn --all-targets`
# (nccl = cuda plus the NCCL collective of data-parallel training, cudnn =
# cuda plus cuDNN convolutions: all three are checked), which also runs
# candle-kernels' build script (nvcc compiling the kernels), then links an
# unoptimised build with cudnn (not nccl, whose library only data-parallel
# runs need), against the stub libcuda the GPU builds link with. It also
# compiles go-train's own kernels (src/nn/cuda/*.cu, which NVRTC compiles at run
# time on the GPU) with nvcc and with NVRTC, so that a syntax error shows here.
#
#   scripts/check-cuda-build.sh           # cargo check, then an unoptimised cudnn build
#   scripts/check-cuda-build.sh --build   # full release build + link (scripts/build-cuda.sh)
#
# The target folder lives outside the work tree, in
# GO_TRAIN_CUDA_CHECK_TARGET_DIR (default $HOME/.cache/go-train/cuda-check-target),
# so that CI's fresh clones reuse the compiled dependencies and kernels.
# GO_TRAIN_SKIP_CUDA_CHECK=1 skips the check (prints that it did).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${GO_TRAIN_SKIP_CUDA_CHECK:-}" ]; then
  echo "check-cuda-build: skipped (GO_TRAIN_SKIP_CUDA_CHECK is set)"
  exit 0
fi
target="${GO_TRAIN_CUDA_CHECK_TARGET_DIR:-$HOME/.cache/go-train/cuda-check-target}"
t0=$(date +%s)

if [ "${1:-}" = --build ]; then
  shift
  GO_TRAIN_CUDA_TARGET_DIR="$target" scripts/build-cuda.sh "$@"
  echo "check-cuda-build: cuda build ok in $(($(date +%s) - t0)) s"
  exit 0
fi

env_file=$(scripts/setup-cuda-build.sh --print-env-file)
t1=$(date +%s)
# shellcheck disable=SC1090
. "$env_file"
if [ -z "${CUDAFORGE_THREADS:-}" ] && [ -n "${CARGO_BUILD_JOBS:-}" ]; then
  export CUDAFORGE_THREADS="$CARGO_BUILD_JOBS"
fi
for cu in src/nn/cuda/*.cu; do
  nvcc -arch=sm_"$CUDA_COMPUTE_CAP" -ptx "$cu" -o /dev/null
done
# NVRTC, which compiles them on the GPU machine, has none of nvcc's headers.
LD_LIBRARY_PATH="$GO_TRAIN_CUDA_LIB" python3 scripts/nvrtc-compile.py "$GO_TRAIN_CUDA_LIB/libnvrtc.so" src/nn/cuda/*.cu
CARGO_TARGET_DIR="$target" cargo check --features nccl,cudnn --all-targets "$@"
t2=$(date +%s)
# A check does not link: a driver function missing from the stub libcuda
# the build links against shows only in a build. An unoptimised one, with
# cuDNN (whose library this fetches into the virtualenv once, 500 MB).
GO_TRAIN_CUDNN=1 GO_TRAIN_CUDA_PROFILE=dev GO_TRAIN_CUDA_TARGET_DIR="$target" scripts/build-cuda.sh --bin go-train "$@"
echo "check-cuda-build: cuda, nccl and cudnn check ok in $((t2 - t0)) s (setup $((t1 - t0)) s), cudnn link in $(($(date +%s) - t2)) s"
