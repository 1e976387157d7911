#!/usr/bin/env bash
# Runs go-train's CUDA build on a GPU machine: the net and training tests on
# the GPU, the speed comparison with PyTorch, the data loader's rate, and
# training in resumable segments. Everything it measures is logged under
# $OUT (default gpu-out/). docs/results/gpu.md gives the figures it produced.
#
#   scripts/gpu-run.sh STEP [STEP ...]
#
# Steps (run in the order given):
#   lease         the steps of a 15-minute lease, with their settings for
#                 one (LEASE_STEPS, lease_defaults below; any set in the
#                 environment wins)
#   setup         unpack what scripts/gpu-pack.sh packed into .gpu/ (binary,
#                 test binaries, game records) and find the CUDA libraries
#   test          the lib's net/train/search tests and tests/train_cli.rs
#                 with GO_TRAIN_TEST_DEVICE=cuda
#   bench         go-train bench train --device cuda against
#                 scripts/torch_nets.py cuda, same nets and batches, PyTorch
#                 reading its loss every step and every 10 (TORCH_READ_EVERY);
#                 then both in bf16 (go-train --precision bf16, PyTorch
#                 autocast bf16 + channels_last; BENCH_BF16=0 skips)
#   bench-ab      go-train's GPU paths one against another, same nets and
#                 batches: every path on, then each switched off alone:
#                 the in-place optimizer and running averages
#                 (GO_TRAIN_FUSED_OPTIM=0 GO_TRAIN_FUSED_BN_STATS=0), the
#                 first gradients stored as they are (GO_TRAIN_FUSED_GRADS=0,
#                 vendor/README.md), the fused loss (GO_TRAIN_FUSED_LOSS=0),
#                 cuDNN's algorithms chosen by timing (GO_TRAIN_CUDNN_BENCHMARK=0),
#                 the kernels' channel walk (GO_TRAIN_CHANNEL_WALK=0), the
#                 residual tower channels-last (GO_TRAIN_CHANNELS_LAST=0); last,
#                 cudarc's event tracking on (GO_TRAIN_CUDA_EVENTS=1). Each
#                 for BENCH_AB_SECONDS (2) a net and batch; AB_PATHS lists
#                 other settings (plans,own,timed,grads,optim,loss,events,walk,
#                 last as 0 or 1, then f32 or bf16, then keep, sums and graph
#                 as 0 or 1; plans and own 0 are candle's convolutions and ops,
#                 GO_TRAIN_CUDNN_PLANS and GO_TRAIN_CUDA_KERNELS; keep 0
#                 hands freed GPU memory back at each synchronisation,
#                 GO_TRAIN_CUDA_KEEP_MEMORY=0; sums 0 finishes batch norm's
#                 sums in a kernel of their own, GO_TRAIN_FUSED_SUMS=0; graph
#                 1 replays each step as a captured CUDA graph,
#                 GO_TRAIN_CUDA_GRAPH=1; engines 1 convolves through
#                 cuDNN's graph API, GO_TRAIN_CUDNN_ENGINES=1; walk, last,
#                 the precision, keep, sums, graph and engines may be left
#                 out: 1, 1, f32, 1, 1, 0, 0)
#   profile       where a step's GPU time goes, kernel by kernel: Nsight
#                 Compute times each kernel of PROFILE_STEPS (5) timed steps
#                 of go-train bench train (scripts/kernel-times.py sums
#                 them by name), and torch.profiler the same steps of
#                 scripts/torch_nets.py; for each net:batch of PROFILE_RUNS
#                 (policy:1024 value:1024 resnet-policy:10x128:1024 policy:100;
#                 net:batch:bf16 profiles go-train --precision bf16 against
#                 PyTorch's autocast bf16)
#   selfplay      go-train selfplay of the shipped policy against itself on
#                 the GPU: SELFPLAY_GAMES games (4096) for each THREADS:BATCH
#                 of SELFPLAY_RUNS (16:512): workers, and games a worker at most;
#                 each with GO_TRAIN_CUDA_BLOCKING set to each of
#                 SELFPLAY_BLOCKING (0)
#   prepare       filter + prepare kgs-6d (even games) and tygem-9d into
#                 datasets/gpu (all cores), then bench reader
#   train=SECS    train-policy --resume-or-start for at most SECS seconds with the
#                 config in $GPU_CONFIG (default configs/resnet-policy-continue.toml),
#                 sampling GPU use with nvidia-smi; copies the checkpoint to $OUT
#                 (split in 15 MB parts: $OUT takes no bigger file).
#                 train=left: until GPU_DEADLINE, less EVAL_RESERVE (60) seconds;
#                 TRAIN_GRAPH=0 steps op by op (GO_TRAIN_CUDA_GRAPH=0)
#   train-bf16    accuracy per sample in each precision: one epoch of
#                 AB_STEPS (300) steps of train-policy with $GPU_CONFIG from
#                 the same weights and batches, precision f32 then bf16, each
#                 validated on AB_VALIDATION (20000) positions
#   train-ab      one switch of a training run off, then on (TRAIN_AB,
#                 default GO_TRAIN_FUSED_INPUTS: a step's inputs as f32
#                 copied from pageable memory, then as bits through pinned
#                 memory): one epoch of AB_STEPS (300) steps each of
#                 train-policy with $GPU_CONFIG in a scratch folder, from
#                 the same weights and batches, with its positions/s,
#                 validation loss and the GPU's busy share
#   eval          eval of the checkpoint on the test split (games never trained on)
#                 beside the shipped nets/resnet-policy.safetensors on the same
#                 positions; the run's best weights to $OUT
#
# Environment: OUT (logs and results), GPU_CONFIG, GPU_RUN (checkpoint
# folder, default checkpoints/gpu-resnet), GPU_TRAIN_ARGS (more train-policy
# arguments, e.g. --set seed=4), BENCH_NETS, BENCH_BATCHES,
# BENCH_AB_SECONDS, TORCH_SECONDS, TORCH_READ_EVERY, AB_PATHS (bench-ab's
# settings, above), GPU_DEADLINE (seconds from the start after which no
# further step starts: a lease's device time is short and a step cut off
# brings nothing back), STEP_SECONDS (the most one go-train command of
# bench, bench-ab, selfplay, train-ab or eval may run: a hang costs that,
# not the lease). A checkpoint brought back as $OUT/run.tar.gz (or its
# parts) and unpacked into checkpoints/ is resumed. BENCH_BF16, BENCH_FP32,
# AB_STEPS, AB_VALIDATION, TRAIN_AB: see bench, train-bf16 and train-ab.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
PACK=.gpu
BIN="$PWD/$PACK/go-train-cuda"
DATA=datasets/gpu
RUN="${GPU_RUN:-checkpoints/gpu-resnet}"
CONFIG="${GPU_CONFIG:-configs/resnet-policy-continue.toml}"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/log.txt" >&2; }
STEP_SECONDS="${STEP_SECONDS:-240}"
# Seconds left before GPU_DEADLINE (a large number without one).
left() { if [ -n "${GPU_DEADLINE:-}" ]; then echo $((GPU_DEADLINE - SECONDS)); else echo 999999; fi; }
# go-train under STEP_SECONDS; a failure is logged with its status, and
# bench and bench-ab steps go on with the next command.
gt() {
  timeout "$STEP_SECONDS" "$BIN" "$@"
  local rc=$?
  # The callers log stderr.
  [ "$rc" = 0 ] || echo "gpu-run: go-train $1 ${2:-} ended with status $rc$([ "$rc" = 124 ] && echo " (past STEP_SECONDS=$STEP_SECONDS)")" >&2
  return "$rc"
}

cuda_libs() {
  local site
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_path("platlib"))' 2>/dev/null)
  for d in "$site/nvidia/cu13/lib" /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do
    # cuDNN (for a --features cudnn build) sits beside cu13 in the same wheels.
    if [ -e "$d/libcublas.so.13" ]; then echo "$d:$(dirname "$(dirname "$d")")/cudnn/lib"; return; fi
  done
  echo "gpu-run: no CUDA 13 libraries (libcublas.so.13) found" >&2
  return 1
}

setup() {
  log setup
  # gzip, not zstd: the GPU machine has no zstd command.
  for f in "$PACK"/*.gz; do
    case "$f" in
      */run.tar.gz) ;;
      *.tar.gz) mkdir -p "$PACK/datasets" && tar xzf "$f" -C "$PACK/datasets" ;;
      *) [ -e "${f%.gz}" ] || gzip -dc "$f" >"${f%.gz}" ;;
    esac
  done
  chmod +x "$PACK"/go-train-cuda "$PACK"/test-* 2>/dev/null
  # The test binaries were built at /work/main: their CARGO_BIN_EXE and
  # CARGO_MANIFEST_DIR point there.
  if [ "$PWD" != /work/main ] && ! [ -e /work/main ]; then mkdir -p /work && ln -s "$PWD" /work/main; fi
  mkdir -p target/cuda/release && cp "$BIN" target/cuda/release/go-train
  # A run brought back from an earlier machine continues here.
  if ! [ -e "$RUN/last" ]; then
    if [ -e "$PACK/run.tar.gz" ]; then mkdir -p "$(dirname "$RUN")" && tar xzf "$PACK/run.tar.gz" -C "$(dirname "$RUN")"
    elif [ -e "$PACK/run.tar.gz.part-aa" ]; then mkdir -p "$(dirname "$RUN")" && cat "$PACK"/run.tar.gz.part-* | tar xzf - -C "$(dirname "$RUN")"; fi
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$OUT/log.txt"
  echo "cores: $(nproc)" | tee -a "$OUT/log.txt"
}

test_step() {
  log test
  export GO_TRAIN_TEST_DEVICE=cuda GO_TRAIN_DATASETS="$PWD/$PACK/datasets"
  # The captured CUDA graph's test in a process of its own: a replay that
  # went wrong could leave the GPU context unusable for the other tests.
  timeout "${TEST_SECONDS:-300}" "$PACK"/test-lib --test-threads 4 nn:: train:: --skip train::stepper 2>&1 |
    tail -40 | tee -a "$OUT/log.txt"
  timeout 60 "$PACK"/test-lib train::stepper --nocapture 2>&1 | tail -20 | tee -a "$OUT/log.txt"
  timeout "${TEST_SECONDS:-300}" "$PACK"/test-train-cli --test-threads 2 2>&1 | tail -30 | tee -a "$OUT/log.txt"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/log.txt"
}

bench() {
  log bench
  local nets="${BENCH_NETS:-policy,playout,value,resnet-policy:10x128,resnet-policy:6x128}"
  local batches="${BENCH_BATCHES:-100,1024}"
  if ! gt bench train --device cuda --net "$nets" --batch "$batches" --seconds "${BENCH_SECONDS:-4}" 2>&1 | tee -a "$OUT/log.txt"; then
    # A new fused path that fails on this machine should not cost the
    # whole comparison: the same again with every fused path off.
    echo "-- again with GO_TRAIN_FUSED_*=0" | tee -a "$OUT/log.txt"
    GO_TRAIN_FUSED_OPTIM=0 GO_TRAIN_FUSED_BN_STATS=0 GO_TRAIN_FUSED_LOSS=0 GO_TRAIN_FUSED_GRADS=0 \
      gt bench train --device cuda --net "$nets" --batch "$batches" --seconds "${BENCH_SECONDS:-4}" 2>&1 | tee -a "$OUT/log.txt"
  fi
  # The host's own work a step: CPU seconds while the CPU sleeps through
  # its waits for the GPU instead of spinning.
  GO_TRAIN_CUDA_BLOCKING=1 gt bench train --device cuda --net policy,resnet-policy:10x128 --batch 100 \
    --seconds "${BENCH_SECONDS:-4}" 2>&1 | tee -a "$OUT/log.txt"
  if [ "${BENCH_FP32:-1}" = 1 ]; then
    # Full float32 (its residual tower NCHW: channels-last ran it at 0.4x);
    # BENCH_FP32=0 skips.
    gt bench train --device cuda --net resnet-policy:10x128 --batch 256 --seconds "${BENCH_SECONDS:-4}" --tf32 false 2>&1 |
      tee -a "$OUT/log.txt"
  fi
  # PyTorch reading its loss every step (a plain loop) and every 10 (as
  # go-train's loop does).
  for every in ${TORCH_READ_EVERY:-1 10}; do
    PYTHONPATH="$PACK" python3 scripts/torch_nets.py cuda --net "$nets" --batch "$batches" --seconds "${TORCH_SECONDS:-4}" \
      --read-every "$every" 2>&1 | tee -a "$OUT/log.txt"
  done
  [ "${BENCH_BF16:-1}" = 1 ] || return 0
  echo "-- bf16" | tee -a "$OUT/log.txt"
  gt bench train --device cuda --net "$nets" --batch "$batches" --seconds "${BENCH_SECONDS:-4}" --precision bf16 2>&1 |
    tee -a "$OUT/log.txt"
  PYTHONPATH="$PACK" python3 scripts/torch_nets.py cuda --net "$nets" --batch "$batches" --seconds "${TORCH_SECONDS:-4}" \
    --read-every 10 --bf16 2>&1 | tee -a "$OUT/log.txt"
}

bench_ab() {
  log bench-ab
  local nets="${BENCH_NETS:-policy,playout,value,resnet-policy:10x128,resnet-policy:6x128}"
  local batches="${BENCH_BATCHES:-100,1024}" plans own timed grads optim loss events walk last precision keep sums graph
  local engines
  for paths in ${AB_PATHS:-1,1,1,1,1,1,0,1 1,1,1,1,0,1,0,1 1,1,1,0,1,1,0,1 1,1,1,1,1,0,0,1 1,1,0,1,1,1,0,1 \
    1,1,1,1,1,1,0,0 1,1,1,1,1,1,0,1,0 1,1,1,1,1,1,1,1}; do
    [ "$(left)" -gt 20 ] || { echo "bench-ab: GPU_DEADLINE reached" | tee -a "$OUT/log.txt"; break; }
    IFS=, read -r plans own timed grads optim loss events walk last precision keep sums graph engines <<<"$paths"
    walk=${walk:-1} last=${last:-1} precision=${precision:-f32} keep=${keep:-1} sums=${sums:-1} graph=${graph:-0}
    engines=${engines:-0}
    echo "-- GO_TRAIN_CUDNN_PLANS=$plans GO_TRAIN_CUDA_KERNELS=$own GO_TRAIN_CUDNN_BENCHMARK=$timed" \
      "GO_TRAIN_FUSED_GRADS=$grads GO_TRAIN_FUSED_OPTIM=$optim GO_TRAIN_FUSED_BN_STATS=$optim" \
      "GO_TRAIN_FUSED_LOSS=$loss GO_TRAIN_CUDA_EVENTS=$events GO_TRAIN_CHANNEL_WALK=$walk" \
      "GO_TRAIN_CHANNELS_LAST=$last GO_TRAIN_CUDA_KEEP_MEMORY=$keep GO_TRAIN_FUSED_SUMS=$sums" \
      "GO_TRAIN_CUDA_GRAPH=$graph GO_TRAIN_CUDNN_ENGINES=$engines --precision $precision" | tee -a "$OUT/log.txt"
    GO_TRAIN_CUDNN_PLANS=$plans GO_TRAIN_CUDA_KERNELS=$own GO_TRAIN_CUDNN_BENCHMARK=$timed GO_TRAIN_FUSED_GRADS=$grads \
      GO_TRAIN_FUSED_OPTIM=$optim GO_TRAIN_FUSED_BN_STATS=$optim GO_TRAIN_FUSED_LOSS=$loss GO_TRAIN_CUDA_EVENTS=$events \
      GO_TRAIN_CHANNEL_WALK=$walk GO_TRAIN_CHANNELS_LAST=$last GO_TRAIN_CUDA_KEEP_MEMORY=$keep \
      GO_TRAIN_FUSED_SUMS=$sums GO_TRAIN_CUDA_GRAPH=$graph GO_TRAIN_CUDNN_ENGINES=$engines gt bench train \
      --device cuda --net "$nets" \
      --batch "$batches" --precision "$precision" --seconds "${BENCH_AB_SECONDS:-2}" 2>&1 | tee -a "$OUT/log.txt"
  done
}

profile() {
  log profile
  local ncu spec net batch report steps="${PROFILE_STEPS:-5}"
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for spec in ${PROFILE_RUNS:-policy:1024 value:1024 resnet-policy:10x128:1024 policy:100}; do
    [ "$(left)" -gt 30 ] || { echo "profile: GPU_DEADLINE reached" | tee -a "$OUT/log.txt"; break; }
    local precision=() torch_bf16=()
    if [ "${spec##*:}" = bf16 ]; then spec=${spec%:bf16} precision=(--precision bf16) torch_bf16=(--bf16); fi
    net=${spec%:*} batch=${spec##*:}
    echo "-- $net, batch $batch${precision[*]:+, bf16}" | tee -a "$OUT/log.txt"
    if [ -n "$ncu" ]; then
      report=$(mktemp -u /tmp/ncu-XXXXXX)
      timeout "${PROFILE_SECONDS:-90}" "$ncu" --profile-from-start off --metrics gpu__time_duration.sum -o "$report" \
        "$BIN" bench train --device cuda --net "$net" --batch "$batch" --steps "$steps" --seconds 1 "${precision[@]}" \
        >>"$OUT/log.txt" 2>&1
      "$ncu" --import "$report.ncu-rep" --csv --page raw --print-units base >"$report.csv" 2>>"$OUT/log.txt" &&
        python3 scripts/kernel-times.py "$report.csv" --steps "$steps" 2>&1 | tee -a "$OUT/log.txt"
    else
      echo "profile: no ncu on this machine" | tee -a "$OUT/log.txt"
    fi
    PYTHONPATH="$PACK" timeout "${PROFILE_SECONDS:-90}" python3 scripts/torch_nets.py cuda --net "$net" --batch "$batch" --seconds 1 \
      --profile "$steps" "${torch_bf16[@]}" 2>&1 | grep -v '^\(USDT\|ERROR\|WARNING\):' | tee -a "$OUT/log.txt"
  done
}

selfplay() {
  log selfplay
  local games run
  for run in ${SELFPLAY_RUNS:-16:512}; do
    [ "$(left)" -gt 30 ] || { echo "selfplay: GPU_DEADLINE reached" | tee -a "$OUT/log.txt"; break; }
    case "$run" in [0-9]*:[0-9]*) ;; *) echo "selfplay: $run in SELFPLAY_RUNS is not THREADS:BATCH" | tee -a "$OUT/log.txt"; continue ;; esac
    for blocking in ${SELFPLAY_BLOCKING:-0}; do
      games=$(mktemp -d)
      echo "-- threads ${run%:*}, batch ${run#*:}, GO_TRAIN_CUDA_BLOCKING=$blocking" | tee -a "$OUT/log.txt"
      GO_TRAIN_CUDA_BLOCKING=$blocking gt selfplay --device cuda --games "${SELFPLAY_GAMES:-4096}" --threads "${run%:*}" \
        --batch "${run#*:}" --out "$games/selfplay" 2>&1 | grep -v '^selfplay: [0-9]' | tail -8 | tee -a "$OUT/log.txt"
      rm -rf "$games"
    done
  done
}

prepare() {
  log prepare
  local recs="$PACK/datasets" dirs=()
  for d in ${GPU_RECORDS:-kgs-6d tygem-9d-2010-2011}; do dirs+=("$recs/$d"); done
  "$BIN" filter "${dirs[@]}" --out datasets/gpu.list 2>&1 | tail -2 | tee -a "$OUT/log.txt"
  if ! [ -e "$DATA/manifest.json" ]; then
    /usr/bin/time -f "prepare: %e s wall, %U s user, %M KB peak" "$BIN" prepare datasets/gpu.list --out "$DATA" 2>&1 |
      tail -8 | tee -a "$OUT/log.txt"
  fi
  "$BIN" dataset info "$DATA" 2>&1 | head -12 | tee -a "$OUT/log.txt"
  "$BIN" bench reader --data "$DATA" --seconds 4 2>&1 | tee -a "$OUT/log.txt"
}

# Runs the command after NAME with nvidia-smi sampling the GPU's use into
# $OUT/gpu-util-NAME.csv, and logs the mean busy share.
with_gpu_busy() {
  local name=$1 smi
  shift
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >"$OUT/gpu-util-$name.csv" &
  smi=$!
  "$@" 2>&1 | grep -v '^\s*$' | tail -40 | tee -a "$OUT/log.txt"
  kill "$smi" 2>/dev/null
  awk -F', ' '{gsub(/ %/,"",$2); n++; s+=$2} END {if (n) printf "GPU busy: %.1f%% mean over %d samples\n", s/n, n}' \
    "$OUT/gpu-util-$name.csv" | tee -a "$OUT/log.txt"
}

train() {
  local secs=$1
  if [ "$secs" = left ]; then
    secs=$(($(left) - ${EVAL_RESERVE:-60}))
    [ "$secs" -ge 60 ] || { echo "train: $secs s left before GPU_DEADLINE, too few for an epoch" | tee -a "$OUT/log.txt"; return; }
  fi
  log "train $secs s"
  # shellcheck disable=SC2086
  GO_TRAIN_CUDA_GRAPH="${TRAIN_GRAPH:-1}" with_gpu_busy train timeout $((secs + 120)) "$BIN" train-policy \
    --config "$CONFIG" --out "$RUN" --resume-or-start --stop-after "$secs" ${GPU_TRAIN_ARGS:-}
  # $OUT takes no file over 16 MiB: weights and optimizer state in parts.
  tar czf - -C "$(dirname "$RUN")" "$(basename "$RUN")" | split -b 15M - "$OUT/run.tar.gz.part-"
}

train_bf16() {
  log train-bf16
  local precision scratch
  [ -e "$DATA/manifest.json" ] || { echo "train-bf16: no dataset in $DATA (step prepare first)" | tee -a "$OUT/log.txt"; return; }
  for precision in f32 bf16; do
    [ "$(left)" -gt 60 ] || { echo "train-bf16: GPU_DEADLINE reached" | tee -a "$OUT/log.txt"; break; }
    scratch=$(mktemp -d)
    echo "-- precision $precision" | tee -a "$OUT/log.txt"
    with_gpu_busy "precision-$precision" timeout "$STEP_SECONDS" "$BIN" train-policy --config "$CONFIG" \
      --out "$scratch/run" --set epochs=1 --set steps_per_epoch="${AB_STEPS:-300}" \
      --set validation_positions="${AB_VALIDATION:-20000}" --set precision="$precision"
    rm -rf "$scratch"
  done
}

train_ab() {
  local switch="${TRAIN_AB:-GO_TRAIN_FUSED_INPUTS}" on scratch
  log "train-ab $switch"
  for on in 0 1; do
    [ "$(left)" -gt 60 ] || { echo "train-ab: GPU_DEADLINE reached" | tee -a "$OUT/log.txt"; break; }
    scratch=$(mktemp -d)
    echo "-- $switch=$on" | tee -a "$OUT/log.txt"
    with_gpu_busy "${switch,,}-$on" env "$switch=$on" timeout "$STEP_SECONDS" "$BIN" train-policy --config "$CONFIG" \
      --out "$scratch/run" --set epochs=1 --set steps_per_epoch="${AB_STEPS:-300}" \
      --set validation_positions="${AB_VALIDATION:-20000}"
    rm -rf "$scratch"
  done
}

eval_step() {
  log eval
  local shipped=nets/resnet-policy.safetensors
  [ -e "$RUN/last" ] || { echo "eval: no checkpoint in $RUN" | tee -a "$OUT/log.txt"; return; }
  gt eval --data "$DATA" --split test --policy "$RUN" --device cuda --limit "${EVAL_POSITIONS:-200000}" \
    --json >"$OUT/eval-test.json" 2>>"$OUT/log.txt"
  head -c 1500 "$OUT/eval-test.json" | tee -a "$OUT/log.txt"; echo
  # The net it would replace, on the same positions.
  if [ -e "$shipped" ]; then
    gt eval --data "$DATA" --split test --policy "$shipped" --device cuda --limit "${EVAL_POSITIONS:-200000}" \
      --json >"$OUT/eval-shipped.json" 2>>"$OUT/log.txt"
    head -c 600 "$OUT/eval-shipped.json" | tee -a "$OUT/log.txt"; echo
  fi
  [ -e "$RUN/best.safetensors" ] && cp "$RUN/best.safetensors" "$OUT/resnet-best.safetensors"
  cp "$RUN/metrics.jsonl" "$OUT/train-metrics.jsonl" 2>/dev/null
}

# $OUT brings back 8 files at most: the small ones go in one archive.
bundle_out() {
  local small
  small=$(cd "$OUT" && find . -maxdepth 1 -type f \( -name '*.csv' -o -name '*.json' -o -name '*.jsonl' -o -name '*.txt' \) \
    ! -name log.txt -printf '%P\n' | sort)
  [ -n "$small" ] || return 0
  (cd "$OUT" && echo "$small" | tar czf records.tar.gz -T - && echo "$small" | xargs rm -f)
}

# A whole 15-minute lease in one command, the steps in the order their
# figures matter, the slow ones bounded: what scripts/gpu-pack.sh prepares
# for. About 8.5 minutes.
LEASE_STEPS="setup test bench bench-ab profile selfplay prepare train=left eval"
lease_defaults() {
  : "${GPU_DEADLINE:=540}" "${STEP_SECONDS:=150}" "${TEST_SECONDS:=100}" "${BENCH_SECONDS:=3}" "${TORCH_SECONDS:=3}"
  : "${BENCH_AB_SECONDS:=1}" "${PROFILE_STEPS:=3}" "${PROFILE_SECONDS:=60}" "${SELFPLAY_GAMES:=2048}"
  # Each path's switch was timed alone by 2026-11-27's runs: every path on,
  # in f32 and in bf16, as the reference for the profiles below; each with
  # and without the whole step replayed as a CUDA graph. Then, each
  # against the graph's run of its precision, what has not yet run on a
  # GPU: bf16 NCHW throughout (the seed policy's trunk goes channels-last
  # in bf16), and cuDNN's graph API in f32 and in bf16.
  : "${AB_PATHS:=1,1,1,1,1,1,0,1,1 1,1,1,1,1,1,0,1,1,f32,1,1,1 1,1,1,1,1,1,0,1,1,bf16 1,1,1,1,1,1,0,1,1,bf16,1,1,1 \
1,1,1,1,1,1,0,1,0,bf16,1,1,1 1,1,1,1,1,1,0,1,1,f32,1,1,1,1 1,1,1,1,1,1,0,1,1,bf16,1,1,1,1}"
  # Self-play's setting was decided by 2026-11-30's run: a worker a core,
  # spinning while it waits (the defaults).
  : "${SELFPLAY_RUNS:=16:512}" "${SELFPLAY_BLOCKING:=0}"
  # Full float32's layout was decided by 2026-11-28's run (NCHW).
  : "${BENCH_FP32:=0}"
  # The two shapes furthest behind PyTorch in 2026-11-30's run: the seed
  # policy in bf16 at batch 1,024 (0.70x, never profiled) and the residual
  # net in f32 at batch 100, replayed as a graph (1.34x where 1.5x is asked).
  : "${PROFILE_RUNS:=policy:1024:bf16 resnet-policy:10x128:100}"
  : "${BENCH_NETS:=policy,playout,value,resnet-policy:10x128}"
  export GPU_DEADLINE STEP_SECONDS TEST_SECONDS BENCH_SECONDS TORCH_SECONDS BENCH_AB_SECONDS PROFILE_STEPS PROFILE_SECONDS \
    SELFPLAY_GAMES SELFPLAY_RUNS SELFPLAY_BLOCKING AB_PATHS PROFILE_RUNS BENCH_NETS BENCH_FP32
}

# Every step name is checked before anything runs: a misspelt last step
# once cost a lease the steps before it, and left $OUT unbundled.
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; }
if [ $# -eq 0 ] || [ "$1" = --help ] || [ "$1" = -h ]; then usage; exit $((${#} == 0 ? 2 : 0)); fi
for step in "$@"; do
  case "$step" in
    lease | setup | test | bench | bench-ab | profile | selfplay | prepare | train=* | train-ab | train-bf16 | eval) ;;
    *) echo "gpu-run: unknown step $step (scripts/gpu-run.sh --help lists them); nothing was run" >&2; exit 2 ;;
  esac
done
libs=$(cuda_libs) || exit 1
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
steps=()
for step in "$@"; do
  if [ "$step" = lease ]; then
    lease_defaults
    # shellcheck disable=SC2206
    steps+=($LEASE_STEPS)
  else
    steps+=("$step")
  fi
done
for step in "${steps[@]}"; do
  if [ "$(left)" -le 0 ]; then echo "gpu-run: GPU_DEADLINE reached, skipping $step" | tee -a "$OUT/log.txt"; continue; fi
  case "$step" in
    setup) setup ;;
    test) test_step ;;
    bench) bench ;;
    bench-ab) bench_ab ;;
    profile) profile ;;
    selfplay) selfplay ;;
    prepare) prepare ;;
    train=*) train "${step#train=}" ;;
    train-ab) train_ab ;;
    train-bf16) train_bf16 ;;
    eval) eval_step ;;
    *) echo "gpu-run: unknown step $step" >&2; exit 2 ;;
  esac
done
bundle_out
log done
