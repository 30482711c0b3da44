#!/usr/bin/env python3
"""rckpt.dcp against DCP's own storage, in one run (docs/PERFORMANCE.md, "DCP").

Cases, each timed inside the job from a barrier to a barrier, repetitions
interleaved case by case, medians reported:

- save on --ranks processes (torchrun, gloo, CPU) of a state of DTensors
  sharded by rows over the ranks, --size bytes in all:
  dcp.save through rckpt.dcp.Writer, through DCP's FileSystemWriter, and
  rckpt.distributed.save of the same blocks over the gloo group;
- the same bytes saved by rckpt.distributed.save under mpirun (mpi4py);
- dcp.async_save stall (the call until it returns, training blocked) and
  the time until its future completes, a new writer every save: rckpt's
  Writer as it comes (the process keeps its staging copy for the next save;
  its first save, which allocates it, is reported on its own), DCP's
  FileSystemWriter, and rckpt's Writer staging into fresh memory every
  save as FileSystemWriter does;
- load on each of --load-ranks processes, resharded (DTensors sharded by
  columns), through rckpt.dcp.Reader and FileSystemReader.

    python bench/dcp_bench.py --size 2G --ranks 4 --load-ranks 2,3 --reps 3 --dir /tmp/dcpb

Every save starts from the same place: rank 0 writes back and drops the
page cache first (root only: the output says when it could not), so no
case pays for evicting another case's files. Loads read warm (each case's
warm-up repetition brings its files into the page cache). Needs torch 2.x with DCP; mpirun
and mpi4py for the mpirun row (skipped, with the reason, otherwise), in this
interpreter or the one --mpi-python names (the mpirun row imports no DCP).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
TENSORS = 8  # the state: this many float32 tensors of size / TENSORS bytes each


def parse_size(text):
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in SIZE_UNITS:
        return int(float(text[:-1]) * SIZE_UNITS[text[-1]])
    return int(text)


def shape_of(size):
    """The global shape of each of the TENSORS tensors: rows divisible by 2, 3 and 4."""
    rows = 12 * 1024
    return rows, max(12, size // TENSORS // 4 // rows)


def drop_caches():
    """Writes back and drops the page cache, so that every save starts alike; False if not allowed."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def barrier_time(dist, fn, rank=0, settle=False):
    """Seconds from a barrier to a barrier around fn(); settle: rank 0 first drops the page cache."""
    dist.barrier()
    if settle and rank == 0:
        drop_caches()
    dist.barrier()
    t0 = time.perf_counter()
    out = fn()
    dist.barrier()
    return time.perf_counter() - t0, out


def job_main(args):
    """One process of a torchrun or mpirun job: runs its cases, rank 0 writes the timings."""
    import torch
    if args.launcher == "mpirun":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank, world = comm.rank, comm.size

        class Dist:  # barrier() as torch.distributed spells it
            @staticmethod
            def barrier():
                comm.Barrier()
        dist = Dist
    else:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        comm = None
    import rckpt.distributed as rd
    rows, cols = shape_of(args.size)
    torch.manual_seed(rank)
    results = {}

    rep = -1

    def record(case, seconds):
        if rep >= 0:  # the first call of each case pays DCP's and the allocator's set-up
            results.setdefault(case, []).append(seconds)

    def blocks():
        per = rows // world
        return {f"t{i}": torch.randn(per, cols) for i in range(TENSORS)}, per

    if args.mode == "save":
        mine, per = blocks()
        if args.launcher == "mpirun":
            state = {"model": {k: rd.Shard(v, (rank * per, 0), (rows, cols))
                               for k, v in mine.items()}}
            for rep in range(-1, args.reps):  # rep -1: a warm-up, not recorded
                t, _ = barrier_time(dist, lambda: rd.save(comm, f"{args.dir}/mpi.rckpt", state),
                                    rank, settle=True)
                record("rckpt.distributed.save (mpirun)", t)
        else:
            import torch.distributed.checkpoint as dcp
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor import DTensor, Shard

            import rckpt.dcp
            mesh = init_device_mesh("cpu", (world,))
            state = {"model": {k: DTensor.from_local(v, mesh, [Shard(0)], run_check=False)
                               for k, v in mine.items()}}
            shards = {"model": {k: rd.Shard(v, (rank * per, 0), (rows, cols))
                                for k, v in mine.items()}}
            cases = {
                "dcp.save, rckpt.dcp.Writer": lambda: dcp.save(
                    state, storage_writer=rckpt.dcp.Writer(f"{args.dir}/w.rckpt")),
                "dcp.save, FileSystemWriter": lambda: dcp.save(
                    state, storage_writer=dcp.FileSystemWriter(f"{args.dir}/fs")),
                "rckpt.distributed.save (torchrun, gloo)": lambda: rd.save(
                    None, f"{args.dir}/rd.rckpt", shards),
            }
            rckpt.dcp.free_staging()
            for rep in range(-1, args.reps):  # rep -1: a warm-up, not recorded
                for case, fn in cases.items():
                    # FileSystemWriter overwrites its directory.
                    t, _ = barrier_time(dist, fn, rank, settle=True)
                    record(case, t)
                # A new Writer every save, as a training loop writes them:
                # the default keeps the process's staging copy for the next
                # save (its first save allocates it: rep -1, reported as the
                # first save); fresh staging allocates every time, as DCP's
                # FileSystemWriter does by default.
                for name, writer in (("rckpt.dcp.Writer", lambda: rckpt.dcp.Writer(
                                          f"{args.dir}/a.rckpt")),
                                     ("FileSystemWriter", lambda: dcp.FileSystemWriter(
                                          f"{args.dir}/afs")),
                                     ("rckpt.dcp.Writer, fresh staging", lambda: rckpt.dcp.Writer(
                                          f"{args.dir}/f.rckpt", cache_staged_state_dict=False))):
                    dist.barrier()
                    if rank == 0:
                        drop_caches()
                    dist.barrier()
                    t0 = time.perf_counter()
                    future = dcp.async_save(state, storage_writer=writer())
                    stall = time.perf_counter() - t0
                    future.result()
                    done = time.perf_counter() - t0
                    dist.barrier()
                    record(f"dcp.async_save stall, {name}", stall)
                    record(f"dcp.async_save until done, {name}", done)
                    if rep == -1 and rank == 0 and name == "rckpt.dcp.Writer":
                        results[f"dcp.async_save stall, {name}, first save"] = [stall]
    else:  # load
        import torch.distributed.checkpoint as dcp
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Shard

        import rckpt.dcp
        mesh = init_device_mesh("cpu", (world,))

        def dest():
            chunk = -(-cols // world)  # DTensor's Shard splits as torch.chunk does
            per = max(0, min(chunk, cols - rank * chunk))
            return {"model": {f"t{i}": DTensor.from_local(torch.empty(rows, per), mesh, [Shard(1)],
                                                          run_check=False, shape=(rows, cols),
                                                          stride=(cols, 1))
                              for i in range(TENSORS)}}
        cases = {
            "dcp.load, rckpt.dcp.Reader": lambda: dcp.load(
                dest(), storage_reader=rckpt.dcp.Reader(f"{args.dir}/w.rckpt")),
            "dcp.load, FileSystemReader": lambda: dcp.load(
                dest(), storage_reader=dcp.FileSystemReader(f"{args.dir}/fs")),
        }
        for rep in range(-1, args.reps):  # rep -1: a warm-up, not recorded
            for case, fn in cases.items():
                t, _ = barrier_time(dist, fn)
                record(f"{case} on {world}", t)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(results, f)
    if args.launcher != "mpirun":
        # gloo's threads may release the last collective's tensors while the
        # interpreter shuts down, which aborts the process (a torch bug):
        # leave without the shutdown once the results are written.
        dist.destroy_process_group()
        sys.stdout.flush()
        os._exit(0)


def launch(args, launcher, ranks, mode, out):
    # torchrun runs the script with its own interpreter; mpirun needs one named.
    python = [args.mpi_python] if launcher == "mpirun" else []
    cmd = python + [os.path.abspath(__file__), "--job", "--launcher", launcher,
           "--mode", mode, "--size", str(args.size), "--reps", str(args.reps), "--dir", args.dir,
           "--out", out]
    if launcher == "mpirun":
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            return "no mpiexec on PATH"
        pre = [mpiexec, "--oversubscribe", "-np", str(ranks), "--mca", "btl", "self,vader"]
        if os.geteuid() == 0:
            pre.append("--allow-run-as-root")
    else:
        pre = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", str(ranks)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(pre + cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        log = out[:-len(".json")] + ".log"
        with open(log, "w") as f:
            f.write(p.stdout + p.stderr)
        errors = [line for line in (p.stdout + p.stderr).splitlines()
                  if "Error" in line and "elastic" not in line]
        return f"{launcher} failed ({p.returncode}): {errors[-1] if errors else ''} (log: {log})"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=parse_size, default=parse_size("2G"),
                    help="bytes of the state in all (default 2G)")
    ap.add_argument("--ranks", type=int, default=4, help="processes that save (default 4)")
    ap.add_argument("--load-ranks", default="2,3", help="world sizes that load (default 2,3)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each case (default 3)")
    ap.add_argument("--dir", default=None, help="where the checkpoints go (default: a temp dir)")
    ap.add_argument("--mpi-python", default=sys.executable,
                    help="the interpreter of the mpirun job, one with mpi4py and the same rckpt "
                         "extension (default: this one; a torch 2 venv without mpi4py can name "
                         "the test command's build/pyenv/bin/python)")
    ap.add_argument("--json", help="also write the medians here")
    ap.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--launcher", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.job:
        return job_main(args)
    own_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="dcp-bench-")
    os.makedirs(args.dir, exist_ok=True)
    medians, notes = {}, []
    dropped = drop_caches()
    try:
        runs = [("torchrun", args.ranks, "save"), ("mpirun", args.ranks, "save")]
        runs += [("torchrun", int(n), "load") for n in args.load_ranks.split(",")]
        for launcher, ranks, mode in runs:
            out = os.path.join(args.dir, f"{launcher}-{mode}-{ranks}.json")
            print(f"... {launcher} {mode} on {ranks}", file=sys.stderr, flush=True)
            problem = launch(args, launcher, ranks, mode, out)
            if problem:
                notes.append(f"{launcher} {mode} on {ranks}: skipped: {problem}")
                continue
            with open(out) as f:
                for case, times in json.load(f).items():
                    medians[case] = statistics.median(times)
    finally:
        if own_dir:
            shutil.rmtree(args.dir, ignore_errors=True)
    gib = args.size / (1 << 30)
    print(f"state: {gib:.2f} GiB in {TENSORS} float32 tensors, saved by {args.ranks} processes; "
          f"medians of {args.reps}; load average {os.getloadavg()[0]:.1f}; page cache "
          f"{'dropped before each save' if dropped else 'NOT dropped (needs root): saves vary more'}")
    print(f"{'case':<48} {'seconds':>8} {'GiB/s':>7}")
    for case, t in medians.items():
        rate = "" if "stall" in case else f"{gib / t:7.2f}"
        print(f"{case:<48} {t:8.3f} {rate:>7}")

    def ratio(a, b):
        return medians[a] / medians[b] if a in medians and b in medians else None
    # Times, except the second: the Writer's speed relative to the mpirun save.
    targets = [
        ("save time: rckpt.dcp.Writer / FileSystemWriter (target <= 1.0)",
         ratio("dcp.save, rckpt.dcp.Writer", "dcp.save, FileSystemWriter")),
        ("save speed: rckpt.dcp.Writer / rckpt.distributed.save under mpirun (target >= 0.8)",
         ratio("rckpt.distributed.save (mpirun)", "dcp.save, rckpt.dcp.Writer")),
        ("async_save stall: rckpt.dcp.Writer / FileSystemWriter (target <= 1.0)",
         ratio("dcp.async_save stall, rckpt.dcp.Writer", "dcp.async_save stall, FileSystemWriter")),
        ("  the same, the Writer's first save (allocates the staging copy it keeps)",
         ratio("dcp.async_save stall, rckpt.dcp.Writer, first save",
               "dcp.async_save stall, FileSystemWriter")),
        ("  the same, the Writer with fresh staging every save",
         ratio("dcp.async_save stall, rckpt.dcp.Writer, fresh staging",
               "dcp.async_save stall, FileSystemWriter")),
    ]
    for n in args.load_ranks.split(","):
        targets.append((f"load on {n}: rckpt.dcp.Reader / FileSystemReader (target <= 1.0)",
                        ratio(f"dcp.load, rckpt.dcp.Reader on {n}",
                              f"dcp.load, FileSystemReader on {n}")))
    print()
    for label, value in targets:
        print(f"{label}: {'n/a' if value is None else format(value, '.2f')}")
    for note in notes:
        print(note)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": medians, "targets": dict(targets), "notes": notes,
                       "page_cache_dropped": dropped}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
