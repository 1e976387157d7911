#!/usr/bin/env python3
"""Where a GPU training step's time goes, kernel by kernel, from Nsight
Compute's CSV of `gpu__time_duration.sum` (each kernel timed alone, so the
sum is GPU work without the gaps between launches).

    ncu --profile-from-start off --metrics gpu__time_duration.sum -o /tmp/p \\
        go-train bench train --device cuda --net policy --batch 1024 --steps 5
    ncu --import /tmp/p.ncu-rep --csv --page raw --print-units base > /tmp/p.csv
    python3 scripts/kernel-times.py /tmp/p.csv --steps 5

`go-train bench train` opens the profiler's window on its timed steps
alone (`--profile-from-start off`), so `--steps` divides the totals into a
step's. Kernels are grouped by name, templates and arguments cut off.
Reads the `raw` page (a column a metric) and the `details` page (a row a
metric) alike.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
METRIC = "gpu__time_duration.sum"


def number(text):
    return float(text.replace(",", ""))


def short(name):
    """A kernel's name without template arguments and parameters."""
    name = re.sub(r"\(.*$", "", name.strip())
    depth, out = 0, []
    for ch in name:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">" and depth > 0
    name = "".join(out).strip()
    return name.split(" ")[-1] or name


def durations(rows):
    """(kernel name, ns) for each profiled kernel launch."""
    header = next(rows, None)
    if header is None:
        return
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        sys.exit(f"kernel-times.py: no 'Kernel Name' column in {header[:8]}")
    kernel = col["Kernel Name"]
    if METRIC in col:  # the raw page: a units row, then a row a kernel
        value = col[METRIC]
        unit = "nsecond"
        for row in rows:
            if len(row) <= value:
                continue
            if not row[kernel] and row[value] in TO_NS:
                unit = row[value]
                continue
            yield row[kernel], number(row[value]) * TO_NS[unit]
    elif "Metric Name" in col:  # the details page: a row a metric
        name, value, unit = col["Metric Name"], col["Metric Value"], col["Metric Unit"]
        for row in rows:
            if len(row) > value and row[name] in (METRIC, "Duration"):
                yield row[kernel], number(row[value]) * TO_NS.get(row[unit], 1.0)
    else:
        sys.exit(f"kernel-times.py: neither a {METRIC} nor a 'Metric Name' column")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu's CSV (raw or details page)")
    ap.add_argument("--steps", type=int, default=1, help="training steps profiled (default 1)")
    ap.add_argument("--top", type=int, default=25, help="kernels listed (default 25)")
    a = ap.parse_args()
    if a.steps < 1:
        sys.exit("kernel-times.py: --steps must be at least 1")
    total, launches = defaultdict(float), defaultdict(int)
    try:
        f = open(a.csv, newline="")
    except OSError as e:
        sys.exit(f"kernel-times.py: {e}")
    with f:
        # ncu prints its own lines (==PROF==, ==WARNING==) before the CSV.
        lines = (line for line in f if line.startswith('"'))
        for name, ns in durations(csv.reader(lines)):
            total[short(name)] += ns
            launches[short(name)] += 1
    if not total:
        sys.exit(f"kernel-times.py: no kernel times in {a.csv}")
    all_ns = sum(total.values())
    print(f"{sum(launches.values()) / a.steps:.0f} kernels and {all_ns / a.steps / 1e6:.3f} ms of GPU work a step "
          f"({a.steps} steps)")
    print(f"{'ms/step':>8} {'share':>6} {'launches/step':>13}  kernel")
    for name, ns in sorted(total.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{ns / a.steps / 1e6:8.3f} {ns / all_ns:6.1%} {launches[name] / a.steps:13.1f}  {name}")


if __name__ == "__main__":
    main()
