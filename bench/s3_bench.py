#!/usr/bin/env python3
"""Object-storage rows of the bench (docs/PERFORMANCE.md, "Object storage").

Loads and saves of one state (1 GiB of float32 tensors by default: the
Linear(1024, 1024) layers of bench/python_bench.py) in a bucket of a real S3
server, SeaweedFS on loopback (tests/s3/s3_server.sh), side by side with the
peers, each way in a process of its own:

  loads   boto3 download_fileobj into memory (the bytes of the .pt object,
          boto3's multi-threaded transfer, its defaults: the practical limit
          of "these bytes into memory"); s3fs + torch.load; s3torchconnector's
          S3Checkpoint reader + torch.load; Run:ai Model Streamer on the same
          tensors as one safetensors object; rckpt.load and `rckpt load` of an
          s3:// URL.
  saves   boto3 upload_fileobj of the .pt object's bytes, already in memory
          (the practical limit); torch.save to s3fs; torch.save to
          s3torchconnector's S3Checkpoint writer; rckpt.save to an s3:// URL.
  stall   rckpt.save_async to an s3:// URL: how long it blocks the caller,
          against a copy of every tensor of the state into new memory
          (memcpy), measured in the same process.

Every way runs on four networks: the server directly; through
tests/s3/fault_proxy.py with no delay (the proxy's own ceiling: what its
relaying allows, boto3's ways only); through the proxy with --delay-ms
(20 by default) added before each request is forwarded; and the server's
https port (loads and saves), its certificate signed by the private CA
tests/s3/s3_server.sh makes, which every way trusts through AWS_CA_BUNDLE
(and SSL_CERT_FILE, which the AWS CRT under s3torchconnector reads).
--networks picks some of them. Each row reports the
median seconds of --reps runs (ways interleaved: rep 1 of each, rep 2 of
each...), GiB/s of the tensor bytes (the object's bytes for boto3's ways),
the process's resident memory before the timed part and its peak (VmHWM), and
the ratios of the same run: each peer against rckpt's row of its kind, and
each way against boto3's. The clock starts after the interpreter imported
torch, rckpt and the way's peer and built its client (and, for saves, the
state), and stops when every tensor is in the process's memory (loads) or the
object is complete in the bucket (saves).

The peers run in their own venv (bench/peers/s3_peers_venv.sh); rckpt's rows
need rckpt built with s3:// support (--pythonpath, --cli) and are skipped with
the reason otherwise. Runs outside CI.

    py="$(bash bench/peers/s3_peers_venv.sh)"
    python3 bench/s3_bench.py --python "$py" --pythonpath build/python \\
        --cli build/tools/rckpt --size 1G --reps 3 --out build/s3-bench.json

The https rows alone, rckpt against boto3 and s3torchconnector:

    python3 bench/s3_bench.py --python "$py" --pythonpath build/python \\
        --networks direct,https --ways boto3,s3torchconnector,rckpt. --reps 3
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from s3_bench_common import (child_env, client, control, memory_kib,
                             parse_size, parser, started, warm_memory)

LOADS = ["boto3 download_fileobj", "s3fs + torch.load", "s3torchconnector reader + torch.load",
         "runai streamer (safetensors)", "rckpt.load", "rckpt load (CLI)"]
SAVES = ["boto3 upload_fileobj", "torch.save to s3fs", "torch.save to s3torchconnector writer",
         "rckpt.save"]
STALLS = ["rckpt.save_async stall"]
CEILING = ["boto3 download_fileobj", "boto3 upload_fileobj"]  # the proxy's own ceiling
OBJECTS = {"pt": "bench/state.pt", "safetensors": "bench/state.safetensors",
           "rckpt": "bench/state.rckpt", "probe": "bench/probe.rckpt"}
GiB = 1 << 30


# -- the child: one way, once -----------------------------------------------------------------------

def build_state(size):
    """The state of python_bench's models: Linear(1024, 1024) layers, `size` bytes."""
    import torch
    count = max(1, size // ((1024 + 1) * 1024 * 4))
    g = torch.Generator().manual_seed(0)
    state = {}
    for i in range(count):
        state[f"{i}.weight"] = torch.empty(1024, 1024).normal_(0, 0.02, generator=g)
        state[f"{i}.bias"] = torch.empty(1024).normal_(0, 0.02, generator=g)
    return state


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def child(spec):
    """Runs spec["way"] once; prints one JSON line."""
    import io
    import torch
    way, env = spec["way"], spec["s3"]
    bucket = env["bucket"]
    uri = f"s3://{bucket}/"

    def boto3_client():
        import boto3
        return boto3.client("s3", endpoint_url=env["endpoint"], region_name=env["region"],
                            aws_access_key_id=env["access_key"],
                            aws_secret_access_key=env["secret_key"])

    def s3fs_fs():
        import s3fs
        return s3fs.S3FileSystem(key=env["access_key"], secret=env["secret_key"],
                                 endpoint_url=env["endpoint"],
                                 client_kwargs={"region_name": env["region"]})

    def s3torch_checkpoint():
        from s3torchconnector import S3Checkpoint, S3ClientConfig
        return S3Checkpoint(region=env["region"], endpoint=env["endpoint"],
                            s3client_config=S3ClientConfig(force_path_style=True))

    def load_kwargs():
        import inspect
        return {"weights_only": True} if "weights_only" in inspect.signature(
            torch.load).parameters else {}

    result = {}
    state = None
    if spec["kind"] in ("save", "stall"):
        state = build_state(spec["size"])
    key = spec.get("key")
    # What each way needs before the clock starts: the peer imported, its client built.
    if way == "boto3 download_fileobj":
        client = boto3_client()
    elif way == "boto3 upload_fileobj":
        client = boto3_client()
        buffer = io.BytesIO()
        torch.save({"model": state}, buffer)
        payload = buffer.getvalue()
        del buffer
        state = None
    elif way in ("s3fs + torch.load", "torch.save to s3fs"):
        fs = s3fs_fs()
    elif way.startswith("s3torchconnector") or way.startswith("torch.save to s3torchconnector"):
        checkpoint = s3torch_checkpoint()
    elif way == "runai streamer (safetensors)":
        from runai_model_streamer import SafetensorsStreamer
    elif way.startswith("rckpt"):
        import rckpt
    rss_before = memory_kib("VmRSS")
    t0 = time.perf_counter()
    if way == "boto3 download_fileobj":
        out = io.BytesIO()
        client.download_fileobj(bucket, OBJECTS["pt"], out)
        nbytes = out.tell()
    elif way == "s3fs + torch.load":
        with fs.open(f"{bucket}/{OBJECTS['pt']}", "rb") as f:
            loaded = torch.load(f, **load_kwargs())
        nbytes = tensor_bytes(loaded["model"].values())
    elif way == "s3torchconnector reader + torch.load":
        with checkpoint.reader(uri + OBJECTS["pt"]) as f:
            loaded = torch.load(f, **load_kwargs())
        nbytes = tensor_bytes(loaded["model"].values())
    elif way == "runai streamer (safetensors)":
        with SafetensorsStreamer() as streamer:
            streamer.stream_file(uri + OBJECTS["safetensors"])
            loaded = dict(streamer.get_tensors())  # owned tensors (owned=True, the default)
        nbytes = tensor_bytes(loaded.values())
    elif way == "rckpt.load":
        loaded = rckpt.load(uri + OBJECTS["rckpt"])
        nbytes = tensor_bytes(loaded["model"].values())
    elif way == "boto3 upload_fileobj":
        client.upload_fileobj(io.BytesIO(payload), bucket, key)
        nbytes = len(payload)
    elif way == "torch.save to s3fs":
        with fs.open(f"{bucket}/{key}", "wb") as f:
            torch.save({"model": state}, f)
        nbytes = tensor_bytes(state.values())
    elif way == "torch.save to s3torchconnector writer":
        with checkpoint.writer(uri + key) as f:
            torch.save({"model": state}, f)
        nbytes = tensor_bytes(state.values())
    elif way == "rckpt.save":
        rckpt.save(uri + key, {"model": state})
        nbytes = tensor_bytes(state.values())
    elif way == "rckpt.save_async stall":
        tensors = list(state.values())
        copy_t0 = time.perf_counter()
        copies = [t.clone() for t in tensors]
        result["memcpy_seconds"] = time.perf_counter() - copy_t0
        del copies
        t0 = time.perf_counter()
        future = rckpt.save_async(uri + key, {"model": state})
        stall = time.perf_counter() - t0
        future.result()
        result["total_seconds"] = time.perf_counter() - t0
        result["seconds"] = stall
        nbytes = tensor_bytes(tensors)
    else:
        raise SystemExit(f"s3_bench: unknown way {way!r}")
    result.setdefault("seconds", time.perf_counter() - t0)
    result.update(bytes=nbytes, rss_before_kib=rss_before, peak_kib=memory_kib("VmHWM"))
    print(json.dumps(result), flush=True)


# -- the parent --------------------------------------------------------------------------------------

def run_child(args, spec, env):
    """One way in a fresh process: its JSON, or {"skipped": reason} / {"failed": ...}."""
    cmd = [args.python, os.path.abspath(__file__), "child", json.dumps(spec)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"failed": f"no result within {args.timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"failed": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]}


def run_cli(args, uri, env):
    """`rckpt load URI --json`, the whole process timed from here, its peak RSS from wait4."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([args.cli, "load", uri, "--json"], env=env, stdout=out,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            lines = err.read().decode(errors="replace").strip().splitlines() or ["?"]
            return {"failed": f"exit {proc.returncode}: {lines[-1][:300]}"}
        report = json.loads(out.read())
    return {"seconds": seconds, "bytes": report["bytes_restored"], "rss_before_kib": 0,
            "peak_kib": usage.ru_maxrss}


def rckpt_skip_reason(args, env, s3env):
    """Why rckpt's rows cannot run (None when they can): no build, or no s3:// support."""
    if not args.pythonpath:
        return "no rckpt build given (--pythonpath)"
    probe = ("import rckpt, sys\n"
             "try:\n"
             f"    rckpt.load('s3://{s3env['bucket']}/{OBJECTS['probe']}')\n"
             "except Exception as e:\n"
             "    print(f'{type(e).__name__}: {e}'); sys.exit(1)\n")
    done = subprocess.run([args.python, "-c", probe], env=env, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        reason = (done.stdout.strip() or done.stderr.strip() or "?").splitlines()[-1]
        return f"this rckpt cannot read an s3:// URL ({reason[:200]})"
    return None


def peer_env(args, s3env):
    return child_env(
        args.pythonpath, s3env, RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0",
        GLIBC_TUNABLES="glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072")


def prepare(args, s3env):
    """Puts the state in the bucket as .pt, .safetensors and .rckpt objects (untimed)."""
    script = f"""
import io, json, sys, tempfile, os
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import boto3, torch
from s3_bench import build_state
state = build_state({args.size})
s3 = boto3.client("s3", endpoint_url={s3env['endpoint']!r}, region_name={s3env['region']!r},
                  aws_access_key_id={s3env['access_key']!r},
                  aws_secret_access_key={s3env['secret_key']!r})
b = {s3env['bucket']!r}
buf = io.BytesIO(); torch.save({{"model": state}}, buf); buf.seek(0)
s3.upload_fileobj(buf, b, {OBJECTS['pt']!r}); del buf
from safetensors.torch import save
s3.upload_fileobj(io.BytesIO(save(state)), b, {OBJECTS['safetensors']!r})
try:
    import rckpt
except ImportError as e:
    print("rckpt not importable:", e, file=sys.stderr)
else:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "state.rckpt")
        rckpt.save(path, {{"model": state}})
        s3.upload_file(path, b, {OBJECTS['rckpt']!r})
        rckpt.save(path, {{"model": {{"w": torch.ones(4)}}}})
        s3.upload_file(path, b, {OBJECTS['probe']!r})
print(json.dumps({{"tensor_bytes": sum(t.numel() * t.element_size() for t in state.values())}}))
"""
    env = peer_env(args, s3env)
    done = subprocess.run([args.python, "-c", script], env=env, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"s3_bench: preparing the objects failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows):
    """Markdown rows with the ratios of this run."""
    lines = ["| network | way | seconds | GiB/s | peak RSS MiB (before) | × boto3 | rckpt ÷ way |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "seconds" not in r:
            lines.append(f"| {r['network']} | {r['way']} | {r.get('skipped') or r.get('failed')} "
                         "| | | | |")
            continue
        gibs = r["bytes"] / GiB / r["seconds"]
        base = next((x for x in rows if x["network"] == r["network"] and "seconds" in x and
                     x["way"] == ("boto3 download_fileobj" if r["kind"] == "load"
                                  else "boto3 upload_fileobj")), None)
        ours = next((x for x in rows if x["network"] == r["network"] and "seconds" in x and
                     x["way"] == {"load": "rckpt.load", "save": "rckpt.save"}.get(r["kind"])),
                    None)
        vs_boto = f"{(r['bytes'] / r['seconds']) / (base['bytes'] / base['seconds']):.2f}" \
            if base and r["kind"] != "stall" else ""
        vs_ours = f"{r['seconds'] / ours['seconds'] * ours['bytes'] / r['bytes']:.2f}" \
            if ours and ours is not r else ""
        extra = ""
        if r["kind"] == "stall":
            extra = (f" (memcpy {r['memcpy_seconds']:.3f} s: stall ÷ memcpy "
                     f"{r['seconds'] / r['memcpy_seconds']:.2f}; whole save "
                     f"{r['total_seconds']:.2f} s)")
        lines.append(f"| {r['network']} | {r['way']}{extra} | {r['seconds']:.3f} | {gibs:.2f} | "
                     f"{r['peak_kib'] / 1024:.0f} ({r['rss_before_kib'] / 1024:.0f}) | {vs_boto} | "
                     f"{vs_ours} |")
    return "\n".join(lines)


def versions(python, env):
    script = ("import importlib.metadata as m, json, sys\n"
              "out = {'python': sys.version.split()[0]}\n"
              "for p in ['torch', 'boto3', 's3fs', 's3torchconnector', 'runai-model-streamer',"
              " 'safetensors', 'rckpt']:\n"
              "    try: out[p] = m.version(p)\n"
              "    except m.PackageNotFoundError: pass\n"
              "try:\n    import rckpt; out['rckpt'] = rckpt.__version__\nexcept Exception: pass\n"
              "print(json.dumps(out))")
    done = subprocess.run([python, "-c", script], env=env, capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        return child(json.loads(sys.argv[2]))
    p = parser(__doc__, timeout_help="seconds per run of a way")
    p.add_argument("--cli", help="the rckpt CLI (build/tools/rckpt)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--delay-ms", type=float, default=20, help="delay per request through the "
                                                              "proxy (20)")
    p.add_argument("--ways", help="only the ways whose names contain one of these "
                                  "comma-separated words")
    p.add_argument("--networks", default="direct,proxy,https",
                   help="comma-separated: direct, proxy (no delay and --delay-ms), https")
    args = p.parse_args()
    args.size = parse_size(args.size)
    warm_memory(args.warm_gib, "s3_bench")

    with started(args.server_env, "s3-bench") as setup:
        s3env, proxied, info = setup.s3env, setup.proxied, setup.info
        print(f"s3_bench: preparing {args.size / GiB:.2f} GiB as .pt, .safetensors and .rckpt "
              f"objects", file=sys.stderr)
        prepared = prepare(args, s3env)
        skip_rckpt = rckpt_skip_reason(args, peer_env(args, s3env), s3env)
        chosen = args.networks.split(",")
        networks = []
        if "direct" in chosen:
            networks.append(("direct", s3env, 0, LOADS + SAVES + STALLS))
        if "proxy" in chosen:
            networks += [("proxy, 0 ms", proxied, 0, CEILING),
                         (f"proxy, {args.delay_ms:g} ms", proxied, args.delay_ms,
                          LOADS + SAVES + STALLS)]
        if "https" in chosen:
            if setup.https is None:
                raise SystemExit("s3_bench: the server has no https port (an s3.env of an older "
                                 "tests/s3/s3_server.sh)")
            networks.append(("https", setup.https, 0, LOADS + SAVES))
        runs = {}
        for rep in range(args.reps):
            for network, target, delay, ways in networks:
                control(info, "/delay", {"ms": delay})
                env = peer_env(args, target)
                for way in ways:
                    if args.ways and not any(w in way for w in args.ways.split(",")):
                        continue
                    kind = "load" if way in LOADS else "save" if way in SAVES else "stall"
                    row_key = (network, way)
                    if way.startswith("rckpt") and skip_rckpt:
                        runs[row_key] = [{"skipped": skip_rckpt}]
                        continue
                    if way == "rckpt load (CLI)" and not args.cli:
                        runs[row_key] = [{"skipped": "no CLI given (--cli)"}]
                        continue
                    key = "bench/saved-" + "".join(c if c.isalnum() else "-" for c in way)
                    if way == "rckpt load (CLI)":
                        result = run_cli(args, f"s3://{target['bucket']}/{OBJECTS['rckpt']}", env)
                    else:
                        result = run_child(args, {"way": way, "kind": kind, "s3": target,
                                                  "size": args.size, "key": key}, env)
                    if kind != "load":
                        with client(s3env) as s3:
                            s3.delete_object(s3env["bucket"], key)
                    result["kind"] = kind
                    runs.setdefault(row_key, []).append(result)
                    shown = (f"{result['seconds']:.3f} s" if "seconds" in result else
                             result.get("skipped") or result.get("failed"))
                    print(f"s3_bench: rep {rep + 1}: {network}: {way}: {shown}", file=sys.stderr)
        rows = []
        for (network, way), results in runs.items():
            timed = [r for r in results if "seconds" in r]
            kind = "load" if way in LOADS else "save" if way in SAVES else "stall"
            if not timed:
                rows.append({"network": network, "way": way, "kind": kind, **results[-1]})
                continue
            median = sorted(timed, key=lambda r: r["seconds"])[len(timed) // 2]
            rows.append({"network": network, "way": way, "kind": kind, **median,
                         "all_seconds": [r["seconds"] for r in timed]})
        text = table(rows)
        print(text)
        proxy_stats = control(info, "/stats")
        report = {"size": args.size, "tensor_bytes": prepared["tensor_bytes"], "reps": args.reps,
                  "delay_ms": args.delay_ms, "versions": versions(args.python,
                                                                   peer_env(args, s3env)),
                  "rows": rows, "table": text, "proxy_stats": proxy_stats}
        if args.out:
            with open(args.out, "w") as f:
                json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
