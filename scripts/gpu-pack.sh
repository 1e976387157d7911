#!/usr/bin/env bash
# Packs into .gpu/ (git-ignored) what scripts/gpu-run.sh needs on a GPU
# machine that has no Rust, no network and no ../shared: the stripped CUDA
# binary, the CUDA test binaries (lib and tests/train_cli.rs), the seed's
# PyTorch nets, and the game records to train on (kgs-6d's even games and
# as much of tygem-9d as fits), each gzip-compressed (the GPU machine has no
# zstd) to fit a 64 MiB transfer.
#
#   scripts/gpu-pack.sh            # build (scripts/build-cuda.sh) and pack
#   scripts/gpu-pack.sh --no-data  # binaries only (the records are already packed)
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=.gpu
DATASETS="${GO_TRAIN_DATASETS:-../shared/datasets}"
mkdir -p "$PACK"
# Bytes of the files the device tool sends with the pack: the repository's,
# tracked or untracked but not ignored.
repo_bytes() { git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s}'; }

# With cuDNN (convolutions planned once per shape: src/nn/cuda/cudnn_conv.rs)
# unless GO_TRAIN_CUDNN=0; the GPU machine's PyTorch brings libcudnn.so.9.
export GO_TRAIN_CUDNN="${GO_TRAIN_CUDNN:-1}"
scripts/build-cuda.sh
env_file=$(scripts/setup-cuda-build.sh --print-env-file)
# shellcheck disable=SC1090
. "$env_file"
export CARGO_TARGET_DIR="${GO_TRAIN_CUDA_TARGET_DIR:-target/cuda}"
features=cuda
if [ "$GO_TRAIN_CUDNN" = 1 ]; then
  venv=${GO_TRAIN_CUDA_VENV:-$HOME/.cache/go-train/cuda-venv}
  export LIBRARY_PATH="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')/nvidia/cudnn/lib:$LIBRARY_PATH"
  features=cudnn
fi
# The test binaries, built as `cargo test --release` builds them, with the
# binary's features.
json=$(cargo test --release --features "$features" --no-run --lib --test train_cli --message-format=json 2>/dev/null)
exe() { echo "$json" | python3 -c "import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get('reason') == 'compiler-artifact' and m.get('executable') and m['target']['name'] == '$1' and m['profile']['test']:
        print(m['executable'])" | tail -1; }
pack_bin() { strip -o "$PACK/$2" "$1" && gzip -f -6 "$PACK/$2"; }
pack_bin "$CARGO_TARGET_DIR/release/go-train" go-train-cuda
pack_bin "$(exe go_train)" test-lib
pack_bin "$(exe train_cli)" test-train-cli
cp "$DATASETS/../bench/torch_seed_nets.py" "$PACK/" 2>/dev/null || cp ../shared/bench/torch_seed_nets.py "$PACK/"

if [ "${1:-}" != --no-data ]; then
  # kgs-6d: the even games only (no handicap, komi 5.5-7.5): a fifth of the
  # bytes; `filter` on the GPU machine decides again, exactly.
  (cd "$DATASETS" && grep -rlE 'KM\[(5\.50|6\.50|7\.50)\]' kgs-6d | xargs grep -LE 'HA\[[2-9]' | sort |
    tar czf "$OLDPWD/$PACK/kgs.tar.gz" -T -)
  # The robustness records some CLI tests read.
  (cd "$DATASETS" && tar czf "$OLDPWD/$PACK/gnugo.tar.gz" gnugo-regression)
  # tygem-9d: as many of its monthly files as the transfer still holds
  # beside the repo and the rest of the pack (GPU_PACK_MIB, 64 in all, less
  # a margin). A game's split depends on its moves alone
  # (src/dataset/split.rs), so a part of the files keeps every game's split.
  rm -f "$PACK/tygem.tar.gz"
  room=$(( ${GPU_PACK_MIB:-64} * 1048576 - $(repo_bytes) - $(du -cb "$PACK"/*.gz | tail -1 | cut -f1) - 2000000 ))
  files=()
  for f in "$DATASETS"/tygem-9d-2010-2011/*.sgf; do
    size=$(gzip -6 -c "$f" | wc -c)
    [ "$size" -lt "$room" ] || break
    room=$((room - size))
    files+=("tygem-9d-2010-2011/$(basename "$f")")
  done
  echo "gpu-pack: tygem-9d: ${#files[@]} of $(ls "$DATASETS"/tygem-9d-2010-2011/*.sgf | wc -l) files fit" >&2
  [ ${#files[@]} = 0 ] || (cd "$DATASETS" && tar czf "$OLDPWD/$PACK/tygem.tar.gz" "${files[@]}")
fi
du -ch "$PACK"/* | tail -20
sent=$(($(repo_bytes) + $(du -cb "$PACK" | tail -1 | cut -f1)))
if [ "$sent" -gt $((${GPU_PACK_MIB:-64} * 1048576)) ]; then
  echo "gpu-pack: the repository and $PACK make $((sent / 1048576)) MiB, over the ${GPU_PACK_MIB:-64} MiB a transfer takes:" \
    "pack again without --no-data (fewer of tygem-9d's files then fit)" >&2
  exit 1
fi
echo "gpu-pack: $((sent / 1048576)) MiB to send with the repository (at most ${GPU_PACK_MIB:-64})"
