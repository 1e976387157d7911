#!/usr/bin/env python3
"""Final positions of SGF games as replayed by sgfmill, the second reference
for go-train's SGF reading and board replay.

Prints one JSON object per game, in the form of `go-train show --json`:
{"file", "game", "moves", "black", "white", "error"}. A game stops before a
move onto an occupied point (sgfmill raises there), as go-train's does.

Usage: python3 scripts/sgfmill_positions.py FILE...   (pip install sgfmill)
"""
import json
import sys

from sgfmill import boards, sgf

COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"


def gtp(row, col):
    return f"{COLUMNS[col]}{row + 1}"


def position(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        game = sgf.Sgf_game.from_bytes(data)
        board = boards.Board(game.get_size())
        nodes = game.get_main_sequence()
    except (ValueError, KeyError) as e:
        return {"file": path, "game": 0, "error": f"sgfmill: {e}"}
    # Node by node, setup (AB/AW/AE, in any node) before the move.
    error, applied = None, 0
    for node in nodes:
        black, white, empty = node.get_setup_stones()
        for colour, points in (("b", black), ("w", white), (None, empty)):
            for row, col in points:
                board.board[row][col] = colour
        try:
            colour, point = node.get_move()
        except ValueError as e:
            error = f"sgfmill: move {applied + 1}: {e}"
            break
        if colour is None:
            continue
        if point is not None:
            try:
                board.play(point[0], point[1], colour)
            except ValueError:
                error = f"move {applied + 1}: point is occupied"
                break
        applied += 1
    stones = {"b": [], "w": []}
    for colour, (row, col) in board.list_occupied_points():
        stones[colour].append(gtp(row, col))
    return {"file": path, "game": 0, "moves": applied, "black": sorted(stones["b"]),
            "white": sorted(stones["w"]), "error": error}


for path in sys.argv[1:]:
    print(json.dumps(position(path)))
