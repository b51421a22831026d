#!/usr/bin/env python3
"""Merges the tables of two `scripts/bench-compare.sh` outputs (two sittings) into one,
each cell `first / second`, for BENCHMARKS.md's current table.

Usage: scripts/bench-two-sittings.py FIRST.md SECOND.md

Rows are matched by position: both outputs come from the same script, so they hold the
same rows in the same order (a row whose figure differs is an error). Prints the load
average lines of both, then the merged table.
"""
import sys


def table(path):
    """(load line, rows as lists of cells) of one bench-compare output."""
    load, rows = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("load average"):
                load = line
            elif line.startswith("| ") and not line.startswith("| figure") and not line.startswith("|---"):
                cells = line.rstrip().strip("|").split("|")
                # The figure keeps its indent (a row under the one above it).
                rows.append([cells[0][1:].rstrip()] + [c.strip() for c in cells[1:]])
    if load is None or not rows:
        sys.exit(f"{path}: not a bench-compare.sh output (no load line or no table)")
    return load, rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    (la, a), (lb, b) = table(sys.argv[1]), table(sys.argv[2])
    if len(a) != len(b):
        sys.exit(f"the two tables have {len(a)} and {len(b)} rows")
    print(f"first sitting, {la}  \nsecond sitting, {lb}\n")
    print("| figure | ust (ns, median) | reference | ref (ns) | ratio | target |")
    print("|---|---|---|---|---|---|")
    for ra, rb in zip(a, b):
        if ra[0] != rb[0] or ra[2] != rb[2]:
            sys.exit(f"rows differ: {ra[0]!r} against {rb[0]!r}")
        both = lambda i: ra[i] if ra[i] == rb[i] == "–" else f"{ra[i]} / {rb[i]}"
        print(f"| {ra[0]} | {both(1)} | {ra[2]} | {both(3)} | {both(4)} | {ra[5]} |")


if __name__ == "__main__":
    main()
