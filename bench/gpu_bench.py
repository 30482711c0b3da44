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
Each case ends with torch.cuda.synchronize(); medians of --reps.

stall: a training state of about G GiB (a stack of Linear layers with Adam's
moments) on cuda:0; one save every few steps. A save's stall is the time
until the call returns plus what it adds to the next training step (that
step's time minus the median step time without saves):
  - rckpt.save_async (target: at or below DCP's);
  - torch.distributed.checkpoint.async_save with its default stager, and
    with asynchronous pinned staging where this torch has it.

Rows go to --table (markdown, appended as each finishes) and --json.
--smoke runs every case on the CPU with a few MiB, to check the script itself
where there is no GPU (the rows then mean nothing).

    python bench/gpu_bench.py load --mib 1024 --table results.md
    python bench/gpu_bench.py stall --gib 1 --table results.md
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


def load_cases(args):
    device = torch.device("cpu" if args.smoke else "cuda:0")
    nbytes = (4 if args.smoke else args.mib) << 20
    reps = 1 if args.smoke else args.reps
    os.makedirs(args.dir, exist_ok=True)
    state = smooth_state(nbytes)
    total = sum(t.numel() * t.element_size() for t in state.values())
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
    for p in paths.values():  # into the page cache
        if os.path.exists(p):
            with open(p, "rb") as f:
                while f.read(64 << 20):
                    pass
    where = f"{device}" if args.smoke else f"cuda:0 ({torch.cuda.get_device_name(0)})"
    rep = Table(args.table, args.json,
                 f"load {total >> 20} MiB onto {where}, page cache warm, median of {reps}",
                 ["case", "seconds", "GiB/s", "vs pinned memcpy", "note"])

    def rate(s):
        return total / s / (1 << 30)

    # The limit: the same bytes from pinned host memory in one async copy.
    host = torch.empty(total, dtype=torch.uint8, pin_memory=not args.smoke)
    host.fill_(1)
    dev = torch.empty(total, dtype=torch.uint8, device=device)
    limit, _ = timed(lambda: dev.copy_(host, non_blocking=True), device, reps)
    rep.row(case="pinned cudaMemcpyAsync (the limit)", seconds=f"{limit:.3f}",
            **{"GiB/s": f"{rate(limit):.2f}", "vs pinned memcpy": "1.00"})
    del host, dev

    results = {}

    def case(name, fn, note=""):
        try:
            s, out = timed(fn, device, reps)
        except Exception as e:  # a peer this torch lacks: the row says why
            rep.row(case=name, note=f"skipped: {type(e).__name__}: {str(e)[:120]}")
            return
        del out
        results[name] = s
        rep.row(case=name, seconds=f"{s:.3f}", note=note,
                **{"GiB/s": f"{rate(s):.2f}", "vs pinned memcpy": f"{limit / s:.2f}"})

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


def stall_cases(args):
    device = torch.device("cpu" if args.smoke else "cuda:0")
    gib = 0.01 if args.smoke else args.gib
    saves = 2 if args.smoke else args.saves
    every = 3
    model, opt, step = build_training(gib, device, args.smoke)
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values()) * 3
    os.makedirs(args.dir, exist_ok=True)
    where = f"{device}" if args.smoke else f"cuda:0 ({torch.cuda.get_device_name(0)})"
    rep = Table(args.table, args.json,
                 f"save stall of a {nbytes / (1 << 30):.2f} GiB training state (weights + Adam) on "
                 f"{where}, a save every {every} steps, medians over {saves} saves",
                 ["method", "call returns (ms)", "next step adds (ms)", "stall (ms)",
                  "vs DCP default", "note"])
    base_times = []
    for _ in range(5):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        base_times.append(time.perf_counter() - t0)
    base = statistics.median(base_times)

    def measure(name, save, finish, note=""):
        calls, adds = [], []
        pending = None
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
        # The first save allocates its buffers: from the second on.
        call = statistics.median(calls[1:] or calls)
        add = statistics.median(adds[1:] or adds)
        return name, call, add, note

    def state():
        return {"model": model.state_dict(), "optimizer": opt.state_dict()}

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
        try:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
            options = StagingOptions(use_pinned_memory=not args.smoke, use_shared_memory=False,
                                     use_async_staging=True, use_non_blocking_copy=not args.smoke)
            stager = DefaultStager(options)

            pinned_path = os.path.join(args.dir, "dcp-pinned")

            def pinned_save(i):
                return dcp.async_save(state(), checkpoint_id=pinned_path, async_stager=stager)

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
    dcp_default = next((m for m in measured if m and m[0].startswith("DCP async_save (default")),
                       None)
    for m in measured:
        if m is None:
            continue
        name, call, add, note = m
        stall = call + add
        vs = f"{stall / (dcp_default[1] + dcp_default[2]):.2f}" if dcp_default else ""
        rep.row(method=name, note=note, **{"call returns (ms)": f"{call * 1e3:.1f}",
                                           "next step adds (ms)": f"{add * 1e3:.1f}",
                                           "stall (ms)": f"{stall * 1e3:.1f}",
                                           "vs DCP default": vs})
    ours = measured[0]
    if ours and dcp_default:
        ratio = (ours[1] + ours[2]) / (dcp_default[1] + dcp_default[2])
        rep.row(method="verdict", note=f"rckpt.save_async stall {ratio:.2f}x DCP async_save's "
                                       f"({'met' if ratio <= 1.0 else 'MISSED'}: target <= 1)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("load", "stall"):
        p = sub.add_parser(name)
        p.add_argument("--table", help="append the rows to this markdown file")
        p.add_argument("--json", help="write the rows to this JSON file")
        p.add_argument("--dir", default=None, help="where the files go (default: a temporary dir)")
        p.add_argument("--smoke", action="store_true", help="a few MiB on the CPU: checks the script")
        if name == "load":
            p.add_argument("--mib", type=int, default=1024)
            p.add_argument("--reps", type=int, default=3)
        else:
            p.add_argument("--gib", type=float, default=1.0)
            p.add_argument("--saves", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        print("gpu_bench: torch sees no CUDA device (use --smoke to check the script)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if args.dir is None:
            args.dir = tmp
        try:
            (load_cases if args.what == "load" else stall_cases)(args)
        finally:
            import torch.distributed as dist  # stall_cases' group for DCP, if it made one
            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
