#!/usr/bin/env bash
# The main job on real games a fresh machine can get: Debian's
# goban-original-games (596 professional games), laid out under datasets/,
# filtered, prepared into a dataset, checked, then a short training of the
# policy net, its evaluation on the held-out games and a short match against
# the random agent (about a minute on a CPU; drop --steps-per-epoch and raise
# --epochs for a real run), then a short match of the shipped nets.
#
# Usage: scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch-sample-data.sh datasets/goban-original-games
cargo build --release
bin=target/release/go-train

# These games are from 1941-1997 and some have no komi: relax the default
# criteria (2000 or later, komi 5 to 8), which are meant for server games.
$bin filter datasets/goban-original-games --out datasets/pro.list --min-year 0 --any-komi
$bin prepare datasets/pro.list --out datasets/pro --force
$bin dataset info datasets/pro
$bin dataset verify datasets/pro
first=datasets/$(sed -n 2p datasets/pro.list | cut -f1) # named from the list's folder
$bin show --move 60 "$first"

$bin train-policy --data datasets/pro --out checkpoints/quickstart-policy --force \
  --epochs 2 --steps-per-epoch 150 --set validation_positions=5000
$bin eval --data datasets/pro --policy checkpoints/quickstart-policy --limit 5000

# The trained net plays: four games against the random agent, saved as SGF.
$bin eval --match policy random --policy checkpoints/quickstart-policy --games 4 --out matches/quickstart --force

# The nets go-train ships (nets/, trained on 79,000 strong amateur games,
# built into the program): MCTS with them, as `go-train gtp` plays (the
# tuned search, the residual policy choosing the root's children) but at
# half its 800 iterations a move to keep this short, against their policy
# net alone, two games.
$bin eval --match mcts:iterations=400 policy --games 2 --out matches/quickstart-shipped --force
