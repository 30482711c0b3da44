"""The job side of test_distributed.py, run under mpirun (over mpi4py) or
torchrun (over a gloo process group), one scenario a run:

    distributed_driver.py save OUT DIR     4 ranks save DIR/ck.rckpt, then load it back
                                           with the same sharding and restore their RNGs
    distributed_driver.py load OUT DIR     any number of ranks load DIR/ck.rckpt resharded
    distributed_driver.py failures OUT DIR DATA  one rank's failure, or a bad file: every
                                           rank raises the same error; the previous file
                                           survives
    distributed_driver.py vanish OUT DIR   rank 1 never calls the save: the others time out
    distributed_driver.py kill OUT DIR     rank 1 killed mid-save: the job ends, the
                                           previous file survives

Every rank checks its own outcome (an assertion failure aborts the job) and
writes what it saw to OUT/<rank>.jsonl, one JSON record a line, for the test
to compare across ranks. Importing this module imports neither mpi4py nor
torch.distributed's groups: the test reuses the state definitions below.
"""

import json
import os
import random
import resource
import signal
import sys
import time
import traceback
import zlib
from typing import Callable

import numpy as np
import torch

import rckpt

SAVED_RANKS = 4
# name -> dtype, shape, dimension the saving job splits it along (None: replicated).
TENSORS = {
    "model.fc1.weight": (torch.float32, (48, 40), 0),  # rows
    "model.fc2.weight": (torch.bfloat16, (40, 70), 1),  # columns
    "model.embed.weight": (torch.float16, (33, 8), None),  # replicated
    "optimizer.state.0.exp_avg": (torch.float32, (10007,), 0),  # flat, uneven
    "optimizer.state.0.exp_avg_sq": (torch.float64, (10007,), 0),
    "optimizer.state.0.step": (torch.int64, (), None),  # replicated 0-d, host role
}
PARAM_GROUPS = [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0]}]
COMMON = {"controller": {"epoch": 3, "best": 0.25}}
SAVE_OPTIONS = {"codec": "zstd", "chunk_bytes": 4096, "threads": 1}


def global_tensor(name):
    """The whole tensor: random bytes (NaN payloads, -0.0 and denormals included)."""
    dtype, shape, _ = TENSORS[name]
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    n = int(np.prod(shape, dtype=np.int64)) * torch.tensor([], dtype=dtype).element_size()
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).view(dtype).reshape(shape)


def tree(leaf):
    """The job's state with leaf(name) at each tensor's key path."""
    return {
        "model": {k: leaf(f"model.{k}") for k in ("fc1.weight", "fc2.weight", "embed.weight")},
        "optimizer": {
            "state": {0: {k: leaf(f"optimizer.state.0.{k}")
                          for k in ("exp_avg", "exp_avg_sq", "step")}},
            "param_groups": PARAM_GROUPS,
        },
    }


def assembled_state():
    """What a single process sees as the common state: whole tensors, plus COMMON."""
    return {**tree(global_tensor), **COMMON}


def rank_state(rank):
    return {"cursor": 1000 * rank + 17, "order": [rank, rank + 1]}


def state_of(rank, world, rd):
    """Rank ``rank``'s part of the state when ``world`` ranks save it."""
    def leaf(name):
        dim = TENSORS[name][2]
        t = global_tensor(name)
        return t if dim is None else rd.Shard.split(t, rank, world, dim)
    return tree(leaf)


def wanted(name, rank, world, rd, same_split):
    """The block a loading rank asks for: the saved split, or another one where the shape allows."""
    dtype, shape, dim = TENSORS[name]
    if dim is None:
        return None
    if not same_split and len(shape) == 2:
        dim = 1 - dim
    return rd.part(shape, rank, world, dim)


def expected_block(name, block):
    t = global_tensor(name)
    if block is None:
        return t
    for d, (o, s) in enumerate(zip(block.offsets, block.sizes)):
        t = t.narrow(d, o, s)
    return t


def raw(t):
    return t.detach().contiguous().cpu().reshape(-1).view(torch.uint8)


def check_blocks(back, wants, rank):
    for name, block in wants.items():
        got, want = back.blocks[name], expected_block(name, block)
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.shape, want.shape)
        assert torch.equal(raw(got), raw(want)), f"{name}: block differs from the global slice"
    assert back["model"]["fc1.weight"] is back.blocks["model.fc1.weight"]
    assert back["optimizer"]["state"][0]["exp_avg"] is back.blocks["optimizer.state.0.exp_avg"]
    assert back["optimizer"]["param_groups"] == PARAM_GROUPS
    assert back["controller"] == COMMON["controller"]
    assert back.rank_states == [rank_state(r) for r in range(SAVED_RANKS)], back.rank_states
    assert back.saved_world_size == SAVED_RANKS
    assert back.bytes_needed == sum(raw(t).numel() for t in back.blocks.values())
    assert back.bytes_read >= back.bytes_needed


_results = None  # this rank's OUT/<rank>.jsonl


def report(**fields):
    _results.write(json.dumps(fields) + "\n")  # type: ignore[union-attr]
    _results.flush()  # type: ignore[union-attr]


def scenario_save(job, rd, directory):
    rank = job.rank
    torch.manual_seed(100 + rank)
    random.seed(200 + rank)
    np.random.seed(300 + rank)
    rng = rckpt.capture_rng()
    draws = (raw(torch.rand(6)), random.random(), np.random.rand())
    path = os.path.join(directory, "ck.rckpt")
    # Host copies of what each rank trained on its own GPU: the origin says which.
    rd.save(job.comm, path, state_of(rank, job.size, rd), rank_state=rank_state(rank),
            common=COMMON, rng=rng, metadata={"job": "python-mpi-test"},
            origin=f"cuda:{rank}", **SAVE_OPTIONS)
    # Other states in the generators, then the same world size resumes.
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    wants = {n: wanted(n, rank, job.size, rd, same_split=True) for n in TENSORS}
    back = rd.load(job.comm, path, wants, map_location="cpu")
    check_blocks(back, wants, rank)
    # A sharded tensor's origin is its lowest rank's; host-role tensors keep the host.
    assert back.origin["model.fc1.weight"] == back.origin["optimizer.state.0.exp_avg"] == "cuda:0"
    assert back.origin["optimizer.state.0.step"] == "cpu"
    assert back.rank_state == rank_state(rank)
    assert list(back.rng) == list(rng) and sorted(back.saved_rng) == list(range(SAVED_RANKS))
    restored = rckpt.restore_rng(back.rng)
    again = (raw(torch.rand(6)), random.random(), np.random.rand())
    assert torch.equal(again[0], draws[0]) and again[1:] == draws[1:], "RNG not restored"
    report(rank=rank, world=job.size, restored=restored.restored,
           bytes_read=back.bytes_read, bytes_needed=back.bytes_needed)


def scenario_load(job, rd, directory):
    rank, world = job.rank, job.size
    wants = {n: wanted(n, rank, world, rd, same_split=False) for n in TENSORS}
    # Each rank's model side on its own (host-emulated) GPU, as a job places it.
    back = rd.load(job.comm, os.path.join(directory, "ck.rckpt"), wants,
                   model_device=f"cuda:{rank}", emulate_devices=world, threads=1)
    check_blocks(back, wants, rank)
    for name in TENSORS:
        host = name.endswith(".step")
        assert back.placement[name] == ("cpu" if host else f"cuda:{rank}"), back.placement
    assert back.rank_state is None and len(back.rng) == 0, "another world size: no own RNG"
    assert sorted(back.saved_rng) == list(range(SAVED_RANKS))
    assert all("torch.cpu" in records for records in back.saved_rng.values())
    report(rank=rank, world=world, bytes_read=back.bytes_read, bytes_needed=back.bytes_needed,
           placement=back.placement)


def outcome(case, rank, fn):
    """Runs a call that should fail on every rank; reports the exception it raised."""
    try:
        fn()
        report(case=case, rank=rank, error=None, message=None)
    except Exception as e:  # noqa: BLE001  (the test compares what every rank raised)
        report(case=case, rank=rank, error=type(e).__name__,
               is_rckpt_error=isinstance(e, rckpt.Error), message=str(e))


def scenario_failures(job, rd, directory, data):
    rank, world = job.rank, job.size
    path = os.path.join(directory, "f.rckpt")
    good = state_of(rank, world, rd)
    rd.save(job.comm, path, good, rank_state=rank_state(rank), **SAVE_OPTIONS)
    with open(path, "rb") as f:
        before = f.read()

    def save(state, **kw):
        return lambda: rd.save(job.comm, path, state, **SAVE_OPTIONS, **kw)

    # Rank 1 gives fc1's block with a wrong global shape (its rows fit in it).
    bad = state_of(rank, world, rd)
    if rank == 1:
        s = bad["model"]["fc1.weight"]
        bad["model"]["fc1.weight"] = rd.Shard(s.block, s.offsets, (s.shape[0] + 1, s.shape[1]))
    outcome("wrong_global_shape", rank, save(bad))
    # Blocks that overlap: rank 2's starts one row early.
    bad = state_of(rank, world, rd)
    if rank == 2:
        s = bad["model"]["fc1.weight"]
        bad["model"]["fc1.weight"] = rd.Shard(s.block, (s.offsets[0] - 1, 0), s.shape)
    outcome("overlap", rank, save(bad))
    # Rank 1 may not grow files past 4 KiB (as a full disk): its write fails.
    if rank == 1:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    outcome("file_size_limit", rank, save(good))
    if rank == 1:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    # A directory that does not exist: made for the save (docs/DISTRIBUTED.md).
    outcome("missing_directory", rank, lambda: rd.save(
        job.comm, os.path.join(directory, "no", "f"), good, **SAVE_OPTIONS))
    # Values that cannot be stored, on one rank only: caught before any rank writes.
    bad = state_of(rank, world, rd)
    if rank == 2:
        bad["model"]["hook"] = object()
    outcome("unstorable_value", rank, save(bad))
    outcome("tensor_in_rank_state", rank,
            save(good, rank_state={"buf": torch.zeros(2)} if rank == 1 else rank_state(rank)))
    outcome("not_a_shard_on_one_rank", rank, save(
        {**good, "model": {**good["model"], "fc1.weight": global_tensor("model.fc1.weight")}}
        if rank == 2 else good))

    with open(path, "rb") as f:
        intact = f.read() == before
    temps = [n for n in os.listdir(directory) if ".tmp-" in n]
    report(case="previous_file", rank=rank, intact=intact, temps=temps)

    # Loads of files that are not what they should be, and bad requests.
    outcome("missing_file", rank, lambda: rd.load(
        job.comm, os.path.join(directory, "none.rckpt"), {"model.fc1.weight": None}))
    for name in ("manifest-bitflip.corruption", "truncated-half.corruption",
                 "newer-major-version.unsupported"):
        outcome(name, rank, lambda n=name: rd.load(
            job.comm, os.path.join(data, "golden-errors", n + ".rckpt"), {"step": None}))
    outcome("block_outside_tensor", rank, lambda: rd.load(
        job.comm, path, {"model.fc1.weight": ((0, 0), (49, 40)) if rank == 1 else None}))
    outcome("unknown_tensor", rank, lambda: rd.load(
        job.comm, path, {"model.fc9.weight" if rank == 0 else "model.fc1.weight": None}))
    outcome("bad_request", rank, lambda: rd.load(
        job.comm, path, {"model.fc1.weight": "rows" if rank == 2 else None}))

    def fails_on_rank_1(info):
        if rank == 1:
            raise KeyError(f"no device for {info['name']}")
        return None
    outcome("map_location_raises", rank, lambda: rd.load(
        job.comm, path, {"model.fc1.weight": None}, map_location=fails_on_rank_1))
    # The file is fine for a load with any request after all that.
    back = rd.load(job.comm, path, {"model.embed.weight": None})
    assert torch.equal(raw(back.blocks["model.embed.weight"]),
                       raw(global_tensor("model.embed.weight")))


def scenario_vanish(job, rd, directory):
    """Rank 1 stays away from the save (alive, as a stuck rank): the others
    raise IoError after the timeout, naming themselves, instead of waiting
    forever; rank 1 leaves once they have."""
    path = os.path.join(directory, "v.rckpt")
    others = [r for r in range(job.size) if r != 1]
    if job.rank == 1:
        report(case="vanish", rank=1, error="stayed away", message=None)
        deadline = time.monotonic() + 120
        while not all(os.path.exists(os.path.join(directory, f"done.{r}")) for r in others):
            assert time.monotonic() < deadline, "the other ranks never gave up"
            time.sleep(0.05)
        return
    outcome("vanish", job.rank, lambda: rd.save(job.comm, path, state_of(job.rank, job.size, rd),
                                                timeout=5, **SAVE_OPTIONS))
    report(case="vanish_file", rank=job.rank, exists=os.path.exists(path))
    open(os.path.join(directory, f"done.{job.rank}"), "w").close()


def scenario_kill(job, rd, directory):
    """A save that finished, then one rank killed in the middle of the next:
    the job ends (no rank hangs) and the first file is intact."""
    path = os.path.join(directory, "k.rckpt")
    rd.save(job.comm, path, state_of(job.rank, job.size, rd), **SAVE_OPTIONS)
    report(rank=job.rank, saved=True)

    def progress(done, total):
        if job.rank == 1 and done > 0:
            os.kill(os.getpid(), signal.SIGKILL)
    state = {"model": {"fc1.weight": rd.Shard.split(torch.full((256, 1024), 7.0), job.rank,
                                                    job.size)}}
    rd.save(job.comm, path, state, progress=progress, timeout=20, **SAVE_OPTIONS)
    report(rank=job.rank, saved_again=True)  # not reached: the save cannot succeed


class Job:
    """This process's place in the job, and what rckpt.distributed takes as ``comm``."""

    def __init__(self, rank, size, comm, abort, close=lambda: None):
        self.rank, self.size, self.comm, self.abort, self.close = rank, size, comm, abort, close


def job():
    """An mpi4py communicator under mpirun; torch.distributed's gloo group under torchrun."""
    if "TORCHELASTIC_RUN_ID" in os.environ or "RCKPT_TEST_LAUNCH" in os.environ:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        # comm=None: the default group, as a torchrun job writes it. The job
        # ends through launch.end_gloo_job (a torch bug aborts some exits).
        from launch import end_gloo_job
        return Job(dist.get_rank(), dist.get_world_size(), None, lambda: os._exit(1),
                   end_gloo_job)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    return Job(comm.rank, comm.size, comm, lambda: comm.Abort(1))


SCENARIOS: dict[str, Callable[..., None]] = {"save": scenario_save, "load": scenario_load, "failures": scenario_failures,
             "vanish": scenario_vanish, "kill": scenario_kill}


def main(argv):
    import rckpt.distributed as rd
    global _results
    me = job()
    try:
        _results = open(os.path.join(argv[2], f"{me.rank}.jsonl"), "w")
        SCENARIOS[argv[1]](me, rd, *argv[3:])
    except BaseException:  # noqa: BLE001  (end the whole job: the others may wait in a collective)
        sys.stderr.write(f"rank {me.rank}: FAIL\n{traceback.format_exc()}")
        sys.stderr.flush()
        me.abort()
    if argv[1] == "vanish":
        _results.close()  # type: ignore[union-attr]
        os._exit(0)  # collectives were left pending: do not wait in the teardown
    _results.close()  # type: ignore[union-attr]
    me.close()


if __name__ == "__main__":
    main(sys.argv)
