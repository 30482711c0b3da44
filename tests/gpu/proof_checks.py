#!/usr/bin/env python3
"""The GPU proof's checks of rckpt's device path against torch's streams and allocator, which
only a real GPU can make (tests/gpu/proof.sh runs this; docs/PERFORMANCE.md "GPU"):

  busy stream    torch.cuda._sleep holds an unrelated stream busy for SLEEP s; a warm
                 rckpt.load and rckpt.save of a CUDA state then finish while that stream's
                 event is still pending (nothing on their path waits for the whole device:
                 no cuMemFree, cuMemFreeHost, cuCtxSynchronize).
  pool constant  N loads and N saves after the first keep rckpt.device_pool_stats()'s
                 allocation counts, streams and events as they were (the pool is reused,
                 not regrown); rckpt.release_device_pool() then gives the pinned bytes back.
  no spinning    torch's current stream held busy for 1 s, then a load that must wait for
                 it: the process's CPU time for that load stays under 100 ms more than the
                 same load's without the wait (waits sleep instead of spinning a core).
  side stream    a tensor allocated on a side stream, saved with rckpt.save_async while the
                 snapshot copy is held back, freed right after the call and its memory
                 asked for again on that stream and overwritten: the file holds the saved
                 values (rckpt records the tensor for its copy). A control row shows the
                 same free without the record corrupting a pending copy on this GPU.

Each check is a row of --table (markdown, appended) and of --json; every checkpoint goes to
--dir and is deleted as soon as its row is written. Exit 1 when a check fails. --dry-run
(no GPU) writes the rows as "not run" and exits 0, so the proof's dry run checks the script
and its rows.

    python tests/gpu/proof_checks.py --table results.md --json checks.json --dir /tmp/x
"""

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable, Optional

# bench/ of this source tree (it travels with the proof; standard library only).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
from bench_table import Table  # noqa: E402

COLUMNS = ["check", "result", "measured", "note"]
CHECKS = ["busy stream: load and save do not wait for it", "pool constant over N calls",
          "pool released", "no spinning while a load waits",
          "side stream: tensor freed right after save_async",
          "control: the same free without a record"]
LIMIT_CPU_S = 0.1  # item 2's bound on the extra CPU time of a waiting load


class Rows(Table):
    def __init__(self, table: Optional[str], json_path: Optional[str], title: str) -> None:
        super().__init__(table, json_path, title, COLUMNS)

    def row(self, check: str, result: str, measured: str = "",  # type: ignore[override]
            note: str = "") -> None:
        super().row(check=check, result=result, measured=measured, note=note)

    def failed(self) -> bool:
        return any(r["result"] == "FAIL" for r in self.rows)


def remove(*paths: str) -> None:
    for p in paths:
        if os.path.exists(p):
            os.remove(p)


class Gpu:
    """torch on cuda:0, with torch.cuda._sleep calibrated to seconds."""

    def __init__(self) -> None:
        import torch
        self.torch = torch
        self.device = torch.device("cuda", 0)
        torch.cuda.set_device(self.device)
        torch.cuda._sleep(1_000_000)  # the kernel loaded, before timing it
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        cycles = 50_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_s = cycles / (start.elapsed_time(end) / 1e3)

    def sleep(self, seconds: float) -> None:
        """Holds torch's current stream busy for about `seconds`; returns at once."""
        self.torch.cuda._sleep(int(self.cycles_per_s * seconds))

    def state(self, mib: int, value: float = 0.0) -> dict[str, Any]:
        torch = self.torch
        n = (mib << 20) // 4
        g = torch.Generator(device=self.device).manual_seed(0)
        w = torch.randn(n // 2, device=self.device, generator=g) + value
        return {"model": {"w": w, "b": torch.arange(n - n // 2, device=self.device,
                                                    dtype=torch.float32)}}


def busy_stream(gpu: Gpu, rows: Rows, rckpt: Any, d: str) -> None:
    torch = gpu.torch
    state = gpu.state(64)
    src, dst = os.path.join(d, "busy-src.rckpt"), os.path.join(d, "busy-dst.rckpt")
    rckpt.save(src, state)
    # The first calls set up what rckpt keeps (its pool, the kernel's module).
    rckpt.load(src, map_location="cuda:0")
    rckpt.save(dst, state)
    torch.cuda.synchronize()
    sleep_s = 3.0
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        gpu.sleep(sleep_s)
    busy = torch.cuda.Event()
    busy.record(other)
    t0 = time.perf_counter()
    loaded = rckpt.load(src, map_location="cuda:0")
    t_load = time.perf_counter() - t0
    rckpt.save(dst, state)
    t_both = time.perf_counter() - t0
    pending = not busy.query()
    busy.synchronize()
    same = all(torch.equal(loaded["model"][k], state["model"][k]) for k in state["model"])
    remove(src, dst)
    ok = pending and same
    rows.row(CHECKS[0], "PASS" if ok else "FAIL",
             f"load {t_load:.3f} s, load + save {t_both:.3f} s; the other stream's "
             f"{sleep_s:.0f} s event {'still pending' if pending else 'DONE'} after them",
             "" if same else "the loaded tensors differ from the saved ones")


def pool_constant(gpu: Gpu, rows: Rows, rckpt: Any, d: str, calls: int = 5) -> None:
    torch = gpu.torch
    if not hasattr(rckpt, "device_pool_stats"):
        rows.row(CHECKS[1], "FAIL", "",
                 "rckpt.device_pool_stats() is missing: this build has no device pool")
        rows.row(CHECKS[2], "FAIL", "", "rckpt.release_device_pool() is missing")
        return
    state = gpu.state(32)
    src, dst = os.path.join(d, "pool-src.rckpt"), os.path.join(d, "pool-dst.rckpt")
    rckpt.save(src, state)
    # The first load and save grow the pool to what these calls need.
    rckpt.load(src, map_location="cuda:0")
    rckpt.save(dst, state)
    torch.cuda.synchronize()
    before = dict(rckpt.device_pool_stats())
    for _ in range(calls):
        rckpt.load(src, map_location="cuda:0")
        rckpt.save(dst, state)
    torch.cuda.synchronize()
    after = dict(rckpt.device_pool_stats())
    remove(src, dst)
    # Allocation counts, streams, events and pooled bytes: what a reused pool keeps as it was.
    # Counters of use (leases, reuses, hits, calls) grow with the calls by design.
    growing = ("lease", "reuse", "hit", "call", "use")
    kept = {k: v for k, v in before.items()
            if isinstance(v, int) and not any(w in k for w in growing)}
    changed = {k: (v, after.get(k)) for k, v in kept.items() if after.get(k) != v}
    rows.row(CHECKS[1], "PASS" if kept and not changed else "FAIL",
             f"{calls} loads + {calls} saves: " + ", ".join(f"{k} {v}" for k, v in kept.items()),
             ("changed: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()))
             if changed else ("" if kept else f"no counts in device_pool_stats(): {before}"))
    if not hasattr(rckpt, "release_device_pool"):
        rows.row(CHECKS[2], "FAIL", "", "rckpt.release_device_pool() is missing")
        return
    rckpt.release_device_pool()
    released = dict(rckpt.device_pool_stats())
    pinned = {k: v for k, v in released.items()
              if "pinned" in k and "bytes" in k and "cap" not in k and isinstance(v, int)}
    rows.row(CHECKS[2], "PASS" if pinned and not any(pinned.values()) else "FAIL",
             ", ".join(f"{k} {before.get(k)} -> {v}" for k, v in pinned.items()),
             "" if pinned else f"no pooled pinned bytes in device_pool_stats(): {released}")


def cpu_of(fn: Callable[[], Any]) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    c1, t1 = time.process_time(), time.perf_counter()
    del out
    return c1 - c0, t1 - t0


def no_spinning(gpu: Gpu, rows: Rows, rckpt: Any, d: str) -> None:
    torch = gpu.torch
    state = gpu.state(256)
    path = os.path.join(d, "spin.rckpt")
    rckpt.save(path, state)
    del state

    def load() -> Any:
        return rckpt.load(path, map_location="cuda:0")

    load()  # the page cache and rckpt's pool warm
    base_cpu, base_wall = [], []
    for _ in range(3):
        torch.cuda.synchronize()
        c, w = cpu_of(load)
        base_cpu.append(c)
        base_wall.append(w)
    torch.cuda.synchronize()
    gpu.sleep(1.0)  # torch's current stream, which the load's copies wait for
    c_wait, w_wait = cpu_of(load)
    torch.cuda.synchronize()
    remove(path)
    extra = c_wait - statistics.median(base_cpu)
    measured = (f"CPU {c_wait:.3f} s over {w_wait:.2f} s waiting vs {statistics.median(base_cpu):.3f}"
                f" s over {statistics.median(base_wall):.2f} s not: +{extra * 1e3:.0f} ms")
    if w_wait < 0.5:
        rows.row(CHECKS[3], "n/a", measured,
                 "the load returned without waiting for the busy stream: no wait to spin in")
        return
    rows.row(CHECKS[3], "PASS" if extra < LIMIT_CPU_S else "FAIL", measured,
             f"bound +{LIMIT_CPU_S * 1e3:.0f} ms")


def side_stream(gpu: Gpu, rows: Rows, rckpt: Any, d: str) -> None:
    torch = gpu.torch
    n = (64 << 20) // 4
    path = os.path.join(d, "side.rckpt")
    side = torch.cuda.Stream()
    current = torch.cuda.current_stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        t = torch.full((n,), 7.0, device=gpu.device)
    current.wait_stream(side)  # the saved values are ready on torch's current stream
    ptr = t.data_ptr()
    gpu.sleep(1.0)  # rckpt's snapshot copy waits for torch's current stream: held back
    fut = rckpt.save_async(path, {"model": {"t": t}})
    del t  # freed at once: its memory goes back to the side stream's pool
    with torch.cuda.stream(side):
        u = torch.empty(n, device=gpu.device)  # the same size, on the same stream
        u.fill_(-1.0)
    reused = u.data_ptr() == ptr
    fut.result()
    got = rckpt.load(path, map_location="cpu")["model"]["t"]
    remove(path)
    ok = bool((got == 7.0).all())
    rows.row(CHECKS[4], "PASS" if ok else "FAIL",
             f"{int((got != 7.0).sum())} of {n} values changed; the freed block "
             f"{'was handed out again at once' if reused else 'was held until the copy'}",
             "" if ok else "the snapshot copy read memory torch handed out again")
    del u
    # The control: a pending copy of a side-stream tensor, freed without a record.
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        t = torch.full((n,), 7.0, device=gpu.device)
    current.wait_stream(side)
    ptr = t.data_ptr()
    host = torch.empty(n, pin_memory=True)
    gpu.sleep(1.0)
    host.copy_(t, non_blocking=True)
    del t
    with torch.cuda.stream(side):
        u = torch.empty(n, device=gpu.device)
        u.fill_(-1.0)
    reused = u.data_ptr() == ptr
    torch.cuda.synchronize()
    corrupted = int((host != 7.0).sum())
    rows.row(CHECKS[5], "info",
             f"{corrupted} of {n} values changed; the block {'was' if reused else 'was not'} "
             "handed out again at once",
             "the hazard the record prevents is real here" if corrupted else
             "this torch did not reuse the block: the side-stream row proves less")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", help="append the rows to this markdown file")
    parser.add_argument("--json", help="write the rows to this JSON file")
    parser.add_argument("--dir", required=True, help="scratch checkpoints (each deleted at once)")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: rows say 'not run'")
    args = parser.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    title = "device path checks (torch's streams and allocator)"
    if args.dry_run:
        rows = Rows(args.table, args.json, title)
        for check in CHECKS:
            rows.row(check, "not run", "", "no GPU here")
        print(f"{len(CHECKS)} checks: not run (no GPU here)")
        return 0
    import torch

    import rckpt
    if not torch.cuda.is_available():
        print("proof_checks: torch sees no CUDA device", file=sys.stderr)
        return 2
    gpu = Gpu()
    rows = Rows(args.table, args.json,
                f"{title} on cuda:0 ({torch.cuda.get_device_name(0)}), torch {torch.__version__}")
    for run in (busy_stream, pool_constant, no_spinning, side_stream):
        try:
            run(gpu, rows, rckpt, args.dir)
        except Exception as e:  # one check's error is its row; the others still run
            rows.row(run.__name__.replace("_", " "), "FAIL", "",
                     f"{type(e).__name__}: {str(e)[:200]}")
            torch.cuda.synchronize()
    counts = {r: sum(1 for x in rows.rows if x["result"] == r) for r in ("PASS", "FAIL")}
    print(f"{len(rows.rows)} checks: {counts['PASS']} passed, {counts['FAIL']} failed")
    return 1 if rows.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
