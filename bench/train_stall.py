"""How long does a checkpoint stop a real training loop?

A torch MLP trained with Adam on the CPU (or CUDA when present), model and
optimizer state of about --gib GiB together, checkpointed every --every steps
for --steps steps, once per way of saving, each in its own process so that
peak RSS is its own:

    none              no checkpoints: the time per step and the run time to beat
    torch.save        torch.save of the state dicts (no fsync)
    rckpt.save        rckpt.save (atomic, fsynced)
    rckpt.save_async  rckpt.save_async: snapshot, then persist in the background
    manager           rckpt.CheckpointManager(keep=2), async
    dcp.async_save    torch.distributed.checkpoint.async_save (torch >= 2.3, gloo, 1 rank)
    lightning         Lightning's AsyncCheckpointIO over TorchCheckpointIO

For each: the stall of every save (from the call until training continues,
including any wait for the previous save), the total run time against the
run without checkpoints, the persist time per save where the saver reports
it, and peak RSS above the run without checkpoints. The floor: a bare copy
of the state's bytes into memory already touched. save_async also saves 20
times in a row to show whether its memory grows.

    PYTHONPATH=build/python python bench/train_stall.py              # ~1 GiB
    PYTHONPATH=build/python python bench/train_stall.py --gib 0.125 --steps 24 --every 6

Prints a table and, with --json, writes the figures. docs/PERFORMANCE.md
("Saving without stopping training") has a run.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WAYS = ["none", "torch.save", "rckpt.save", "rckpt.save_async", "manager", "dcp.async_save",
        "lightning"]


def current_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build(gib, device):
    import torch
    torch.manual_seed(0)
    width = 2048
    # Parameters, exp_avg and exp_avg_sq: 12 bytes a parameter.
    layers = max(2, round(gib * (1 << 30) / 12 / (width * width + width)))
    model = torch.nn.Sequential(*[m for _ in range(layers)
                                  for m in (torch.nn.Linear(width, width), torch.nn.ReLU())])
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    return model, opt, width


def state_bytes(model, opt):
    import torch
    n = sum(p.numel() * p.element_size() for p in model.parameters())
    for s in opt.state.values():
        n += sum(t.numel() * t.element_size() for t in s.values() if isinstance(t, torch.Tensor))
    return n


def memcpy_floor(model, opt):
    """Best of 3 copies of every state tensor into buffers already touched, in seconds."""
    import torch
    src = [p.detach() for p in model.parameters()]
    for s in opt.state.values():
        src += [t for t in s.values() if isinstance(t, torch.Tensor)]
    dst = [torch.empty_like(t, device="cpu") for t in src]
    for d, s in zip(dst, src):
        d.copy_(s)  # touch
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for d, s in zip(dst, src):
            d.copy_(s)
        best = min(best, time.perf_counter() - t0)
    return best


class Saver:
    """One way of saving: save(step, state) returns once training may go on."""

    def __init__(self, way, directory):
        self.way, self.dir = way, directory
        self.persist = []
        if way == "manager":
            import rckpt
            self.mgr = rckpt.CheckpointManager(directory, keep=2)
        elif way == "dcp.async_save":
            import torch.distributed as dist
            import torch.distributed.checkpoint as dcp  # noqa: F401
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
            dist.init_process_group("gloo", rank=0, world_size=1)
            self.future = None
        elif way == "lightning":
            from lightning.pytorch.plugins.io import AsyncCheckpointIO, TorchCheckpointIO
            self.io = AsyncCheckpointIO(TorchCheckpointIO())
        self.future = None

    def save(self, step, state):
        import torch
        path = os.path.join(self.dir, f"step-{step}")
        if self.way == "torch.save":
            torch.save(state, path + ".pt")
        elif self.way == "rckpt.save":
            import rckpt
            rckpt.save(path + ".rckpt", state)
        elif self.way == "rckpt.save_async":
            import rckpt
            self.future = rckpt.save_async(os.path.join(self.dir, "last.rckpt"), state)
        elif self.way == "manager":
            self.future = self.mgr.save(step, state)
        elif self.way == "dcp.async_save":
            import torch.distributed.checkpoint as dcp
            if self.future is not None:
                self.future.result()  # DCP: one save at a time, the caller waits
            self.future = dcp.async_save(state, checkpoint_id=path)
        elif self.way == "lightning":
            self.io.save_checkpoint(state, path + ".ckpt")

    def persist_seconds(self):
        if self.way in ("rckpt.save_async", "manager"):
            from rckpt.async_save import _module_saver
            saver = self.mgr._saver if self.way == "manager" else _module_saver()
            return saver.stats()["persist_seconds"]
        return None

    def finish(self):
        if self.future is not None:
            self.future.result()
        if self.way == "manager":
            self.mgr.close()
        elif self.way == "lightning":
            self.io.teardown()
        elif self.way == "dcp.async_save":
            import torch.distributed as dist
            dist.destroy_process_group()


def run_one(args):
    """The child: one way of saving, figures as JSON on stdout."""
    import torch
    torch.set_num_threads(max(1, os.cpu_count()))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, opt, width = build(args.gib, device)
    x = torch.randn(args.batch, width, device=device)

    def train_step():
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    train_step()  # Adam state exists from here on
    if device == "cuda":
        torch.cuda.synchronize()
    out = {"way": args.run, "state_bytes": state_bytes(model, opt), "device": device}
    rss_before = peak_rss()
    directory = tempfile.mkdtemp(prefix="train_stall-", dir=args.dir)
    saver = Saver(args.run, directory) if args.run != "none" else None
    stalls, persists, step_times = [], [], []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        train_step()
        if device == "cuda":
            torch.cuda.synchronize()
        step_times.append(time.perf_counter() - t0)
        if saver is not None and step % args.every == 0:
            state = {"model": model.state_dict(), "optimizer": opt.state_dict(),
                     "controller": {"step": step}}
            t0 = time.perf_counter()
            saver.save(step, state)
            stalls.append(time.perf_counter() - t0)
            p = saver.persist_seconds()
            if p is not None:
                persists.append(p)
    if saver is not None:
        saver.finish()
        p = saver.persist_seconds()
        if p is not None:
            persists.append(p)
    out["total_s"] = time.perf_counter() - start
    out["step_s"] = statistics.median(step_times)
    out["stalls_s"] = stalls
    # The persist reported after save k is save k-1's (the first is of no save).
    out["persist_s"] = persists[1:] if persists else []
    out["peak_rss"] = peak_rss()
    out["peak_rss_before_saves"] = rss_before
    if args.run == "none":  # after the peak is taken: the copy's buffers are one more state
        out["memcpy_floor_s"] = memcpy_floor(model, opt)
    if args.run == "rckpt.save_async":
        # 20 saves back to back: does memory grow?
        import rckpt
        rss = []
        for i in range(20):
            state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
            rckpt.save_async(os.path.join(directory, "last.rckpt"), state).result()
            rss.append(current_rss())
        out["rss_20_saves"] = rss
        from rckpt.async_save import _module_saver
        out["snapshot_capacity"] = _module_saver().stats()["snapshot_capacity"]
    shutil.rmtree(directory, ignore_errors=True)
    print("RESULT " + json.dumps(out))


def available(way):
    try:
        if way == "dcp.async_save":
            import torch.distributed.checkpoint as dcp
            return hasattr(dcp, "async_save")
        if way == "lightning":
            import lightning.pytorch.plugins.io as lio
            return hasattr(lio, "AsyncCheckpointIO")
        if way in ("rckpt.save", "rckpt.save_async", "manager"):
            import rckpt  # noqa: F401
        return True
    except ImportError:
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=1.0, help="model + Adam state size")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--every", type=int, default=8, help="checkpoint every N steps")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--dir", default=None, help="where checkpoints go (default: a temp dir)")
    p.add_argument("--ways", default=",".join(WAYS))
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--run", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run:
        return run_one(args)

    results = {}
    for way in args.ways.split(","):
        if not available(way):
            print(f"{way:18s} skipped: not importable here", flush=True)
            continue
        cmd = [sys.executable, __file__, "--run", way, "--gib", str(args.gib), "--steps",
               str(args.steps), "--every", str(args.every), "--batch", str(args.batch)]
        if args.dir:
            cmd += ["--dir", args.dir]
        r = subprocess.run(cmd, capture_output=True, text=True)
        lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
        if r.returncode != 0 or not lines:
            print(f"{way:18s} failed: {r.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        results[way] = json.loads(lines[0][len("RESULT "):])
        print(f"{way:18s} done in {results[way]['total_s']:.1f} s", flush=True)
    report(results, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def report(results, args):
    base = results.get("none")
    if base is None:
        print("no baseline run")
        return
    gib = base["state_bytes"] / (1 << 30)
    floor = base["memcpy_floor_s"]
    print(f"\nstate {gib:.2f} GiB on {base['device']}, {args.steps} steps, a save every "
          f"{args.every}; step {base['step_s'] * 1e3:.0f} ms; memcpy floor {floor * 1e3:.0f} ms; "
          f"{os.cpu_count()} cores")
    print(f"{'way':18s} {'stall 1st':>10s} {'stall 2nd+':>11s} {'x floor':>8s} "
          f"{'persist':>8s} {'run':>8s} {'x none':>7s} {'extra RSS':>10s}")
    for way, r in results.items():
        stalls = r["stalls_s"]
        later = statistics.median(stalls[1:]) if len(stalls) > 1 else float("nan")
        first = stalls[0] if stalls else float("nan")
        persist = statistics.median(r["persist_s"]) if r["persist_s"] else float("nan")
        extra = (r["peak_rss"] - base["peak_rss"]) / r["state_bytes"]
        print(f"{way:18s} {first * 1e3:9.0f}ms {later * 1e3:10.0f}ms {later / floor:8.2f} "
              f"{persist * 1e3:7.0f}ms {r['total_s']:7.1f}s {r['total_s'] / base['total_s']:7.3f} "
              f"{extra:9.2f}x")
    a = results.get("rckpt.save_async")
    if a and "rss_20_saves" in a:
        rss = a["rss_20_saves"]
        print(f"save_async RSS over 20 saves: first {rss[0] / 2**30:.2f} GiB, last "
              f"{rss[-1] / 2**30:.2f} GiB (growth {(rss[-1] - rss[0]) / 2**20:+.0f} MiB); "
              f"snapshot buffers {a['snapshot_capacity'] / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
