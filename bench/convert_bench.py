#!/usr/bin/env python3
"""Conversion rows of the throughput suite (docs/PERFORMANCE.md, "Conversion").

Times `rckpt convert` between .pt and .rckpt against what a user would do
instead in one Python process, on the same files:

    .pt -> .rckpt     rckpt convert IN.pt OUT.rckpt   vs  rckpt.save(OUT, torch.load(IN))
    .rckpt -> .pt     rckpt convert IN.rckpt OUT.pt   vs  torch.save(rckpt.load(IN).to_dict(), OUT)

The state is a model of nn.Linear(1024, 1024) layers of the given size,
saved as {"model": state_dict} by torch.save and by rckpt.save. Every case
runs in a fresh process; the clock of a Python case starts once the
interpreter has imported torch and rckpt, that of a CLI case when the
process is started (its start is inside the time). Both write OUT to a new
file (removed before each run); rckpt's writers fsync it before renaming it
into place (atomic), torch.save does not sync at all. The input file's pages
are either in the page cache ("warm": read once before the run) or evicted
from it before each run ("cold": posix_fadvise(DONTNEED) after fsync, which
drops that file's pages only). Cases run interleaved (rep 1 of each, rep 2
of each, ...); reports the median of --reps runs and, per direction, the
ratio peer time / convert time (>= 1: convert is at least as fast).

    build/pyenv/bin/python bench/convert_bench.py --cli build/tools/rckpt \\
        --pythonpath build/python --sizes 256M,1G --reps 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_bench import MALLOC, build_model, parse_size  # noqa: E402

CASES = {
    # case: (input extension, output extension)
    "rckpt convert pt->rckpt": ("pt", "rckpt"),
    "torch.load+rckpt.save": ("pt", "rckpt"),
    "rckpt convert rckpt->pt": ("rckpt", "pt"),
    "rckpt.load+torch.save": ("rckpt", "pt"),
}


def child(case, src, dst):
    """One Python case, once; prints its seconds."""
    import torch
    import rckpt
    t0 = time.perf_counter()
    if case == "torch.load+rckpt.save":
        rckpt.save(dst, torch.load(src))
    elif case == "rckpt.load+torch.save":
        torch.save(rckpt.load(src).to_dict(), dst)
    else:
        raise SystemExit(f"unknown case {case}")
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def evict(path):
    """Drops `path`'s pages from the page cache (written back first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path):
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def run_once(args, case, src, dst, cache):
    if os.path.exists(dst):
        os.remove(dst)
    evict(src) if cache == "cold" else warm(src)
    env = dict(os.environ, GLIBC_TUNABLES=MALLOC)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    if case.startswith("rckpt convert"):
        t0 = time.perf_counter()
        subprocess.run([args.cli, "convert", src, dst], env=env, check=True,
                       capture_output=True)
        return time.perf_counter() - t0
    out = subprocess.run([sys.executable, __file__, "--child", case, "--src", src, "--dst", dst],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cli", help="the rckpt CLI")
    p.add_argument("--pythonpath", help="where the rckpt package is (e.g. build/python)")
    p.add_argument("--workdir", default="/tmp/rckpt-convert-bench")
    p.add_argument("--sizes", default="256M,1G")
    p.add_argument("--cache", default="warm,cold", help="page cache states of the input")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--child")
    p.add_argument("--src")
    p.add_argument("--dst")
    args = p.parse_args()
    if args.child:
        return child(args.child, args.src, args.dst)
    if not args.cli:
        p.error("--cli is required")

    if args.pythonpath:
        sys.path.insert(0, args.pythonpath)
    import torch
    import rckpt
    os.makedirs(args.workdir, exist_ok=True)
    results = []
    for size in args.sizes.split(","):
        nbytes = parse_size(size)
        src = {ext: os.path.join(args.workdir, f"in-{nbytes}.{ext}") for ext in ("pt", "rckpt")}
        state = {"model": build_model(("bytes", nbytes), fill=True).state_dict()}
        torch.save(state, src["pt"])
        rckpt.save(src["rckpt"], state)
        del state
        mib = os.path.getsize(src["pt"]) / 2**20
        for cache in args.cache.split(","):
            times = {c: [] for c in CASES}
            for rep in range(args.warmup + args.reps):
                for case, (i, o) in CASES.items():
                    dst = os.path.join(args.workdir, f"out-{nbytes}.{o}")
                    t = run_once(args, case, src[i], dst, cache)
                    if rep >= args.warmup:
                        times[case].append(t)
            med = {c: statistics.median(v) for c, v in times.items()}
            print(f"\n== {mib:.0f} MiB, input {cache} in the page cache "
                  f"(median of {args.reps}; load average {os.getloadavg()[0]:.1f})")
            for case, s in med.items():
                print(f"  {case:28s} {s * 1e3:9.1f} ms  {mib / s:8.1f} MiB/s")
            ratios = {
                "pt->rckpt: torch.load+rckpt.save / convert":
                    med["torch.load+rckpt.save"] / med["rckpt convert pt->rckpt"],
                "rckpt->pt: rckpt.load+torch.save / convert":
                    med["rckpt.load+torch.save"] / med["rckpt convert rckpt->pt"],
            }
            for k, v in ratios.items():
                print(f"  {k:50s} {v:.2f} ({'met' if v >= 1 else 'missed'})")
            results.append({"mib": mib, "cache": cache, "seconds": med, "ratios": ratios})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema_version": 1, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
