"""Shared helpers of the peer measurements run by rckpt-bench.

Each peer script prints one flat JSON object per line:
  {"name": ..., "seconds": <median>, "bytes": <tensor bytes>}
or {"name": ..., "skipped": "<reason>"}; rckpt-bench parses these lines.
"""
import argparse
import json
import os
import statistics
import struct
import time


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--safetensors", required=True, help="the tensors, as rckpt-bench wrote them")
    p.add_argument("--workdir", required=True, help="where peer files may be written")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    return p.parse_args()


def emit(name, seconds=None, nbytes=None, skipped=None):
    if skipped is not None:
        print(json.dumps({"name": name, "skipped": skipped}), flush=True)
    else:
        print(json.dumps({"name": name, "seconds": seconds, "bytes": nbytes}), flush=True)


def median_seconds(warmup, reps, run):
    """Median wall time of `run` after `warmup` untimed calls; `run` may
    return its own seconds (to exclude setup) or None (whole call timed)."""
    times = []
    for i in range(warmup + max(reps, 1)):
        t0 = time.perf_counter()
        own = run()
        t = own if own is not None else time.perf_counter() - t0
        if i >= warmup:
            times.append(t)
    return statistics.median(times)


def read_header(path):
    """(header dict, data start offset) of a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header, 8 + n


def tensor_bytes(header):
    return sum(v["data_offsets"][1] - v["data_offsets"][0] for v in header.values())


def warm(path):
    """Reads a file once so the page cache holds it (warm-cache cases)."""
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
