#!/usr/bin/env bash
# go-train's GTP engine under gomill's ringmaster, a strict GTP tournament
# client: it checks the engines (gomill-describe_engine, gomill-cpu_time,
# final_score), plays a playoff against GnuGo and reports it.
#
# Usage: scripts/ringmaster.sh [GAMES [GNUGO_LEVEL [ITERATIONS]]]
#   (defaults: 2 games, GnuGo level 1, 50 MCTS iterations a move)
# Needs Python 2 with gomill (pyenv: PYENV_VERSION=2.7.18 python2 -m pip
# install gomill) and GnuGo. Games, logs and the report go to
# matches/ringmaster/.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h|--help) sed -n 2,10p "$0"; exit 0;; esac
games=${1:-2} level=${2:-1} iterations=${3:-50}
export PYENV_VERSION=${PYENV_VERSION:-2.7.18}
# pyenv's shim is a shell script; python2 needs the script itself.
ringmaster="$(pyenv root 2>/dev/null)/versions/$PYENV_VERSION/bin/ringmaster"
[ -x "$ringmaster" ] || ringmaster=$(command -v ringmaster || true)
[ -x "$ringmaster" ] || { echo "ringmaster not found: install gomill for Python 2" >&2; exit 1; }
gnugo=${GNUGO:-/usr/games/gnugo}
cargo build --release
dir=matches/ringmaster
mkdir -p "$dir"
cat > "$dir/go-train.ctl" <<CTL
competition_type = 'playoff'
board_size = 19
komi = 7.5
record_games = True
stderr_to_log = True
players = {
    'go-train': Player('$PWD/target/release/go-train gtp --iterations $iterations'),
    'gnugo': Player('$gnugo --mode gtp --level $level --chinese-rules'),
}
matchups = [
    Matchup('go-train', 'gnugo', alternating=True, number_of_games=$games, scorer='players', move_limit=1000),
]
CTL
python2 "$ringmaster" "$dir/go-train.ctl" check
python2 "$ringmaster" "$dir/go-train.ctl" run --max-games "$games"
python2 "$ringmaster" "$dir/go-train.ctl" report
cat "$dir/go-train.report"
