#!/usr/bin/env python3
"""Where a match's games were lost: the big captures, and whether one move
could have saved the string.

Usage: scripts/big-captures.py MATCH_DIR [--min-stones N]

MATCH_DIR is a folder `go-train eval --match A B --out MATCH_DIR` wrote
(games.jsonl and the SGF files). For each capture of at least N stones
(default 6) made by either player, it looks at the position the loser of
the string had on its turn before the capture: was the string already in
atari then, and would extending it from atari have left it two or more
liberties (saved it, for now)? Then it prints the totals per player.

Replays with sgfmill (pip install sgfmill), the project's second reference
for SGF and rules, so the figures do not depend on go-train's own board.
"""
import argparse
import json
import os
import sys

try:
    from sgfmill import boards, sgf
except ImportError:
    sys.exit("big-captures: needs sgfmill (pip install sgfmill)")


def string_and_liberties(board, point):
    colour = board.get(*point)
    stones, liberties, todo = {point}, set(), [point]
    while todo:
        r, c = todo.pop()
        for n in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= n[0] < board.side and 0 <= n[1] < board.side:
                v = board.get(*n)
                if v is None:
                    liberties.add(n)
                elif v == colour and n not in stones:
                    stones.add(n)
                    todo.append(n)
    return stones, liberties


def stones_of(board, colour):
    return {(r, c) for r in range(board.side) for c in range(board.side) if board.get(r, c) == colour}


def review(path, min_stones):
    """(capturer, stones, verdict) for every big capture of the game."""
    game = sgf.Sgf_game.from_bytes(open(path, "rb").read())
    board = boards.Board(game.get_size())
    before_own_turn = {"b": None, "w": None}
    found = []
    for node in game.get_main_sequence():
        colour, move = node.get_move()
        if colour is None:
            continue
        before_own_turn[colour] = board.copy()
        if move is None:
            continue
        victim = "w" if colour == "b" else "b"
        had = stones_of(board, victim)
        board.play(move[0], move[1], colour)
        lost = had - stones_of(board, victim)
        if len(lost) < min_stones:
            continue
        earlier = before_own_turn[victim]
        stone = next(iter(lost))
        if earlier is None or earlier.get(*stone) != victim:
            found.append((colour, len(lost), "not on the board at its turn"))
            continue
        _, liberties = string_and_liberties(earlier, stone)
        if len(liberties) != 1:
            found.append((colour, len(lost), f"{len(liberties)} liberties at its turn"))
            continue
        (r, c), = liberties
        trial = earlier.copy()
        try:
            trial.play(r, c, victim)
        except ValueError:
            found.append((colour, len(lost), "in atari, no extension"))
            continue
        # sgfmill allows self-capture: an extension into the string's own
        # last eye leaves the point empty, and saves nothing.
        if trial.get(r, c) != victim:
            found.append((colour, len(lost), "in atari, extension is suicide"))
            continue
        _, after = string_and_liberties(trial, (r, c))
        verdict = "in atari, extension saves it" if len(after) >= 2 else "in atari, extension does not save it"
        found.append((colour, len(lost), verdict))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("match_dir")
    parser.add_argument("--min-stones", type=int, default=6)
    args = parser.parse_args()
    jsonl = os.path.join(args.match_dir, "games.jsonl")
    try:
        games = [json.loads(line) for line in open(jsonl)]
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"big-captures: {jsonl}: {e}")
    totals, skipped = {}, 0
    for g in games:
        if not g.get("file"):
            continue
        a_colour = "b" if g["a_black"] else "w"
        # The game lies in the match's folder, wherever the match ran.
        sgf = os.path.join(args.match_dir, os.path.basename(g["file"]))
        try:
            found = review(sgf, args.min_stones)
        except (OSError, ValueError) as e:
            print(f"game {g['index']}: {sgf}: skipped ({e})", file=sys.stderr)
            skipped += 1
            continue
        for capturer, stones, verdict in found:
            who = "A" if capturer == a_colour else "B"
            print(f"game {g['index']} ({g['result']}): {who} took {stones} stones; {verdict}")
            key = (who, verdict)
            totals[key] = totals.get(key, 0) + 1
    print("\ncaptures of", args.min_stones, "or more stones, by capturer and what the loser had:")
    for (who, verdict), n in sorted(totals.items()):
        print(f"  {who}: {n:3}  {verdict}")
    if skipped and skipped == sum(1 for g in games if g.get("file")):
        sys.exit(f"big-captures: none of the {skipped} games could be read (above)")


if __name__ == "__main__":
    main()
