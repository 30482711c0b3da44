#!/usr/bin/env python3
"""GPU rows of the throughput suite (docs/PERFORMANCE.md, "GPU"); the GPU proof
(tests/gpu/proof.sh) runs them on the GPU test machine.

load: restoring N MiB of float32 tensors onto cuda:0 from files in the page
cache, each against the hardware's limit in the same run, a pinned
cudaMemcpyAsync of the same bytes (torch: a pinned host tensor copied with
non_blocking=True):
  - rckpt.load, raw chunks (the default codec): target >= 0.8 of the limit;
  - rckpt.load, zstd + byte shuffle, un-shuffled by the kernel and, for the
    comparison, on the host (device_unshuffle=False);
  - torch.load(map_location="cuda:0") and safetensors' load_file(device=
    "cuda:0") of the same state: rckpt must be faster than both.
Each case ends with torch.cuda.synchronize(); medians of --reps. Use 2048 MiB
or more: below that a load lasts milliseconds and fixed per-call costs, not
the pipeline, decide the ratio.

sharded: the same kind of state saved as a sharded file (format 1.1, by
rckpt.distributed.save), restored onto cuda:0 by rckpt.load (which assembles
its blocks) and by rckpt.distributed.load in one process, beside a plain
load of the same bytes and the pinned-memcpy limit: the multi-GPU restart's
path.

Every rckpt row also says what the device staging did: the leases served
with unpinned memory (rckpt.device_pool_stats()["unpinned_leases"], over the
case's calls) and the bytes the device un-shuffled (the last call's stats),
so a pageable or host fallback shows as itself, not as a slow pipeline.

stall: a training state of about G GiB (weights plus Adam's two moments, a
stack of Linear layers) on cuda:0; one save every few steps. A save's stall
is the time until the call returns plus what it adds to the next training
step (that step's time minus the median step time without saves), the
first save (which sets up its memory) apart from the later ones (medians):
  - a device-to-host copy of the whole state into pinned memory (the floor);
  - rckpt.save_async (target: at or below DCP's);
  - torch.distributed.checkpoint.async_save with its default stager, and
    (--peers all) with asynchronous pinned staging where this torch has it.

Rows go to --table (markdown, appended as each finishes) and --json
(rewritten at each row: a run cut short keeps the rows it made).
--smoke runs every case on the CPU with a few MiB, to check the script itself
where there is no GPU (the rows then mean nothing).

    python bench/gpu_bench.py load --mib 2048 --table results.md
    python bench/gpu_bench.py sharded --mib 2048 --table results.md
    python bench/gpu_bench.py stall --state-gib 4 --table results.md
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

import rckpt
from bench_table import Table


def remove(path):
    """Deletes a checkpoint (a file or a folder) as soon as its rows are written: the GPU
    test machine's disk is shared with its image."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, reps):
    """Median seconds of `reps` calls of fn, each ended by a synchronize; the
    result of the last call."""
    times, out = [], None
    for _ in range(reps):
        out = None
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def staging_counters():
    """What the device staging has done so far in this process, as counters a case
    subtracts: {"unpinned_leases": N}. Read from rckpt.device_pool_stats(); every counter
    the staging service reports that a row should show is added here."""
    stats = rckpt.device_pool_stats()
    return {"unpinned_leases": int(stats.get("unpinned_leases", 0))}


def staging_columns(before, out):
    """The staging columns of a row: unpinned leases since `before`, and the bytes the
    device un-shuffled in `out`'s load (a Checkpoint; a RankLoad; anything else: "")."""
    after = staging_counters()
    stats = getattr(out, "stats", None) or {}
    unshuffled = stats.get("device_unshuffled_bytes", "") if isinstance(stats, dict) else ""
    return {"unpinned leases": after["unpinned_leases"] - before["unpinned_leases"],
            "device-unshuffled": unshuffled}


def warm_page_cache(paths):
    for p in paths:
        if os.path.isdir(p):
            warm_page_cache([os.path.join(p, n) for n in os.listdir(p)])
        elif os.path.exists(p):
            with open(p, "rb") as f:
                while f.read(64 << 20):
                    pass


def copy_limit(total, device, reps, smoke):
    """Seconds of the same bytes in one pinned host-to-device cudaMemcpyAsync."""
    host = torch.empty(total, dtype=torch.uint8, pin_memory=not smoke)
    host.fill_(1)
    dev = torch.empty(total, dtype=torch.uint8, device=device)
    limit, _ = timed(lambda: dev.copy_(host, non_blocking=True), device, reps)
    del host, dev
    return limit


LOAD_COLUMNS = ["case", "seconds", "GiB/s", "vs pinned memcpy", "unpinned leases",
                "device-unshuffled", "note"]


class LoadRows:
    """The rows of a table of loads of `total` bytes onto `device`: the pinned-memcpy limit
    first, then each case's median against it; `results` holds each case's seconds."""

    def __init__(self, args, device, total, reps, title):
        self.device, self.total, self.reps = device, total, reps
        self.rep = Table(args.table, args.json, title, LOAD_COLUMNS)
        self.limit = copy_limit(total, device, reps, args.smoke)
        self.results = {}
        self.rep.row(case="pinned cudaMemcpyAsync (the limit)", seconds=f"{self.limit:.3f}",
                     **{"GiB/s": f"{self.rate(self.limit):.2f}", "vs pinned memcpy": "1.00"})

    def rate(self, seconds):
        return self.total / seconds / (1 << 30)

    def case(self, name, fn, note=""):
        before = staging_counters()
        try:
            s, out = timed(fn, self.device, self.reps)
        except Exception as e:  # a peer this torch lacks: the row says why
            self.rep.row(case=name, note=f"skipped: {type(e).__name__}: {str(e)[:120]}")
            return
        staging = staging_columns(before, out) if name.startswith("rckpt") else {}
        del out
        self.results[name] = s
        self.rep.row(case=name, seconds=f"{s:.3f}", note=note,
                     **{"GiB/s": f"{self.rate(s):.2f}", "vs pinned memcpy": f"{self.limit / s:.2f}"},
                     **staging)


def smooth_state(nbytes, parts=16):
    """Float tensors that compress as trained weights do (zstd + shuffle
    gets them smaller), on the CPU."""
    per = max(1, nbytes // 4 // parts)
    g = torch.Generator().manual_seed(0)
    state = {}
    for i in range(parts):
        base = torch.linspace(-1, 1, per) * (i + 1)
        state[f"layer{i}.weight"] = (base + torch.randn(per, generator=g) * 1e-3).half().float()
    return state


def load_setup(args):
    """cuda:0 (the CPU with --smoke), the repetitions, a state of --mib MiB, its bytes."""
    device = torch.device("cpu" if args.smoke else "cuda:0")
    nbytes = (4 if args.smoke else args.mib) << 20
    os.makedirs(args.dir, exist_ok=True)
    state = smooth_state(nbytes)
    total = sum(t.numel() * t.element_size() for t in state.values())
    return device, (1 if args.smoke else args.reps), state, total


def load_cases(args):
    device, reps, state, total = load_setup(args)
    paths = {"raw": os.path.join(args.dir, "raw.rckpt"), "zstd": os.path.join(args.dir, "z.rckpt"),
             "pt": os.path.join(args.dir, "s.pt"), "st": os.path.join(args.dir, "s.safetensors")}
    rckpt.save(paths["raw"], {"model": state})
    rckpt.save(paths["zstd"], {"model": state}, codec="zstd")
    torch.save(state, paths["pt"])
    try:
        import safetensors.torch as st
        st.save_file(state, paths["st"])
    except ImportError:
        st = None
    warm_page_cache(paths.values())
    where = f"{device}" if args.smoke else f"cuda:0 ({torch.cuda.get_device_name(0)})"
    rows = LoadRows(args, device, total, reps,
                    f"load {total >> 20} MiB onto {where}, page cache warm, median of {reps}")
    rep, case, results, limit = rows.rep, rows.case, rows.results, rows.limit

    placement = {"map_location": str(device)}
    case("rckpt.load, raw chunks", lambda: rckpt.load(paths["raw"], **placement),
         "target >= 0.8 of the limit")
    remove(paths["raw"])
    case("rckpt.load, zstd + shuffle, kernel un-shuffle",
         lambda: rckpt.load(paths["zstd"], **placement))
    case("rckpt.load, zstd + shuffle, host un-shuffle",
         lambda: rckpt.load(paths["zstd"], device_unshuffle=False, **placement))
    remove(paths["zstd"])
    case("torch.load(map_location)", lambda: torch.load(paths["pt"], map_location=device,
                                                         weights_only=True))
    remove(paths["pt"])
    if st is not None:
        case("safetensors load_file(device)", lambda: st.load_file(paths["st"], device=str(device)))
    else:
        rep.row(case="safetensors load_file(device)", note="skipped: safetensors is not installed")
    remove(paths["st"])
    ours = results.get("rckpt.load, raw chunks")
    verdicts = []
    if ours:
        verdicts.append(f"raw {limit / ours:.2f} of the limit "
                        f"({'met' if limit / ours >= 0.8 else 'MISSED'}: target 0.8)")
        for peer in ("torch.load(map_location)", "safetensors load_file(device)"):
            if peer in results:
                verdicts.append(f"{results[peer] / ours:.2f}x {peer} "
                                f"({'met' if results[peer] > ours else 'MISSED'})")
    rep.row(case="verdict", note="; ".join(verdicts))


def build_training(gib, device, smoke):
    """A stack of Linear(4096, 4096) layers holding ~gib GiB of parameters,
    Adam, and one training step."""
    width = 256 if smoke else 4096
    layers = max(1, int(gib * (1 << 30) // (width * width * 4)))
    if smoke:
        layers = 2
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(64, width, device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
    step()  # Adam's moments exist from here on
    return model, opt, step


def sharded_cases(args):
    """The sharded file's restore (format 1.1) against a plain load of the same bytes."""
    import rckpt.distributed as rd
    device, reps, state, total = load_setup(args)
    plain = os.path.join(args.dir, "plain.rckpt")
    sharded = os.path.join(args.dir, "sharded.rckpt")
    rckpt.save(plain, {"model": state})
    # One process's blocks, one per tensor: the file holds sharded tensors as a job of any
    # size writes them, and a restore assembles them from their blocks.
    rd.save(rd.LOCAL, sharded, {"model": {
        name: rd.Shard(t, [0], t.shape) for name, t in state.items()}})
    warm_page_cache([plain, sharded])
    where = f"{device}" if args.smoke else f"cuda:0 ({torch.cuda.get_device_name(0)})"
    rows = LoadRows(args, device, total, reps,
                    f"sharded load: {total >> 20} MiB saved by rckpt.distributed.save (format 1.1) "
                    f"onto {where}, page cache warm, median of {reps}")
    placement = {"map_location": str(device)}
    names = {f"model.{name}": None for name in state}
    rows.case("rckpt.load, plain file (the reference)", lambda: rckpt.load(plain, **placement))
    rows.case("rckpt.load, sharded file", lambda: rckpt.load(sharded, **placement))
    rows.case("rckpt.distributed.load, sharded file, one process",
              lambda: rd.load(rd.LOCAL, sharded, names, **placement))
    rep, results = rows.rep, rows.results
    remove(plain)
    remove(sharded)
    ref = results.get("rckpt.load, plain file (the reference)")
    ours = results.get("rckpt.load, sharded file")
    if ref and ours:
        rep.row(case="verdict", note=f"the sharded file restores at {ref / ours:.2f}x the plain "
                                     f"file's speed ({'met' if ref / ours >= 0.8 else 'MISSED'}: "
                                     "target 0.8)")


def stall_cases(args):
    device = torch.device("cpu" if args.smoke else "cuda:0")
    # Adam keeps two moments per weight: the state is three times the weights.
    gib = 0.01 if args.smoke else args.state_gib / 3
    saves = 2 if args.smoke else args.saves
    every = 3
    model, opt, step = build_training(gib, device, args.smoke)
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values()) * 3
    os.makedirs(args.dir, exist_ok=True)
    where = f"{device}" if args.smoke else f"cuda:0 ({torch.cuda.get_device_name(0)})"
    rep = Table(args.table, args.json,
                 f"save stall of a {nbytes / (1 << 30):.2f} GiB training state (weights + Adam) on "
                 f"{where}, a save every {every} steps, {saves} saves: the first apart, the "
                 "later ones' medians",
                 ["method", "saves", "call returns (ms)", "next step adds (ms)", "stall (ms)",
                  "vs DCP default", "unpinned leases", "note"])
    base_times = []
    for _ in range(5):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        base_times.append(time.perf_counter() - t0)
    base = statistics.median(base_times)

    def state():
        return {"model": model.state_dict(), "optimizer": opt.state_dict()}

    # The floor: the state's device tensors copied into pinned host memory allocated
    # beforehand, as fast as the bus moves them.
    tensors = []

    def collect(value):
        if isinstance(value, torch.Tensor):
            if value.device == device:
                tensors.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)
    collect(state())
    pinned = [torch.empty_like(t, device="cpu", pin_memory=not args.smoke) for t in tensors]
    floor, _ = timed(lambda: [p.copy_(t, non_blocking=True) for p, t in zip(pinned, tensors)],
                     device, 3)
    del pinned
    rep.row(method="device-to-host copy into pinned memory (the floor)", saves="",
            **{"call returns (ms)": f"{floor * 1e3:.1f}", "stall (ms)": f"{floor * 1e3:.1f}"})

    def measure(name, save, finish, note=""):
        calls, adds = [], []
        pending = None
        before = staging_counters()
        try:
            for i in range(saves * every):
                if i % every == 0:
                    if pending is not None:
                        finish(pending)
                    sync(device)
                    t0 = time.perf_counter()
                    pending = save(i)
                    calls.append(time.perf_counter() - t0)
                    t1 = time.perf_counter()
                    step()
                    sync(device)
                    adds.append(max(0.0, time.perf_counter() - t1 - base))
                else:
                    step()
            finish(pending)
        except Exception as e:
            rep.row(method=name, note=f"skipped: {type(e).__name__}: {str(e)[:120]}")
            return None
        unpinned = staging_counters()["unpinned_leases"] - before["unpinned_leases"]
        return name, calls, adds, unpinned, note

    # One checkpoint per method, overwritten by each save and deleted after the method's
    # last: the disk holds at most one state's files per method at a time.
    ours_path = os.path.join(args.dir, "a.rckpt")
    measured = [measure("rckpt.save_async", lambda i: rckpt.save_async(ours_path, state()),
                        lambda fut: fut.result())]
    remove(ours_path)
    dcp = None
    try:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        if not dist.is_initialized():
            store = dist.FileStore(os.path.join(args.dir, "store"), 1)
            dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    except Exception as e:
        rep.row(method="DCP async_save", note=f"skipped: {type(e).__name__}: {e}")
    if dcp is not None and hasattr(dcp, "async_save"):
        default_path = os.path.join(args.dir, "dcp-default")

        def default_finish(fut):
            fut.result()
            remove(default_path)  # DCP writes a folder: the next save makes it anew
        measured.append(measure(
            "DCP async_save (default stager)",
            lambda i: dcp.async_save(state(), checkpoint_id=default_path), default_finish))
        remove(default_path)
        if args.peers == "all":
            try:
                from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
                options = StagingOptions(use_pinned_memory=not args.smoke,
                                         use_shared_memory=False, use_async_staging=True,
                                         use_non_blocking_copy=not args.smoke)
                stager = DefaultStager(options)
                pinned_path = os.path.join(args.dir, "dcp-pinned")

                def pinned_save(i):
                    return dcp.async_save(state(), checkpoint_id=pinned_path,
                                          async_stager=stager)

                def pinned_finish(resp):
                    fut = getattr(resp, "upload_completion", resp)
                    fut.result()
                    remove(pinned_path)
                measured.append(measure("DCP async_save (async pinned staging)", pinned_save,
                                        pinned_finish))
                remove(pinned_path)
            except ImportError as e:
                rep.row(method="DCP async_save (async pinned staging)",
                        note=f"skipped: this torch has no staging options ({e})")

    def later(values):
        return statistics.median(values[1:] or values)

    dcp_default = next((m for m in measured if m and m[0].startswith("DCP async_save (default")),
                       None)
    dcp_stall = later(dcp_default[1]) + later(dcp_default[2]) if dcp_default else None
    for m in measured:
        if m is None:
            continue
        name, calls, adds, unpinned, note = m
        for which, call, add in (("first", calls[0], adds[0]),
                                 (f"later {len(calls) - 1}", later(calls), later(adds))):
            stall = call + add
            vs = f"{stall / dcp_stall:.2f}" if dcp_stall else ""
            rep.row(method=name, saves=which, note=note,
                    **{"call returns (ms)": f"{call * 1e3:.1f}",
                       "next step adds (ms)": f"{add * 1e3:.1f}", "stall (ms)": f"{stall * 1e3:.1f}",
                       "vs DCP default": vs, "unpinned leases": unpinned})
    ours = measured[0]
    if ours and dcp_stall:
        ratio = (later(ours[1]) + later(ours[2])) / dcp_stall
        first = (ours[1][0] + ours[2][0]) * 1e3
        rep.row(method="verdict", note=f"rckpt.save_async's later saves stall {ratio:.2f}x DCP "
                                       f"async_save's ({'met' if ratio <= 1.0 else 'MISSED'}: "
                                       f"target <= 1); its first save stalls {first:.0f} ms, the "
                                       f"floor is {floor * 1e3:.0f} ms")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("load", "sharded", "stall"):
        p = sub.add_parser(name)
        p.add_argument("--table", help="append the rows to this markdown file")
        p.add_argument("--json", help="write the rows to this JSON file")
        p.add_argument("--dir", default=None, help="where the files go (default: a temporary dir)")
        p.add_argument("--smoke", action="store_true", help="a few MiB on the CPU: checks the script")
        if name in ("load", "sharded"):
            p.add_argument("--mib", type=int, default=2048)
            p.add_argument("--reps", type=int, default=3)
        else:
            p.add_argument("--state-gib", type=float, default=4.0,
                           help="the whole state's size: weights and Adam's two moments")
            p.add_argument("--saves", type=int, default=3)
            p.add_argument("--peers", choices=("default", "all"), default="all",
                           help="DCP's default stager only, or also its pinned async staging")
    args = parser.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        print("gpu_bench: torch sees no CUDA device (use --smoke to check the script)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if args.dir is None:
            args.dir = tmp
        try:
            {"load": load_cases, "sharded": sharded_cases, "stall": stall_cases}[args.what](args)
        finally:
            import torch.distributed as dist  # stall_cases' group for DCP, if it made one
            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
