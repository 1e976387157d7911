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


def final_score(binary, sgf):
    commands = f"loadsgf {sgf}\nfinal_score\nquit\n"
    out = subprocess.run([binary, "gtp", "--engine", "random"], input=commands,
                         capture_output=True, text=True, check=True).stdout
    answers = [line[1:].strip() for line in out.splitlines() if line.startswith(("=", "?"))]
    if len(answers) < 2 or not out.count("="):
        raise RuntimeError(f"{binary} could not score {sgf}: {out.strip()}")
    return answers[1]


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
    games = 0
    for folder in args.matches:
        path = os.path.join(folder, "games.jsonl")
        if not os.path.exists(path):
            print(f"{folder}: no games.jsonl, skipped", file=sys.stderr)
            continue
        for line in open(path):
            game = json.loads(line)
            gnugo = game.get("gnugo_score")
            if not gnugo or game.get("reason") != "passes":
                continue
            games += 1
            scores = {name: final_score(b, game["file"]) for name, b in binaries.items()}
            for name, score in scores.items():
                totals[name]["winner"] += score[:1] == gnugo[:1]
                totals[name]["exact"] += score == gnugo
            if any(score != gnugo for score in scores.values()):
                shown = "  ".join(f"{name} {score}" for name, score in scores.items())
                print(f"{game['file']}: GnuGo {gnugo}  {shown}")
    for name, t in totals.items():
        print(f"{name}: the same winner as GnuGo in {t['winner']} of {games} games, "
              f"the same score in {t['exact']}")


if __name__ == "__main__":
    main()
