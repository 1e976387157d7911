#!/usr/bin/env python3
"""Did go-train know where its match games stood? Its judgement against GnuGo's.

Usage: scripts/misjudged.py MATCH_DIR [--turns 100,150,200] [--go-train BIN]
                            [--gnugo CMD] [--margin 10]

MATCH_DIR is a folder `go-train eval --match A B --out MATCH_DIR` wrote, A
being go-train. At each of the given turns of each game it asks, for the
side A played:
  - go-train's value net (`go-train analysis`, one visit: the root's own
    value, with the shipped nets unless GO_TRAIN_NETS says otherwise),
  - go-train's random-playout score lead (the same query's scoreLead),
  - GnuGo's `estimate_score` (its own life-and-death reading),
and prints them beside the game's result. The summary counts the positions
GnuGo judged lost for A by more than --margin points while the value net
gave A 60% or more: games decided by groups go-train does not see die.

Replays with sgfmill (pip install sgfmill).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    from sgfmill import sgf
except ImportError:
    sys.exit("misjudged: needs sgfmill (pip install sgfmill)")

COLUMNS = "ABCDEFGHJKLMNOPQRST"


def moves_of(path):
    game = sgf.Sgf_game.from_bytes(open(path, "rb").read())
    moves = []
    for node in game.get_main_sequence():
        colour, move = node.get_move()
        if colour is None:
            continue
        vertex = "pass" if move is None else f"{COLUMNS[move[1]]}{move[0] + 1}"
        moves.append([colour.upper(), vertex])
    return game.get_size(), game.get_komi(), moves


def positive(text):
    """An argparse type: a whole number from 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1")
    return int(text)


def analyses(binary, queries, flags=()):
    """The answers of `binary analysis FLAGS` to `queries` (JSON analysis
    queries), one per turn asked; RuntimeError naming what failed."""
    text = "".join(json.dumps(q) + "\n" for q in queries)
    command = [binary, "analysis", *flags]
    try:
        out = subprocess.run(command, input=text, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError(f"cannot run {binary} ({e}): build it, or give --go-train BIN")
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {out.stderr.strip()[-500:]}")
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    for answer in answers:
        if "error" in answer:
            raise RuntimeError(f"go-train analysis refused a query: {json.dumps(answer)}")
    return answers


def go_train_views(binary, queries):
    """{(game index, turn): (Black's win probability, Black's score lead)}."""
    views = {}
    for answer in analyses(binary, queries):
        root = answer["rootInfo"]
        views[(int(answer["id"]), answer["turnNumber"])] = (root["winrate"], root["scoreLead"])
    return views


def gnugo_leads(gnugo, path, turns):
    """{turn: Black's lead by GnuGo's estimate_score}."""
    with tempfile.TemporaryDirectory() as tmp:
        # GTP splits its arguments at spaces: a path with one was not
        # loaded, and the empty board was scored instead.
        game = os.path.join(tmp, "game.sgf")
        os.symlink(os.path.abspath(path), game)
        commands = "".join(f"loadsgf {game} {t + 1}\nestimate_score\n" for t in turns) + "quit\n"
        try:
            out = subprocess.run(gnugo.split(), input=commands, capture_output=True, text=True, timeout=1800).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"{gnugo}: {e}")
    refused = re.findall(r"^\? .*", out, re.M)
    if refused:
        raise RuntimeError(f"GnuGo on {path}: {refused[0]}")
    scores = re.findall(r"^= ([BW])\+([0-9.]+)", out, re.M)
    if len(scores) != len(turns):
        raise RuntimeError(f"GnuGo estimated {len(scores)} of {len(turns)} positions of {path}")
    return {t: (float(v) if c == "B" else -float(v)) for t, (c, v) in zip(turns, scores)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("match_dir")
    parser.add_argument("--turns", default="100,150,200")
    parser.add_argument("--go-train", default=os.path.join(os.path.dirname(__file__), "../target/release/go-train"))
    parser.add_argument("--gnugo", default="/usr/games/gnugo --mode gtp --chinese-rules")
    parser.add_argument("--margin", type=float, default=10.0)
    args = parser.parse_args()
    turns = [int(t) for t in args.turns.split(",")]
    jsonl = os.path.join(args.match_dir, "games.jsonl")
    try:
        games = [json.loads(line) for line in open(jsonl)]
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"misjudged: {jsonl}: {e}")
    games = sorted((g for g in games if g.get("file")), key=lambda g: g["index"])
    # `file` is as the match was given its --out, from where it ran: the
    # game lies in the match's folder, whatever the folder is called now.
    for g in games:
        g["file"] = os.path.join(args.match_dir, os.path.basename(g["file"]))

    queries, played = [], {}
    for g in games:
        try:
            size, komi, moves = moves_of(g["file"])
        except (OSError, ValueError) as e:
            print(f"game {g['index']}: {g['file']}: skipped ({e})", file=sys.stderr)
            played[g["index"]] = []
            continue
        here = [t for t in turns if t < len(moves)]
        played[g["index"]] = here
        if here:
            queries.append({"id": str(g["index"]), "moves": moves, "rules": "chinese", "komi": komi,
                            "boardXSize": size, "boardYSize": size, "analyzeTurns": here, "maxVisits": 1})
    try:
        views = go_train_views(args.go_train, queries)
    except RuntimeError as e:
        sys.exit(f"misjudged: {e}")

    misjudged = counted = 0
    print("game  A   turn  value(A)  playout lead(A)  GnuGo lead(A)  result")
    for g in games:
        if not played[g["index"]]:
            continue
        sign = 1 if g["a_black"] else -1
        try:
            leads = gnugo_leads(args.gnugo, g["file"], played[g["index"]])
        except RuntimeError as e:
            sys.exit(f"misjudged: {e}")
        for t in played[g["index"]]:
            black_win, black_lead = views[(g["index"], t)]
            value = black_win if sign == 1 else 1 - black_win
            ours, theirs = sign * black_lead, sign * leads[t]
            flag = value >= 0.6 and theirs < -args.margin
            misjudged += flag
            counted += 1
            print(f"{g['index']:4}  {'B' if sign == 1 else 'W'}  {t:5}  {value:8.2f}  {ours:15.1f}  {theirs:13.1f}  "
                  f"{g['result']}{'  <- misjudged' if flag else ''}")
    print(f"\n{misjudged} of {counted} positions: GnuGo has A behind by more than {args.margin:g} points "
          f"while go-train's value net gives A 60% or more")
    if counted == 0:
        sys.exit("misjudged: no position was judged")


if __name__ == "__main__":
    main()
