#!/usr/bin/env python3
"""Does go-train count finished games as GnuGo does?

Usage: scripts/rescore-matches.py [--go-train BIN] [--baseline BIN] MATCH_DIR...

Every game of the given match folders (`go-train eval --match ... --cross-check
GNUGO`) that ended in two passes and has GnuGo's `final_score` in games.jsonl is
loaded into `go-train gtp` (`loadsgf`, `final_score`: dead stones judged by
random playouts) and the two counts are compared: the same winner, and the
same score to the half point. With --baseline a second go-train binary (an
older build) is scored beside it, so a change to the judgement shows what it
mends and what it breaks. Prints each game where a count differs, then the
totals.

Example (every match folder):
  scripts/rescore-matches.py matches/*/
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def final_score(binary, sgf):
    """go-train's count of the game in `sgf`, or an error naming why not."""
    with tempfile.TemporaryDirectory() as tmp:
        # GTP splits its arguments at spaces: a path with one did not load.
        game = os.path.join(tmp, "game.sgf")
        os.symlink(os.path.abspath(sgf), game)
        commands = f"loadsgf {game}\nfinal_score\nquit\n"
        try:
            out = subprocess.run([binary, "gtp", "--engine", "random"], input=commands,
                                 capture_output=True, text=True, timeout=120).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"{binary}: {e}")
    answers = [line for line in out.splitlines() if line.startswith(("=", "?"))]
    # A file that does not load must not be scored as the empty board.
    if len(answers) < 2 or not all(a.startswith("=") for a in answers[:2]):
        raise RuntimeError(f"{binary} could not score {sgf}: {' / '.join(answers[:2]) or 'no answer'}")
    return answers[1][1:].strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matches", nargs="+", help="match folders with games.jsonl")
    parser.add_argument("--go-train", default="target/release/go-train")
    parser.add_argument("--baseline", help="a second go-train binary to compare")
    args = parser.parse_args()
    binaries = {"go-train": args.go_train}
    if args.baseline:
        binaries["baseline"] = args.baseline
    totals = {name: {"winner": 0, "exact": 0} for name in binaries}
    games = skipped = 0
    for folder in args.matches:
        path = os.path.join(folder, "games.jsonl")
        if not os.path.exists(path):
            print(f"{folder}: no games.jsonl, skipped", file=sys.stderr)
            continue
        for number, line in enumerate(open(path, errors="replace"), 1):
            try:
                game = json.loads(line)
                gnugo = game.get("gnugo_score")
                if not gnugo or game.get("reason") != "passes":
                    continue
                # The game lies in the match's folder, wherever the match ran.
                sgf = os.path.join(folder, os.path.basename(game["file"]))
                scores = {name: final_score(b, sgf) for name, b in binaries.items()}
            except (ValueError, KeyError, AttributeError, RuntimeError) as e:
                print(f"{path}:{number}: skipped: {e}", file=sys.stderr)
                skipped += 1
                continue
            games += 1
            for name, score in scores.items():
                totals[name]["winner"] += score[:1] == gnugo[:1]
                totals[name]["exact"] += score == gnugo
            if any(score != gnugo for score in scores.values()):
                shown = "  ".join(f"{name} {score}" for name, score in scores.items())
                print(f"{game['file']}: GnuGo {gnugo}  {shown}")
    if skipped:
        print(f"{skipped} games could not be read or scored (above)")
    for name, t in totals.items():
        print(f"{name}: the same winner as GnuGo in {t['winner']} of {games} games, "
              f"the same score in {t['exact']}")
    if games == 0:
        sys.exit("rescore-matches: no game was scored")


if __name__ == "__main__":
    main()
