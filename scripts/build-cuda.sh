#!/usr/bin/env bash
# Builds go-train with candle's CUDA backend (`--features cuda`) on any Linux
# machine, GPU or not, and leaves a stripped copy of the binary to carry to a
# GPU machine:
#
#   scripts/build-cuda.sh [extra cargo build args]
#   → target/cuda/release/go-train   (with line tables, about 50 MB)
#   → target/cuda/go-train-cuda      (stripped, for the GPU machine)
#
# Runs scripts/setup-cuda-build.sh first (a no-op when already set up; see it
# for GO_TRAIN_CUDA_VENV and friends), sources its env.sh, and builds into
# CARGO_TARGET_DIR=target/cuda (override with GO_TRAIN_CUDA_TARGET_DIR), apart
# from the CPU build, whose build-script caches would otherwise clash.
# The first build compiles candle's CUDA kernels with nvcc: about 10 minutes on
# 2 cores. nvcc runs CUDAFORGE_THREADS at a time (default: CARGO_BUILD_JOBS if
# set, else half the cores).
#
# Run time needs of the binary (even for --device cpu, since it is linked
# against them): libcuda.so.1 from the NVIDIA driver (580 or later: the
# kernels are CUDA 13.0 PTX/SASS for sm_90a, H100/H200) and the CUDA 13
# libraries libcublas.so.13 libcublasLt.so.13 libcudart.so.13 libcurand.so.10
# (libnvrtc.so.13 for some ops), e.g. from a PyTorch CUDA-13 environment:
#   LD_LIBRARY_PATH=<venv>/lib/python3.X/site-packages/nvidia/cu13/lib ./go-train-cuda ...
# For another GPU generation build with CUDA_COMPUTE_CAP set (e.g. 80 for A100).
# See docs/guide/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."

env_file=$(scripts/setup-cuda-build.sh --print-env-file)
# shellcheck disable=SC1090
. "$env_file"

if [ -z "${CUDAFORGE_THREADS:-}" ] && [ -n "${CARGO_BUILD_JOBS:-}" ]; then
  export CUDAFORGE_THREADS="$CARGO_BUILD_JOBS"
fi
export CARGO_TARGET_DIR="${GO_TRAIN_CUDA_TARGET_DIR:-target/cuda}"

features=cuda
# GO_TRAIN_CUDNN=1: candle's cuDNN convolutions too (--features cudnn). The
# library comes from PyPI into the same virtualenv (500 MB); at run time the
# GPU machine's own libcudnn.so.9 (PyTorch's wheels have it) is used.
# docs/results/gpu.md measures it: faster for big nets at big batches only.
if [ "${GO_TRAIN_CUDNN:-0}" = 1 ]; then
  venv=${GO_TRAIN_CUDA_VENV:-$HOME/.cache/go-train/cuda-venv}
  cudnn_lib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')/nvidia/cudnn/lib
  [ -e "$cudnn_lib/libcudnn.so.9" ] || "$venv/bin/python" -m pip install -q nvidia-cudnn-cu13==9.28.1.4
  ln -sf libcudnn.so.9 "$cudnn_lib/libcudnn.so"
  export LIBRARY_PATH="$cudnn_lib:$LIBRARY_PATH"
  features=cudnn
fi

# GO_TRAIN_NCCL=1: data-parallel training over NCCL too (--features nccl,
# docs/guide/gpu.md). libnccl comes from PyPI into the same virtualenv for the
# link; at run time the cluster's own libnccl.so.2 (or PyTorch's) is used.
if [ "${GO_TRAIN_NCCL:-0}" = 1 ]; then
  venv=${GO_TRAIN_CUDA_VENV:-$HOME/.cache/go-train/cuda-venv}
  nccl_lib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')/nvidia/nccl/lib
  [ -e "$nccl_lib/libnccl.so.2" ] || "$venv/bin/python" -m pip install -q nvidia-nccl-cu13
  ln -sf libnccl.so.2 "$nccl_lib/libnccl.so"
  export LIBRARY_PATH="$nccl_lib:$LIBRARY_PATH"
  features="$features,nccl"
fi

# GO_TRAIN_CUDA_PROFILE=dev: an unoptimised build, quicker, for checking
# that everything links (scripts/check-cuda-build.sh).
profile="${GO_TRAIN_CUDA_PROFILE:-release}"
echo "build-cuda: cargo build --profile $profile --features $features $* (CUDA_HOME=$CUDA_HOME, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP, CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
cargo build --profile "$profile" --features "$features" "$@"
[ "$profile" = release ] || exit 0

bin="$CARGO_TARGET_DIR/release/go-train"
if ! [ -x "$bin" ]; then
  echo "build-cuda: built, but $bin is not there (another --target or --profile?): nothing stripped" >&2
  exit 0
fi
out="$CARGO_TARGET_DIR/go-train-cuda"
strip -o "$out.tmp" "$bin" && mv "$out.tmp" "$out"
echo "build-cuda: $bin ($(du -h "$bin" | cut -f1)); stripped copy $out ($(du -h "$out" | cut -f1))" >&2
echo "build-cuda: on the GPU machine: LD_LIBRARY_PATH=<site-packages>/nvidia/cu13/lib ./go-train-cuda ... (docs/guide/gpu.md)" >&2
