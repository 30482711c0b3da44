#!/usr/bin/env python3
"""Plots how save and load cost grows with checkpoint size and tensor count,
and how throughput depends on the chunk size,
from the CSV that `rckpt-bench --sweep --csv FILE` writes.

usage: scripts/bench-plot.py bench.csv docs/bench-scaling.png
Needs matplotlib (pip install matplotlib).
"""
import csv
import sys
from collections import defaultdict


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    series = {k: defaultdict(list) for k in ("sweep-size", "sweep-tensors", "sweep-chunk")}
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] in series:
                series[row["kind"]][row["case"]].append(
                    (int(row["bytes"]), int(row["tensors"]), float(row["seconds"])))
    if not any(series.values()):
        sys.exit("no sweep rows in the CSV: run rckpt-bench with --sweep --csv FILE")

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(12, 3.6), dpi=80)
    for name, pts in sorted(series["sweep-size"].items()):
        pts.sort()
        a.plot([p[0] / 2**20 for p in pts], [p[2] for p in pts], marker="o", label=name)
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("checkpoint size (MiB), ~500 tensors")
    a.set_ylabel("seconds (median)")
    a.set_title("cost vs size")
    a.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=7)
    for name, pts in sorted(series["sweep-tensors"].items()):
        pts.sort(key=lambda p: p[1])
        b.plot([p[1] for p in pts], [p[0] / p[2] / 1e9 for p in pts], marker="o", label=name)
    b.set_xscale("log")
    b.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    b.set_xlabel("tensors in the checkpoint (~64 MiB total)")
    b.set_ylabel("GB/s")
    b.set_title("throughput vs tensor count")
    b.grid(True, which="both", alpha=0.3)
    b.legend(fontsize=7)
    # The chunk series carries the chunk size (MiB) in the tensors column.
    for name, pts in sorted(series["sweep-chunk"].items()):
        pts.sort(key=lambda p: p[1])
        c.plot([p[1] for p in pts], [p[0] / p[2] / 1e9 for p in pts], marker="o", label=name)
    c.set_xscale("log", base=2)
    c.set_xlabel("chunk size (MiB), ~265 MiB checkpoint")
    c.set_ylabel("GB/s")
    c.set_title("throughput vs chunk size")
    c.grid(True, which="both", alpha=0.3)
    c.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
