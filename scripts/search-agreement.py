#!/usr/bin/env python3
"""How often does the search play the move a strong player played, under
each of several settings?

Usage: scripts/search-agreement.py SGF_DIR --try 'SETTINGS' [--try ...]
                                   [--games 40] [--every 30] [--visits 800]
                                   [--go-train BIN]

From every n-th 19x19 even game of SGF_DIR (sorted by name, n chosen so
that --games games are taken), at turns 30, 30 + --every, ... up to 210,
it asks `go-train analysis` (the shipped search, --visits visits, with each
--try's flags added, e.g. --try '' --try '--root-expand 4') for the move it
would play, and counts the positions where that is the move played in the
game. Beside each setting's agreement it gives, for each other setting,
the positions where exactly one of the two found the played move: a
paired count, which says more than two agreements of a few hundred
positions each.

Take games the nets never trained on (the shipped nets trained on kgs-6d
and tygem-9d; pro-1941-1997 is apart). Replays with sgfmill (pip install
sgfmill), as misjudged.py does.
"""
import argparse
import importlib.util
import os
import shlex
import sys

# The replay of an SGF that misjudged.py does (sgfmill).
_spec = importlib.util.spec_from_file_location("misjudged", os.path.join(os.path.dirname(__file__), "misjudged.py"))
misjudged = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(misjudged)


def even_games(sgf_dir):
    """Paths of the 19x19 games of sgf_dir without handicap stones, sorted."""
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(sgf_dir) for f in files if f.lower().endswith(".sgf"))
    for path in paths:
        try:
            game = misjudged.sgf.Sgf_game.from_bytes(open(path, "rb").read())
        except (OSError, ValueError) as e:
            print(f"search-agreement.py: skipping {path}: {e}", file=sys.stderr)
            continue
        if game.get_size() == 19 and not game.get_root().has_property("AB"):
            yield path


def queries(paths, every, visits):
    for path in paths:
        size, komi, moves = misjudged.moves_of(path)
        turns = [t for t in range(30, 211, every) if t < len(moves) and moves[t][1] != "pass"]
        if turns:
            yield {
                "id": os.path.basename(path), "moves": moves, "rules": "chinese", "komi": komi,
                "boardXSize": size, "boardYSize": size, "analyzeTurns": turns, "maxVisits": visits,
            }


def chosen_moves(binary, flags, asked):
    """{(game, turn): the move the search would play} and {(game, turn):
    the root's child of the highest prior} under `flags`."""
    try:
        answers = misjudged.analyses(binary, asked, shlex.split(flags))
    except RuntimeError as e:
        sys.exit(f"search-agreement.py: {e}")
    chosen, likeliest = {}, {}
    for answer in answers:
        infos = answer.get("moveInfos") or []
        key = (answer["id"], answer["turnNumber"])
        for m in infos:
            if m["order"] == 0:
                chosen[key] = m["move"]
        if infos:
            likeliest[key] = max(infos, key=lambda m: m["prior"])["move"]
    return chosen, likeliest


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sgf_dir")
    parser.add_argument("--try", dest="settings", action="append", required=True,
                        help="flags of go-train analysis for one setting ('' for the shipped search)")
    for flag, default in [("--games", 40), ("--every", 30), ("--visits", 800)]:
        parser.add_argument(flag, type=misjudged.positive, default=default)
    parser.add_argument("--go-train", default="target/release/go-train")
    args = parser.parse_args()
    if not os.path.isdir(args.sgf_dir):
        sys.exit(f"search-agreement.py: {args.sgf_dir}: not a folder")
    games = list(even_games(args.sgf_dir))
    if not games:
        sys.exit(f"search-agreement.py: {args.sgf_dir}: no 19x19 even game")
    step = max(1, len(games) // args.games)
    qs = list(queries(games[::step][: args.games], args.every, args.visits))
    played = {(q["id"], t): q["moves"][t][1] for q in qs for t in q["analyzeTurns"]}
    found = []
    for flags in args.settings:
        chosen, likeliest = chosen_moves(args.go_train, flags, qs)
        if not found:
            # A visited child's prior: the policy's top move, unless the search never visited it.
            agree = sum(move == played[key] for key, move in likeliest.items())
            print(f"the root's most likely visited child: {agree} of {len(played)} ({100 * agree / len(played):.1f}%)")
        found.append({key for key, move in chosen.items() if move == played[key]})
        print(f"{flags or '(shipped)'}: {len(found[-1])} of {len(played)} positions "
              f"({100 * len(found[-1]) / len(played):.1f}%) play the move played", flush=True)
    for i, a in enumerate(args.settings):
        for j in range(i + 1, len(args.settings)):
            b = args.settings[j]
            print(f"  only {a or '(shipped)'}: {len(found[i] - found[j])}, only {b or '(shipped)'}: {len(found[j] - found[i])}")


if __name__ == "__main__":
    main()
