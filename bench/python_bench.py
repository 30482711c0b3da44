#!/usr/bin/env python3
"""Python rows of the throughput suite (docs/PERFORMANCE.md, "From Python").

Compares rckpt.save / rckpt.load / rckpt.load_into called from Python with
the C++ load of the same file (`rckpt load --json`), torch.save / torch.load
(+ load_state_dict), torch.load(mmap=True) (+ load_state_dict),
torch.distributed.checkpoint's save / load with FileSystemWriter /
FileSystemReader in one process, safetensors.torch save_file / load_file and
tensorizer's TensorSerializer / TensorDeserializer, on models of nn.Linear
layers of a given size and on one of 10k small tensors. A peer the
interpreter lacks (torch 1.13 has neither mmap=True nor DCP's save/load;
tensorizer may not be installed) gives a "skipped: <reason>" row. Every
timed case runs in a fresh process (a restart loads into a fresh process),
with glibc's malloc fixed as rckpt-bench fixes it, so each load gets memory
fresh from the kernel. The clock starts once the interpreter has imported
torch, rckpt and the case's peer and built the model, and stops when the
state is usable: every byte of it has been read into memory the process can
use (a lazily mapped load touches every page inside the timed part), or it is
in the model's tensors for the "+load_state_dict" / "load_into" /
dcp.load / load_into_module cases. Cases run interleaved (rep 1 of each,
rep 2 of each, ...); reports the median of --reps runs per case.

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


def import_peer(case):
    """Imports the peer `case` calls (before the clock starts, as torch and rckpt
    are); returns (module or None, None) or (None, why the peer is missing)."""
    import torch
    if case.startswith("safetensors."):
        import safetensors.torch
        return safetensors.torch, None
    if case.startswith("torch.load mmap"):
        import inspect
        if "mmap" not in inspect.signature(torch.load).parameters:
            return None, f"torch {torch.__version__} has no torch.load(mmap=True) (torch >= 2.1)"
    if case.startswith("dcp."):
        try:
            import torch.distributed.checkpoint as dcp
        except ImportError as e:
            return None, f"torch {torch.__version__} has no torch.distributed.checkpoint ({e})"
        if not (hasattr(dcp, "save") and hasattr(dcp, "load")):
            return None, (f"torch {torch.__version__} has no torch.distributed.checkpoint.save/load "
                          "(torch >= 2.2)")
        return dcp, None
    if case.startswith("tensorizer."):
        try:
            import tensorizer
        except ImportError as e:
            return None, f"tensorizer is not installed ({e}; pip install tensorizer)"
        return tensorizer, None
    return None, None


def child(case, shape, path, spawned):
    """Runs one case once; prints its seconds, or why it was skipped."""
    import torch
    torch.set_num_threads(1)
    import rckpt
    peer, missing = import_peer(case)
    if missing:
        print(json.dumps({"skipped": missing}))
        return
    started = time.time() - spawned  # interpreter start and imports, not timed
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
        peer.save_file(dict(sd), path)
    elif case == "dcp.save":
        # One process, no process group: DCP saves without collectives. Its
        # writer fsyncs the files it writes (sync_files=True, the default).
        peer.save({"model": sd}, storage_writer=peer.FileSystemWriter(path))
    elif case == "tensorizer.save":
        # write_module (not write_state_dict) so that load_into_module can
        # restore the file; the same tensors either way.
        serializer = peer.TensorSerializer(path)
        serializer.write_module(model)
        serializer.close()
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
    elif case == "torch.load mmap":
        # Maps the file and reads nothing: every page is touched, as after
        # an unverified rckpt.load.
        touch(torch.load(path, mmap=True)["model"].values())
    elif case == "torch.load mmap+load_state_dict":
        model.load_state_dict(torch.load(path, mmap=True)["model"])
    elif case == "dcp.load":
        # Reads into the existing tensors of the state dict it is given, as
        # rckpt.load_into does.
        peer.load({"model": sd}, storage_reader=peer.FileSystemReader(path))
    elif case == "tensorizer.load":
        touch(peer.TensorDeserializer(path, device="cpu").values())
    elif case == "tensorizer.load_into_module":
        peer.TensorDeserializer(path, device="cpu").load_into_module(model)
    elif case == "safetensors.load_file":
        touch(peer.load_file(path).values())
    elif case == "safetensors.load_file+load_state_dict":
        model.load_state_dict(peer.load_file(path))
    else:
        raise SystemExit(f"unknown case {case}")
    print(json.dumps({"seconds": time.perf_counter() - t0, "call_seconds": call,
                      "engine_seconds": engine, "start_seconds": started}))


def run_once(args, case, shape, path):
    """One fresh-process run: {"seconds", "call" (the load call's seconds or None),
    "python" (Python's part of that call or None), "start" (interpreter start and
    imports or None)}, or {"skipped": why the peer is missing} or {"failed": the
    error's last line}."""
    env = dict(os.environ, GLIBC_TUNABLES=MALLOC)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    if case.startswith("C++ "):
        cmd = [args.cli, "load", path, "--json", "--threads", "0"]
        if "unverified" in case:
            cmd.append("--no-verify")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return {"seconds": json.loads(out.stdout)["seconds"], "call": None, "python": None,
                "start": None}
    out = subprocess.run([sys.executable, __file__, "--child", case, "--shape",
                          f"{shape[0]}:{shape[1]}", "--file", path, "--spawned", repr(time.time())],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return {"failed": lines[-1] if lines else f"exit status {out.returncode}"}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if "skipped" in r:
        return r
    call, engine = r.get("call_seconds"), r.get("engine_seconds")
    return {"seconds": r["seconds"], "call": call,
            "python": call - engine if engine is not None else None,
            "start": r.get("start_seconds")}


def run_cases(args, cases, shape):
    """Runs `cases` ((name, file) pairs) interleaved: rep 1 of every case, then
    rep 2, ... so that each case sees the same state of a shared machine
    (here fresh memory may cost 10 x more from one minute to the next)."""
    fields = ("seconds", "call", "python", "start")
    got = {c: {f: [] for f in fields} for c, _ in cases}
    left_out = {}  # case -> {"skipped": ...} or {"failed": ...}
    for i in range(args.warmup + args.reps):
        for case, path in cases:
            if case in left_out:
                continue
            r = run_once(args, case, shape, path)
            if "seconds" not in r:
                left_out[case] = r
            elif i >= args.warmup:
                for f in fields:
                    if r[f] is not None:
                        got[case][f].append(r[f])
    rows = []
    for case, _ in cases:
        if case in left_out:
            rows.append({"case": case, **left_out[case]})
            continue
        row = {"case": case}
        for f, key in zip(fields, ("seconds", "call_seconds", "python_side_seconds",
                                   "start_seconds")):
            if got[case][f]:
                row[key] = statistics.median(got[case][f])
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
    p.add_argument("--spawned", type=float, help="time.time() when the parent started the child")
    args = p.parse_args()
    if args.child:
        kind, n = args.shape.split(":")
        return child(args.child, (kind, int(n)), args.file, args.spawned)

    os.makedirs(args.workdir, exist_ok=True)
    shapes = [("bytes", parse_size(s)) for s in args.sizes.split(",") if s]
    if args.small:
        shapes.append(("small", args.small))
    results = []
    for shape in shapes:
        label = f"{shape[1] >> 20} MiB" if shape[0] == "bytes" else f"{shape[1]} tensors"
        # Every file in one directory (one disk); "dcp" is the directory
        # DCP's FileSystemWriter fills (one .distcp file and .metadata).
        files = {ext: os.path.join(args.workdir, f"{shape[0]}-{shape[1]}.{ext}")
                 for ext in ("rckpt", "pt", "safetensors", "dcp", "tensors")}
        saves = [("rckpt.save", "rckpt"), ("torch.save", "pt"),
                 ("safetensors.save_file", "safetensors"), ("dcp.save", "dcp"),
                 ("tensorizer.save", "tensors")]
        loads = [("C++ load", "rckpt"), ("C++ load unverified", "rckpt"),
                 ("rckpt.load", "rckpt"), ("rckpt.load unverified", "rckpt"),
                 ("rckpt.load copying", "rckpt"), ("rckpt.load_into", "rckpt"),
                 ("rckpt.load_into unverified", "rckpt"), ("torch.load", "pt"),
                 ("torch.load+load_state_dict", "pt"), ("torch.load mmap", "pt"),
                 ("torch.load mmap+load_state_dict", "pt"),
                 ("safetensors.load_file", "safetensors"),
                 ("safetensors.load_file+load_state_dict", "safetensors"),
                 ("dcp.load", "dcp"), ("tensorizer.load", "tensors"),
                 ("tensorizer.load_into_module", "tensors")]
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
                start = f"  [start+imports {r['start_seconds']:.2f} s]" if "start_seconds" in r else ""
                print(f"  {r['case']:42s} {r['seconds'] * 1e3:9.1f} ms  "
                      f"{nbytes / r['seconds'] / 1e9:6.2f} GB/s{call}{start}")
            elif "skipped" in r:
                print(f"  {r['case']:42s} skipped: {r['skipped']}")
            else:
                print(f"  {r['case']:42s} FAILED: {r['failed']}")

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
            # Peers on torch 2 (issue targets: the first >= 1, the third >= 3).
            "load vs torch.load mmap": ratio("rckpt.load", "torch.load mmap"),
            "load unverified vs torch.load mmap": ratio("rckpt.load unverified", "torch.load mmap"),
            "load_into vs torch.load mmap+load_state_dict":
                ratio("rckpt.load_into", "torch.load mmap+load_state_dict"),
            "load_into vs dcp.load": ratio("rckpt.load_into", "dcp.load"),
            "save vs dcp.save": ratio("rckpt.save", "dcp.save"),
            "load vs tensorizer.load": ratio("rckpt.load", "tensorizer.load"),
            "load_into vs tensorizer.load_into_module":
                ratio("rckpt.load_into", "tensorizer.load_into_module"),
            "save vs tensorizer.save": ratio("rckpt.save", "tensorizer.save"),
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
