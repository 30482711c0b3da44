#!/usr/bin/env python3
"""Object-storage rows of N ranks (docs/PERFORMANCE.md, "Object storage", "N ranks").

A job of 2 and of 4 ranks (gloo, this machine) saves a state of --size bytes
(1 GiB by default: 256 float32 tensors of 1024 x 1024, DTensors sharded by
rows over the ranks) with dcp.save into a bucket of a real S3 server,
SeaweedFS on loopback (tests/s3/s3_server.sh), and a job of the other world
size (4 and 2) loads it back resharded with dcp.load, three ways:

  rckpt             rckpt.dcp.Writer / Reader: ONE object, one multipart upload
                    of all the ranks (docs/DISTRIBUTED.md, "To object storage")
  s3torchconnector  s3torchconnector.dcp.S3StorageWriter / S3StorageReader: an
                    object per rank and .metadata under a prefix
  fsspec (s3fs)     torch's FsspecWriter / FsspecReader over s3fs: the same layout

Timed on rank 0 between barriers around dcp.save and dcp.load (the processes
have imported torch and the way's peer, joined the group and built the state
first); peak RSS is the largest rank's high-water mark (VmHWM). The server
is the bench's own, restarted before each world size (its memory grows with
what is written), and objects are deleted after each way. A second pass
runs every job again through tests/s3/fault_proxy.py (no delay) to count the
requests each way makes (--no-count skips it). One run, ways interleaved; the
ratios are within the run. The peers run in their own venv
(bench/peers/s3_peers_venv.sh), rckpt from --pythonpath. Runs outside CI.

    py="$(bash bench/peers/s3_peers_venv.sh)"
    python3 bench/s3_dcp_bench.py --python "$py" --pythonpath build/python \\
        --size 1G --out build/s3-dcp-bench.json
"""

import json
import os
import subprocess
import sys
import time

from s3_bench_common import (child_env, client, control, memory_kib,
                             parse_size, parser, reset_stats, started, warm_memory)

WAYS = ["rckpt", "s3torchconnector", "fsspec (s3fs)"]
ROWS = 1024  # every tensor is ROWS x 1024 float32


# -- one rank of a job --------------------------------------------------------------------------

def local_block(i, rank, world):
    """Rows [rank * ROWS / world, ...) of tensor i: drawn from a generator of (i, rank, world)."""
    import torch
    g = torch.Generator().manual_seed(i * 1000 + rank * 10 + world)
    return torch.empty(ROWS // world, 1024).normal_(0, 0.02, generator=g)


def storage(way, mode, spec):
    env, url = spec["s3"], spec["url"]
    if way == "rckpt":
        import rckpt.dcp
        return rckpt.dcp.Writer(url) if mode == "save" else rckpt.dcp.Reader(url)
    if way == "s3torchconnector":
        from s3torchconnector import S3ClientConfig
        from s3torchconnector._s3client import S3Client
        from s3torchconnector.dcp import S3StorageReader, S3StorageWriter
        from s3torchconnector.dcp.s3_file_system import S3FileSystem
        config = S3ClientConfig(force_path_style=True)
        made = (S3StorageWriter if mode == "save" else S3StorageReader)(
            region=env["region"], path=url, s3client_config=config)
        # Its storages take no endpoint: their file system is given a client
        # that has one (the client S3Checkpoint(endpoint=...) makes).
        made.fs = S3FileSystem(env["region"], s3_client=S3Client(
            env["region"], endpoint=env["endpoint"], s3client_config=config))
        made.path = made.fs.init_path(url)
        return made
    from torch.distributed.checkpoint import FsspecReader, FsspecWriter
    kwargs = {"key": env["access_key"], "secret": env["secret_key"],
              "endpoint_url": env["endpoint"], "client_kwargs": {"region_name": env["region"]}}
    return FsspecWriter(url, **kwargs) if mode == "save" else FsspecReader(url, **kwargs)


def rank_main(spec):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="file://" + spec["store"], rank=rank,
                            world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    way, mode, count = spec["way"], spec["mode"], spec["tensors"]
    if mode == "save":
        blocks = [local_block(i, rank, world) for i in range(count)]
    else:
        blocks = [torch.zeros(ROWS // world, 1024) for _ in range(count)]
    state = {"model": {f"{i}.weight": DTensor.from_local(b, mesh, [Shard(0)], run_check=False,
                                                         shape=torch.Size([ROWS, 1024]),
                                                         stride=(1024, 1))
                       for i, b in enumerate(blocks)}}
    store = storage(way, mode, spec)
    rss_before = memory_kib("VmRSS")
    dist.barrier()
    t0 = time.perf_counter()
    if mode == "save":
        dcp.save(state, storage_writer=store)
    else:
        dcp.load(state, storage_reader=store)
    dist.barrier()
    seconds = time.perf_counter() - t0
    if mode == "load":
        # Tensor 0's rows, against the saving ranks' generators.
        saved = spec["saved_world"]
        whole = torch.cat([local_block(0, r, saved) for r in range(saved)])
        mine = whole[rank * ROWS // world:(rank + 1) * ROWS // world]
        assert torch.equal(blocks[0], mine), f"{way}: tensor 0 differs at rank {rank}"
    peaks = [None] * world
    dist.all_gather_object(peaks, (memory_kib("VmHWM"), rss_before))
    if rank == 0:
        print(json.dumps({"seconds": seconds, "peak_kib": max(p for p, _ in peaks),
                          "rss_before_kib": max(b for _, b in peaks)}), flush=True)
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


# -- the bench ----------------------------------------------------------------------------------

def run_job(args, spec, world, env, work):
    """One job of `world` ranks; rank 0's JSON, or {"failed": ...}."""
    spec = dict(spec, store=os.path.join(work, f"store-{time.monotonic_ns()}"))
    procs, logs = [], []
    for r in range(world):
        log = open(os.path.join(work, f"rank{r}.log"), "w+")
        logs.append(log)
        procs.append(subprocess.Popen(
            [args.python, os.path.abspath(__file__), "rank", json.dumps(spec)],
            env=dict(env, RANK=str(r), WORLD_SIZE=str(world)), stdout=log,
            stderr=subprocess.STDOUT))
    deadline = time.monotonic() + args.timeout
    failed = None
    try:
        for p in procs:
            p.wait(max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        failed = f"no result within {args.timeout} s"
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    logs[0].seek(0)
    lines = [line for line in logs[0].read().splitlines() if line.startswith("{")]
    if failed is None and lines and all(p.returncode == 0 for p in procs):
        result = json.loads(lines[-1])
    else:
        tails = []
        for log in logs:
            log.seek(0)
            tails.append((log.read().strip().splitlines() or ["?"])[-1][:300])
        result = {"failed": failed or " | ".join(tails)}
    for log in logs:
        log.close()
    return result


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "rank":
        return rank_main(json.loads(sys.argv[2]))
    p = parser(__doc__, timeout_help="seconds per job")
    p.add_argument("--worlds", default="2,4", help="saving world sizes (2,4); each loads at "
                                                  "the other (one alone: at twice it)")
    p.add_argument("--ways", help="only these ways (comma-separated words)")
    p.add_argument("--no-count", action="store_true", help="skip the pass through the proxy")
    args = p.parse_args()
    size = parse_size(args.size)
    warm_memory(args.warm_gib, "s3_dcp_bench")
    tensors = max(1, size // (ROWS * 1024 * 4))
    worlds = [int(w) for w in args.worlds.split(",")]
    ways = [w for w in WAYS if not args.ways or any(x in w for x in args.ways.split(","))]

    rows = []
    with started(args.server_env, "s3-dcp-bench") as setup:
        s3env, proxied, info, work = setup.s3env, setup.proxied, setup.info, setup.work
        passes = [("direct", s3env)] + ([] if args.no_count else [("proxy", proxied)])
        load_avg = os.getloadavg()
        for network, target in passes:
            env = child_env(args.pythonpath, target, OMP_NUM_THREADS="1")
            for world in worlds:
                setup.restart_server()  # about 1 GB of the server's memory a GiB written
                other = [w for w in worlds if w != world]
                load_world = other[0] if other else 2 * world
                for way in ways:
                    prefix = f"dcp-bench/{network}/{world}/{''.join(c for c in way if c.isalnum())}"
                    url = f"s3://{s3env['bucket']}/{prefix}" + (".rckpt" if way == "rckpt" else "/")
                    spec = {"way": way, "s3": target, "url": url, "tensors": tensors,
                            "saved_world": world}
                    row = {"network": network, "world": world, "load_world": load_world,
                           "way": way}
                    for mode, w in (("save", world), ("load", load_world)):
                        if network == "proxy":
                            reset_stats(info)
                        result = run_job(args, dict(spec, mode=mode), w, env, work)
                        if network == "proxy":
                            result["requests"] = control(info, "/stats")["requests"]
                        row[mode] = result
                        shown = (f"{result['seconds']:.2f} s" if "seconds" in result
                                 else result["failed"])
                        print(f"s3_dcp_bench: {network}: {way}: {mode} at {w} ranks: {shown}",
                              file=sys.stderr, flush=True)
                    with client(s3env) as s3:
                        s3.delete_prefix(s3env["bucket"], prefix)
                        objects = s3.list_objects(s3env["bucket"], prefix)
                    row["objects_left"] = len(objects)
                    rows.append(row)
        report = {"size": tensors * ROWS * 1024 * 4, "worlds": worlds, "rows": rows,
                  "load_average_at_start": load_avg, "load_average_at_end": os.getloadavg(),
                  "nproc": os.cpu_count()}
        text = table(report)
        print(text)
        report["table"] = text
        if args.out:
            with open(args.out, "w") as f:
                json.dump(report, f, indent=1)
    return 0


def table(report):
    """The rows as Markdown: times direct, requests through the proxy, ratios to rckpt's."""
    direct = {(r["world"], r["way"]): r for r in report["rows"] if r["network"] == "direct"}
    counted = {(r["world"], r["way"]): r for r in report["rows"] if r["network"] == "proxy"}
    lines = ["| ranks | way | save s | load s (ranks) | save / rckpt's | load / rckpt's | "
             "requests save + load | peak RSS save / load (MiB, largest rank) |",
             "|---|---|---|---|---|---|---|---|"]

    def secs(row, mode):
        return row.get(mode, {}).get("seconds")

    for (world, way), row in direct.items():
        mine = direct.get((world, "rckpt"), {})
        cells = []
        for mode in ("save", "load"):
            s, base = secs(row, mode), secs(mine, mode)
            cells.append(f"{s / base:.2f}" if s and base else "-")
        count = counted.get((world, way))
        requests = "-"
        if count:
            n = [sum(count.get(m, {}).get("requests", {}).values()) for m in ("save", "load")]
            requests = f"{n[0]} + {n[1]}"
        peaks = "/".join(f"{row[m]['peak_kib'] / 1024:.0f}" if "peak_kib" in row.get(m, {})
                         else "-" for m in ("save", "load"))
        save = f"{secs(row, 'save'):.2f}" if secs(row, "save") else row.get("save", {}).get(
            "failed", "-")[:60]
        load = f"{secs(row, 'load'):.2f}" if secs(row, "load") else row.get("load", {}).get(
            "failed", "-")[:60]
        lines.append(f"| {world} | {way} | {save} | {load} ({row['load_world']}) | {cells[0]} | "
                     f"{cells[1]} | {requests} | {peaks} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
