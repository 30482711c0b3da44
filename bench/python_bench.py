#!/usr/bin/env python3
"""Python rows of the throughput suite (docs/PERFORMANCE.md, "From Python").

Compares rckpt.save / rckpt.load / rckpt.load_into called from Python with
the C++ load of the same file (`rckpt load --json`), torch.save / torch.load
(+ load_state_dict) and safetensors.torch save_file / load_file, on models of
nn.Linear layers of a given size and on one of 10k small tensors. Every
timed case runs in a fresh process (a restart loads into a fresh process),
with glibc's malloc fixed as rckpt-bench fixes it, so each load gets memory
fresh from the kernel. Cases run interleaved (rep 1 of each, rep 2 of each,
...); reports the median of --reps runs per case.

    build/pyenv/bin/python bench/python_bench.py --cli build/tools/rckpt \\
        --pythonpath build/python --sizes 55M,1G --small 10000 --reps 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MALLOC = "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072"


def build_model(shape, fill=False):
    """The model of a shape, its parameters initialised as a constructed
    model's are (so their pages are in memory before a load into them):
    drawn at random when `fill` (the state a save writes), zeros otherwise
    (cheaper, outside the timed part as well)."""
    import torch
    kind, n = shape
    if kind == "small":  # n tensors: n/2 Linear(8, 8) layers (256 B weights, 32 B biases)
        dims, count = 8, n // 2
    else:  # n bytes in Linear(1024, 1024) layers (4 MiB + 4 KiB each)
        dims, count = 1024, max(1, n // ((1024 + 1) * 1024 * 4))
    model = torch.nn.Sequential(*[torch.nn.Linear(dims, dims, device="meta") for _ in range(count)])
    model = model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02, generator=g) if fill else p.zero_()
    return model


def touch(tensors):
    """Reads every byte (for loads that map the file lazily)."""
    s = 0.0
    for t in tensors:
        if t.numel():
            s += float(t.view(-1)[:: max(1, 4096 // t.element_size())].sum())
    return s


def child(case, shape, path):
    """Runs one case once; prints its seconds."""
    import torch
    torch.set_num_threads(1)
    import rckpt
    model = build_model(shape, fill=case.endswith("save") or case.endswith("save_file"))
    sd = model.state_dict()
    t0 = time.perf_counter()
    engine = None
    call = None  # rckpt.load's own call, before touching what it mapped
    if case == "rckpt.save":
        rckpt.save(path, {"model": sd})
    elif case == "torch.save":
        torch.save({"model": sd}, path)
    elif case == "safetensors.save_file":
        from safetensors.torch import save_file
        save_file(dict(sd), path)
    elif case.startswith("rckpt.load_into"):
        rckpt.load_into(path, {"model": sd}, verify="unverified" not in case)
    elif case.startswith("rckpt.load"):
        mapped = "copying" not in case  # map_file=True is the default
        ck = rckpt.load(path, verify="unverified" not in case, map_file=mapped)
        engine = ck.stats["seconds"]  # the C++ Load inside this call
        call = time.perf_counter() - t0
        if mapped and "unverified" in case:
            # An unverified mapped load has read nothing yet: its pages are
            # read when touched. A verified one has read every byte through
            # the same mapping (the checksums), so its pages are in place.
            touch(ck.tensors.values())
        model.load_state_dict(ck["model"]) if "+load_state_dict" in case else None
    elif case == "torch.load":
        torch.load(path)
    elif case == "torch.load+load_state_dict":
        model.load_state_dict(torch.load(path)["model"])
    elif case == "safetensors.load_file":
        from safetensors.torch import load_file
        touch(load_file(path).values())
    elif case == "safetensors.load_file+load_state_dict":
        from safetensors.torch import load_file
        model.load_state_dict(load_file(path))
    else:
        raise SystemExit(f"unknown case {case}")
    print(json.dumps({"seconds": time.perf_counter() - t0, "call_seconds": call,
                      "engine_seconds": engine}))


def run_once(args, case, shape, path):
    """One fresh-process run: (seconds, the load call's seconds or None, Python's
    part of that call or None), or a skip reason."""
    env = dict(os.environ, GLIBC_TUNABLES=MALLOC)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    if case.startswith("C++ "):
        cmd = [args.cli, "load", path, "--json", "--threads", "0"]
        if "unverified" in case:
            cmd.append("--no-verify")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["seconds"], None, None
    out = subprocess.run([sys.executable, __file__, "--child", case, "--shape",
                          f"{shape[0]}:{shape[1]}", "--file", path],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return out.stderr.strip().splitlines()[-1]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    call, engine = r.get("call_seconds"), r.get("engine_seconds")
    return r["seconds"], call, (call - engine if engine is not None else None)


def run_cases(args, cases, shape):
    """Runs `cases` ((name, file) pairs) interleaved: rep 1 of every case, then
    rep 2, ... so that each case sees the same state of a shared machine
    (here fresh memory may cost 10 x more from one minute to the next)."""
    times = {c: [] for c, _ in cases}
    calls = {c: [] for c, _ in cases}
    python_side = {c: [] for c, _ in cases}
    skipped = {}
    for i in range(args.warmup + args.reps):
        for case, path in cases:
            if case in skipped:
                continue
            r = run_once(args, case, shape, path)
            if isinstance(r, str):
                skipped[case] = r
            elif i >= args.warmup:
                times[case].append(r[0])
                if r[1] is not None:
                    calls[case].append(r[1])
                if r[2] is not None:
                    python_side[case].append(r[2])
    rows = []
    for case, _ in cases:
        if case in skipped:
            rows.append({"case": case, "skipped": skipped[case]})
            continue
        row = {"case": case, "seconds": statistics.median(times[case])}
        if calls[case]:
            row["call_seconds"] = statistics.median(calls[case])
        if python_side[case]:
            row["python_side_seconds"] = statistics.median(python_side[case])
        rows.append(row)
    return rows


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cli", help="the rckpt CLI (C++ load of the same file)")
    p.add_argument("--pythonpath", help="where the rckpt package is (e.g. build/python)")
    p.add_argument("--workdir", default="/tmp/rckpt-python-bench")
    p.add_argument("--sizes", default="55M,1G")
    p.add_argument("--small", type=int, default=10000, help="tensor count of the small-tensor case (0: none)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--child")
    p.add_argument("--shape")
    p.add_argument("--file")
    args = p.parse_args()
    if args.child:
        kind, n = args.shape.split(":")
        return child(args.child, (kind, int(n)), args.file)

    os.makedirs(args.workdir, exist_ok=True)
    shapes = [("bytes", parse_size(s)) for s in args.sizes.split(",") if s]
    if args.small:
        shapes.append(("small", args.small))
    results = []
    for shape in shapes:
        label = f"{shape[1] >> 20} MiB" if shape[0] == "bytes" else f"{shape[1]} tensors"
        files = {ext: os.path.join(args.workdir, f"{shape[0]}-{shape[1]}.{ext}")
                 for ext in ("rckpt", "pt", "safetensors")}
        saves = [("rckpt.save", "rckpt"), ("torch.save", "pt"),
                 ("safetensors.save_file", "safetensors")]
        loads = [("C++ load", "rckpt"), ("C++ load unverified", "rckpt"),
                 ("rckpt.load", "rckpt"), ("rckpt.load unverified", "rckpt"),
                 ("rckpt.load copying", "rckpt"), ("rckpt.load_into", "rckpt"),
                 ("rckpt.load_into unverified", "rckpt"), ("torch.load", "pt"),
                 ("torch.load+load_state_dict", "pt"), ("safetensors.load_file", "safetensors"),
                 ("safetensors.load_file+load_state_dict", "safetensors")]
        if not args.cli:
            loads = [c for c in loads if not c[0].startswith("C++")]
        rows = run_cases(args, [(c, files[e]) for c, e in saves], shape)
        rows += run_cases(args, [(c, files[e]) for c, e in loads], shape)
        nbytes = os.path.getsize(files["safetensors"])
        ntensors = sum(1 for _ in build_model(shape).state_dict())  # noqa: C416
        sec = {r["case"]: r.get("seconds") for r in rows}
        print(f"\n== {label}: {ntensors} tensors, {nbytes / 2**20:.1f} MiB")
        for r in rows:
            if "seconds" in r:
                call = f"  (the load call {r['call_seconds'] * 1e3:.1f} ms)" if "call_seconds" in r else ""
                print(f"  {r['case']:42s} {r['seconds'] * 1e3:9.1f} ms  "
                      f"{nbytes / r['seconds'] / 1e9:6.2f} GB/s{call}")
            else:
                print(f"  {r['case']:42s} skipped: {r['skipped']}")

        def ratio(a, b):
            return sec[b] / sec[a] if sec.get(a) and sec.get(b) else None

        call = next((r.get("call_seconds") for r in rows if r["case"] == "rckpt.load"), None)
        summary = {
            # The C++ figure is the library's Load alone, so the Python one is
            # the rckpt.load call alone (touching mapped pages comes after).
            "python load / C++ load (speed)":
                sec["C++ load"] / call if call and sec.get("C++ load") else None,
            "load vs torch.load": ratio("rckpt.load", "torch.load"),
            "load_into vs torch.load+load_state_dict": ratio("rckpt.load_into", "torch.load+load_state_dict"),
            "load vs safetensors.load_file": ratio("rckpt.load", "safetensors.load_file"),
            "copying load vs torch.load": ratio("rckpt.load copying", "torch.load"),
            "load unverified vs safetensors.load_file": ratio("rckpt.load unverified", "safetensors.load_file"),
            "load_into vs safetensors+load_state_dict": ratio("rckpt.load_into", "safetensors.load_file+load_state_dict"),
            "save vs torch.save": ratio("rckpt.save", "torch.save"),
            "save vs safetensors.save_file": ratio("rckpt.save", "safetensors.save_file"),
        }
        # What Python adds to the library's Load in the same call (the call's
        # wall time minus the engine's own), per tensor.
        py = next((r for r in rows if r["case"] == "rckpt.load"), {})
        if "python_side_seconds" in py:
            summary["per-tensor overhead of Python load (us)"] = \
                py["python_side_seconds"] / ntensors * 1e6
        for k, v in summary.items():
            print(f"  {k:50s} {'-' if v is None else f'{v:.2f}'}")
        results.append({"shape": label, "tensors": ntensors, "bytes": nbytes, "rows": rows,
                        "summary": summary})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema_version": 1, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
