"""rckpt.load of a torch.save file against `rckpt convert` + rckpt.load of the result.

rckpt.load imports a file of another format into a private .rckpt copy and loads that copy
with the engine, so its cost is the CLI's conversion plus a load, less the work the CLI
does that a load does not need (the copy is written without fsync and read back mapped).
This measures both, and torch.load of the same file for scale, on a state of MiB-sized
tensors (a model and its Adam moments), warm page cache, median of --repeat runs:

    PYTHONPATH=build/python RCKPT_CLI=build/tools/rckpt \\
        build/pyenv/bin/python bench/load_other_formats.py --mib 256 --repeat 5

Prints one line per way, in seconds and GiB/s of tensor bytes.
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

import torch

import rckpt


def state_of(mib):
    """A model's state and its optimizer's moments, 4 MiB float32 tensors, ``mib`` MiB in all."""
    n = max(1, mib // 12)
    model = {f"layer{i}.weight": torch.randn(1024, 1024) for i in range(n)}
    moments = {i: {"exp_avg": torch.randn(1024, 1024), "exp_avg_sq": torch.rand(1024, 1024),
                   "step": torch.tensor(10.0)} for i in range(n)}
    return {"model": model, "optimizer": {"state": moments, "param_groups": [{"lr": 1e-3}]},
            "epoch": 7}


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        del result
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, default=256, help="tensor MiB in the state (default 256)")
    p.add_argument("--repeat", type=int, default=5, help="runs per way; the median is shown")
    a = p.parse_args()
    cli = os.environ.get("RCKPT_CLI", "rckpt")
    with tempfile.TemporaryDirectory(prefix="rckpt-bench-") as d:
        pt = os.path.join(d, "state.pt")
        torch.save(state_of(a.mib), pt)
        converted = os.path.join(d, "state.rckpt")
        nbytes = sum(t.numel() * t.element_size()
                     for t in rckpt.load(pt, map_location="cpu").tensors.values())

        def cli_then_load():
            subprocess.run([cli, "convert", pt, converted], check=True, capture_output=True)
            return rckpt.load(converted, map_location="cpu")

        ways = {
            "rckpt.load(state.pt)": lambda: rckpt.load(pt, map_location="cpu"),
            "rckpt convert + rckpt.load": cli_then_load,
            "rckpt.load(state.rckpt) alone": lambda: rckpt.load(converted, map_location="cpu"),
            "torch.load(state.pt)": lambda: torch.load(pt, map_location="cpu"),
        }
        print(f"{nbytes / 2**20:.0f} MiB of tensors, median of {a.repeat} runs, warm cache, "
              f"torch {torch.__version__}")
        for name, fn in ways.items():
            fn()  # warm: the page cache holds the file
            s = timed(fn, a.repeat)
            print(f"  {name:32s} {s:7.3f} s  {nbytes / 2**30 / s:6.2f} GiB/s")


if __name__ == "__main__":
    main()
