#!/usr/bin/env bash
# The playing-strength matches of docs/results/strength.md: policy net against
# the random agent, MCTS against the policy net alone, and both against
# GnuGo 3.8 at level 10, on 19x19 with komi 7.5. Each match writes its SGF
# files, games.jsonl and summary.json under $MATCHES/<name>/ (default
# matches/): a match there already is finished (--resume), and a folder
# holding another (other nets or settings) is refused, never replaced.
#
# Usage: scripts/strength-report.sh [POLICY PLAYOUT [VALUE [GAMES_SCALE]]]
#   POLICY, PLAYOUT, VALUE: checkpoint folders or weights files of the nets
#   (default: the shipped nets/policy.safetensors, nets/playout.safetensors
#   and nets/value.safetensors; with VALUE "-", MCTS values its leaves by
#   stone count and the value-leaf match is left out).
#   GAMES_SCALE: multiplies every match's number of games (default 1).
# Environment: MATCHES (the folder of the matches), GNUGO (default
#   /usr/games/gnugo), PARALLEL (games at once),
#   ROOT_POLICY (the net that chooses MCTS's root children in the match of
#   the engine as `go-train gtp` plays; default nets/resnet-policy.safetensors
#   with the shipped policy, none when POLICY is given; "-" for none).
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0;; esac
policy=${1:-nets/policy.safetensors} playout=${2:-nets/playout.safetensors} value=${3:-nets/value.safetensors} scale=${4:-1}
gnugo=${GNUGO:-/usr/games/gnugo}
parallel=${PARALLEL:-$(nproc)}
bin=target/release/go-train
cargo build --release
nets=(--policy "$policy" --playout "$playout")
[ "$value" = - ] || nets+=(--value "$value")

match() { # name games A B [more eval flags]
  local name=$1 games=$(( $2 * scale )) a=$3 b=$4; shift 4
  echo "== $name: $a vs $b, $games games"
  $bin eval --match "$a" "$b" "${nets[@]}" --games "$games" --parallel "$parallel" \
    --out "${MATCHES:-matches}/$name" --resume "$@"
}

match policy-vs-random 100 policy random
# The seed design's search (UCB1, 200 iterations, 5-move rollouts), then
# with PUCT, as the README's first matches played it.
match mcts-ucb-stones-vs-policy 20 mcts:preset=seed,leaf=stones policy
match mcts-puct-stones-vs-policy 20 mcts:preset=seed,leaf=stones,selection=puct policy
[ "$value" = - ] || match mcts-puct-value-vs-policy 20 mcts:preset=seed,leaf=value,selection=puct policy
match policy-vs-gnugo10 20 policy "$gnugo --mode gtp --level 10" --cross-check "$gnugo --mode gtp --chinese-rules"
# The engine as `go-train gtp` plays with the shipped nets (the tuned search,
# the default: no rollout, 800 iterations, tactics on, leaves mixed with
# random playouts as the board settles, the residual policy choosing the
# root's children), value leaves when there is a value net. The nets are
# named by --policy and friends here, so the residual root is named too.
leaf=value; [ "$value" = - ] && leaf=stones
# As `go-train gtp`: the residual root goes with the shipped policy only.
default_root=nets/resnet-policy.safetensors; [ -n "${1:-}" ] && default_root=-
root=${ROOT_POLICY:-$default_root}; root_setting=; [ "$root" = - ] || root_setting=",root-policy=$root"
match mcts-vs-gnugo10 40 "mcts:leaf=$leaf$root_setting" "$gnugo --mode gtp --level 10" --cross-check "$gnugo --mode gtp --chinese-rules"
