#!/usr/bin/env python3
"""How often would the `lcb` setting play another move than the most visited?

Usage: scripts/lcb-check.py MATCH_DIR... [--every 12] [--won-every 4]
                            [--visits 800] [--go-train BIN]

MATCH_DIR is a folder `go-train eval --match A B --out MATCH_DIR` wrote, A
being go-train. From move 20 on, every --every moves (the next one where
that lands on the opponent's turn) up to move 260, it asks `go-train
analysis` (the shipped search, --visits visits) to search A's position,
in every lost game and every --won-every-th won one, and counts the
positions where the root child with the highest lower confidence bound on
its win rate (among those with a tenth of the most visits, the `lcb`
setting's rule) is not the most visited child. It lists them with both
moves' visits and win rates.

Replays with sgfmill (pip install sgfmill), as misjudged.py does.
"""
import argparse
import importlib.util
import json
import math
import os
import sys

# The replay of a match's SGF that misjudged.py does (sgfmill).
_spec = importlib.util.spec_from_file_location("misjudged", os.path.join(os.path.dirname(__file__), "misjudged.py"))
misjudged = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(misjudged)


def queries(match_dir, every, won_every, visits):
    log = os.path.join(match_dir, "games.jsonl")
    try:
        rows = [json.loads(line) for line in open(log) if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"lcb-check.py: {log}: not a match's log ({e})")
    won = 0
    for row in sorted(rows, key=lambda r: r["index"]):
        lost = row["winner"] != "a"
        if not lost:
            won += 1
            if (won - 1) % won_every:
                continue
        size, komi, moves = misjudged.moves_of(os.path.join(match_dir, "game-%04d.sgf" % row["index"]))
        black = row["a_black"]
        # Turn t is the position after t moves: Black's to move when t is even.
        turns = [t if (t % 2 == 0) == black else t + 1 for t in range(20, min(len(moves), 260), every)]
        turns = [t for t in turns if t < len(moves)]
        if not turns:
            # No turn given would ask the engine for the game's last one.
            continue
        yield {
            "id": f"{os.path.basename(os.path.normpath(match_dir))}/{row['index']}/{'lost' if lost else 'won'}",
            "moves": moves, "rules": "chinese", "komi": komi, "boardXSize": size, "boardYSize": size,
            "analyzeTurns": turns, "maxVisits": visits,
            "overrideSettings": {"reportAnalysisWinratesAs": "SIDETOMOVE"},
        }


def lower_bound(winrate, visits):
    # The bound of src/search/analysis.rs: mean less 1.96 Bernoulli standard errors.
    return max(0.0, winrate - 1.96 * math.sqrt(winrate * (1 - winrate) / visits))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("match_dirs", nargs="+")
    for flag, default in [("--every", 12), ("--won-every", 4), ("--visits", 800)]:
        parser.add_argument(flag, type=misjudged.positive, default=default)
    parser.add_argument("--go-train", default="target/release/go-train")
    args = parser.parse_args()
    asked = [q for d in args.match_dirs for q in queries(d, args.every, args.won_every, args.visits)]
    try:
        answers = misjudged.analyses(args.go_train, asked)
    except RuntimeError as e:
        sys.exit(f"lcb-check.py: {e}")
    counts = {"lost": [0, 0], "won": [0, 0]}
    parted = []
    for answer in answers:
        infos = answer.get("moveInfos") or []
        if not infos:
            continue
        most = max(infos, key=lambda m: (m["visits"], m["prior"]))
        candidates = [m for m in infos if m["visits"] > 0 and 10 * m["visits"] >= most["visits"]]
        chosen = max(candidates, key=lambda m: (lower_bound(m["winrate"], m["visits"]), m["visits"]))
        kind = answer["id"].rsplit("/", 1)[1]
        counts[kind][0] += 1
        if chosen["move"] != most["move"]:
            counts[kind][1] += 1
            parted.append((answer["id"], answer["turnNumber"], most, chosen))
    positions = sum(c[0] for c in counts.values())
    differ = sum(c[1] for c in counts.values())
    print(f"{positions} positions; lcb plays another move at {differ} ({100 * differ / max(positions, 1):.1f}%): "
          f"{counts['lost'][1]} of {counts['lost'][0]} in lost games, {counts['won'][1]} of {counts['won'][0]} in won ones")
    for game, turn, most, chosen in parted:
        print(f"  {game} turn {turn}: most visited {most['move']} ({most['visits']}, {most['winrate']:.3f}), "
              f"lcb {chosen['move']} ({chosen['visits']}, {chosen['winrate']:.3f})")


if __name__ == "__main__":
    main()
