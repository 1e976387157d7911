#!/usr/bin/env python3
"""Validation curves of training runs against samples seen, from their
metrics.jsonl: what more training time buys.

    scripts/plot-curves.py OUT.png LABEL=CHECKPOINT_DIR [LABEL=DIR ...]

Move nets plot top-1 accuracy (and top-5, dashed); value nets plot the
validation MSE with the 0.25 of always answering 1/2. Needs matplotlib
(pip install matplotlib).
"""
import json
import sys
from pathlib import Path

try:
    import matplotlib
except ImportError:
    sys.exit("plot-curves: needs matplotlib (pip install matplotlib)")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def runs(args):
    for arg in args:
        label, eq, folder = arg.partition("=")
        if not eq or not folder:
            sys.exit(f"plot-curves: {arg}: give LABEL=CHECKPOINT_DIR")
        path = Path(folder) / "metrics.jsonl"
        try:
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"plot-curves: {path}: {e}")
        if not rows:
            sys.exit(f"{path}: no epochs yet")
        # train-rl's metrics are iterations with win rates, plotted by the
        # run itself (metrics.png): not curves of a supervised run.
        if "validation" not in rows[0]:
            sys.exit(f"plot-curves: {path}: not the metrics of train-policy, train-playout or train-value")
        yield label, rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    value = False
    for label, rows in runs(sys.argv[2:]):
        # Samples seen: steps times the batch, from the positions of each epoch.
        seen, total = [], 0
        for r in rows:
            total += r["train"]["positions"]
            seen.append(total / 1e6)
        v = [r["validation"] for r in rows]
        if "top1" in v[0]:
            line, = ax.plot(seen, [100 * x["top1"] for x in v], marker="o", ms=3, label=f"{label} top-1")
            ax.plot(seen, [100 * x["top5"] for x in v], ls="--", color=line.get_color(), label=f"{label} top-5")
        else:
            value = True
            ax.plot(seen, [x["loss"] for x in v], marker="o", ms=3, label=f"{label} MSE")
    if value:
        ax.axhline(0.25, color="grey", lw=0.8, ls=":", label="constant 1/2")
        ax.set_ylabel("validation MSE")
    else:
        ax.set_ylabel("validation accuracy (%)")
    ax.set_xlabel("training samples seen (millions)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(out)
    print(out)


if __name__ == "__main__":
    main()
