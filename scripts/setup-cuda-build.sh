#!/usr/bin/env bash
# Sets up what `cargo build --features cuda` needs, on a machine with no CUDA
# toolkit and no GPU, without installing anything system-wide:
#
#   - a Python virtualenv holding the CUDA 13.0 pieces from PyPI (nvcc, nvvm,
#     crt, cccl, cudart, nvrtc, cublas, curand), pinned;
#   - the unversioned link names (libcublas.so, ...) the linker needs;
#   - a libcuda.so to link against (no PyPI wheel has one): Debian's non-free
#     `libcuda1`, downloaded and unpacked only, into cu13/lib/stubs;
#   - <venv>/env.sh, a file to source that exports CUDA_HOME, PATH, ... .
#
# Idempotent: a second run checks a stamp and a few files and returns in well
# under a second. Background: shared/notes/cuda-build.md, docs/guide/gpu.md.
#
# Usage:
#   scripts/setup-cuda-build.sh                  # set up; says what to source
#   scripts/setup-cuda-build.sh --print-env-file # set up; print env.sh's path only
#   scripts/setup-cuda-build.sh --print-env      # set up; print the exports only
#   . "$(scripts/setup-cuda-build.sh --print-env-file)"
#
# Environment:
#   GO_TRAIN_CUDA_VENV    the virtualenv (default $HOME/.cache/go-train/cuda-venv)
#   GO_TRAIN_CUDA_PYTHON  the interpreter that creates it (default python3, >= 3.9)
#   GO_TRAIN_LIBCUDA      an existing libcuda.so.1 to use instead of Debian's
#                         (e.g. the driver's own on a GPU machine); skips apt
#   GO_TRAIN_DEBIAN_MIRROR  Debian mirror for libcuda1 (default: the one in
#                         /etc/apt, else http://deb.debian.org/debian)
#   GO_TRAIN_DEBIAN_SUITE   suite for libcuda1 (default bookworm)
#   CUDA_COMPUTE_CAP      written into env.sh as the default (default 90: H100/H200)
set -euo pipefail

# The CUDA 13.0 set that cuda-toolkit==13.0.2 pins. Keep nvcc at 13.0.x: the
# GPU machines run driver 580 (CUDA 13.0), which rejects PTX from newer nvcc.
PINS=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
  nvidia-cuda-nvrtc==13.0.88
  nvidia-cublas==13.1.0.3
  nvidia-curand==10.4.0.35
)
SETUP_VERSION=1 # bump when the layout below changes

mode=human
case "${1:-}" in
  "") ;;
  --print-env-file) mode=file ;;
  --print-env) mode=env ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup-cuda-build: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

say() { echo "setup-cuda-build: $*" >&2; }
die() { echo "setup-cuda-build: error: $*" >&2; exit 1; }

VENV="${GO_TRAIN_CUDA_VENV:-$HOME/.cache/go-train/cuda-venv}"
PY="${GO_TRAIN_CUDA_PYTHON:-python3}"
STAMP="$VENV/.go-train-cuda-setup"
want_stamp="v$SETUP_VERSION ${PINS[*]} libcuda=${GO_TRAIN_LIBCUDA:-debian}"

finish() {
  case "$mode" in
    file) echo "$VENV/env.sh" ;;
    env) cat "$VENV/env.sh" ;;
    human)
      say "ready: CUDA $("$VENV/cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') in $VENV"
      say "to build: . '$VENV/env.sh' && CARGO_TARGET_DIR=target/cuda cargo build --release --features cuda"
      say "           (or scripts/build-cuda.sh)" ;;
  esac
}

# ---- fast path: everything is there --------------------------------------
ready() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ] && [ -f "$VENV/env.sh" ] &&
    [ -x "$VENV/cuda/bin/nvcc" ] && [ -e "$VENV/cuda/lib/libcublas.so" ] &&
    [ -e "$VENV/cuda/lib/stubs/libcuda.so" ] && [ -x "$VENV/bin/python" ]
}
if ready; then finish; exit 0; fi

[ "$(uname -s)" = Linux ] || die "only Linux is supported (the CUDA wheels and libcuda1 used here are Linux builds)"
command -v "$PY" >/dev/null || die "no '$PY' found: install Python 3 (with venv) or set GO_TRAIN_CUDA_PYTHON"
for tool in g++ readelf; do
  command -v "$tool" >/dev/null || die "'$tool' is missing: nvcc needs a host C++ compiler (Debian: apt-get install g++ binutils)"
done

mkdir -p "$(dirname "$VENV")"
# One setup at a time per venv (CI and a developer may race).
if command -v flock >/dev/null; then
  exec 9>"$VENV.lock"
  flock 9
  if ready; then finish; exit 0; fi
fi
rm -f "$STAMP"

# ---- 1. virtualenv with the pinned wheels ---------------------------------
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
  say "creating virtualenv $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" ||
    die "'$PY -m venv' failed (Debian: apt-get install python3-venv, or set GO_TRAIN_CUDA_PYTHON)"
fi
say "installing ${#PINS[@]} pinned CUDA 13.0 wheels (about 1 GB of downloads the first time)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "${PINS[@]}" ||
  die "pip could not install the CUDA wheels (needs PyPI): ${PINS[*]}"

site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
CU="$site/nvidia/cu13"
[ -x "$CU/bin/nvcc" ] || die "nvcc is not at $CU/bin/nvcc after installing the wheels"
# A stable name for the toolkit folder, whatever the Python version.
ln -sfn "$CU" "$VENV/cuda"
CU="$VENV/cuda"

# ---- 2. link names for the versioned libraries -----------------------------
link() { # link <name> <target>
  [ -e "$CU/lib/$2" ] || die "$CU/lib/$2 is missing (wheel layout changed?)"
  ln -sfn "$2" "$CU/lib/$1"
}
link libcublas.so libcublas.so.13
link libcublasLt.so libcublasLt.so.13
link libcudart.so libcudart.so.13
link libnvrtc.so libnvrtc.so.13
link libcurand.so libcurand.so.10

# ---- 3. libcuda.so for the link step ----------------------------------------
mkdir -p "$CU/lib/stubs"
stub="$CU/lib/stubs/libcuda.so.1"
if [ -n "${GO_TRAIN_LIBCUDA:-}" ]; then
  [ -f "$GO_TRAIN_LIBCUDA" ] || die "GO_TRAIN_LIBCUDA=$GO_TRAIN_LIBCUDA is not a file"
  cp -L "$GO_TRAIN_LIBCUDA" "$stub.tmp" && mv "$stub.tmp" "$stub"
elif ! [ -f "$stub" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    die "no apt-get/dpkg-deb to fetch Debian's libcuda1: set GO_TRAIN_LIBCUDA to a libcuda.so.1"
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -f "$keyring" ] || die "$keyring is missing (Debian: apt-get install debian-archive-keyring), or set GO_TRAIN_LIBCUDA"
  mirror="${GO_TRAIN_DEBIAN_MIRROR:-}"
  if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' |
      tr ' ' '\n' | grep -E '/debian/?$' | head -n1 || true)
    [ -n "$mirror" ] || mirror=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\{0,1\}\([^[:space:]]*\/debian\/\{0,1\}\)[[:space:]].*/\2/p' \
      /etc/apt/sources.list 2>/dev/null | head -n1 || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  fi
  suite="${GO_TRAIN_DEBIAN_SUITE:-bookworm}"
  say "fetching libcuda1 from $mirror $suite non-free (unpacked only, for linking)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/etc/sources.list.d" "$tmp/etc/preferences.d" "$tmp/lists/partial" \
    "$tmp/cache/archives/partial" "$tmp/deb" "$tmp/root"
  echo "deb [signed-by=$keyring] $mirror $suite non-free" >"$tmp/etc/sources.list"
  : >"$tmp/status"
  apt_opts=(
    -o "Dir::Etc::SourceList=$tmp/etc/sources.list" -o "Dir::Etc::SourceParts=$tmp/etc/sources.list.d"
    -o "Dir::Etc::PreferencesParts=$tmp/etc/preferences.d" -o "Dir::State::Lists=$tmp/lists"
    -o "Dir::State::status=$tmp/status" -o "Dir::Cache=$tmp/cache" -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=$(id -un)" -o "Acquire::Languages=none" -o "APT::Get::List-Cleanup=0"
  )
  apt-get "${apt_opts[@]}" -qq update >"$tmp/apt.log" 2>&1 ||
    { cat "$tmp/apt.log" >&2; die "apt-get update of the private libcuda1 source failed"; }
  (cd "$tmp/deb" && apt-get "${apt_opts[@]}" -qq download libcuda1) >>"$tmp/apt.log" 2>&1 ||
    { cat "$tmp/apt.log" >&2; die "apt-get download libcuda1 failed"; }
  deb=$(ls "$tmp"/deb/libcuda1_*.deb)
  dpkg-deb -x "$deb" "$tmp/root"
  lib=$(find "$tmp/root" -type f -name 'libcuda.so.[0-9]*' | head -n1)
  [ -n "$lib" ] || die "no libcuda.so.* inside $(basename "$deb")"
  readelf -d "$lib" | grep -q 'SONAME.*\[libcuda\.so\.1\]' || die "$lib's soname is not libcuda.so.1"
  cp "$lib" "$stub.tmp" && mv "$stub.tmp" "$stub"
  echo "$(basename "$deb")" >"$CU/lib/stubs/SOURCE"
fi
ln -sfn libcuda.so.1 "$CU/lib/stubs/libcuda.so"

# ---- 4. env.sh ---------------------------------------------------------------
cap="${CUDA_COMPUTE_CAP:-90}"
cat >"$VENV/env.sh.tmp" <<EOF
# Written by go-train's scripts/setup-cuda-build.sh. Source it before
# \`cargo build --features cuda\` (use a separate CARGO_TARGET_DIR, e.g. target/cuda).
export CUDA_HOME='$CU'
export CUDA_ROOT="\$CUDA_HOME"
export CUDA_PATH="\$CUDA_HOME"
case ":\$PATH:" in *":\$CUDA_HOME/bin:"*) ;; *) export PATH="\$CUDA_HOME/bin:\$PATH" ;; esac
# Kernels are built for this GPU generation (90 = H100/H200, sm_90a); without it
# the build runs nvidia-smi and fails on a GPU-less machine.
export CUDA_COMPUTE_CAP="\${CUDA_COMPUTE_CAP:-$cap}"
# The stub libcuda.so is for linking only; at run time the GPU machine's driver
# provides libcuda.so.1 and LD_LIBRARY_PATH must reach the CUDA 13 libraries.
case ":\${LIBRARY_PATH:-}:" in *":\$CUDA_HOME/lib/stubs:"*) ;; *)
  export LIBRARY_PATH="\$CUDA_HOME/lib:\$CUDA_HOME/lib/stubs\${LIBRARY_PATH:+:\$LIBRARY_PATH}" ;; esac
# For running a CUDA build here: LD_LIBRARY_PATH="\$GO_TRAIN_CUDA_LIB" (not exported).
export GO_TRAIN_CUDA_LIB="\$CUDA_HOME/lib"
EOF
mv "$VENV/env.sh.tmp" "$VENV/env.sh"

"$CU/bin/nvcc" --version >/dev/null || die "$CU/bin/nvcc does not run"
echo "$want_stamp" >"$STAMP"
finish
