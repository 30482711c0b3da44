"""The job side of test_s3_distributed.py: one rank of a job that saves to or
loads from one object in S3 with rckpt.distributed, over a gloo process group
(RANK, WORLD_SIZE, and RCKPT_JOB_STORE: a temporary file for the rendezvous)
or mpi4py's COMM_WORLD (under mpiexec: RCKPT_JOB_STORE unset).

    s3_distributed_job.py save URL STEP OUT   save step STEP's state, then load it back
                                              at this world size and check it
    s3_distributed_job.py load URL STEP OUT   load at this world size and check step STEP
    s3_distributed_job.py manager PREFIX STEP OUT
                                              a CheckpointManager(PREFIX, comm=, keep=2)
                                              saves steps 1..STEP; rank 0 truncates the
                                              newest step's object; every rank loads
                                              (the step before) and checks it

Each rank writes OUT/<rank>.json: {"rank", "ok", "error"} (the exception's
class and message when it raised; the manager's also "steps", "loaded" and
"warned"). The S3 server is reached through the AWS_* environment.
"""

import json
import os
import sys
import traceback
import zlib

import torch

import rckpt.distributed as rd

# name -> dtype, global shape; every tensor is split by rows but the 0-d one.
TENSORS = {
    "model.w": (torch.float32, (96, 1024)),
    "model.b": (torch.bfloat16, (33,)),
    "optimizer.m": (torch.float64, (10007,)),
    "optimizer.step": (torch.int64, ()),
}


def global_tensor(name, step):
    dtype, shape = TENSORS[name]
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()) + 7919 * step)
    n = 1
    for s in shape:
        n *= s
    n *= torch.tensor([], dtype=dtype).element_size()
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).view(dtype).reshape(shape)


def state_of(rank, world, step):
    state = {}
    for name in TENSORS:
        section, key = name.split(".", 1)
        t = global_tensor(name, step)
        state.setdefault(section, {})[key] = t if t.dim() == 0 else rd.Shard.split(t, rank, world)
    state["controller"] = {"step": step}
    return state


def wants_of(rank, world):
    """This rank's rows of every tensor (the 0-d one whole)."""
    return {name: (None if not TENSORS[name][1] else rd.part(TENSORS[name][1], rank, world))
            for name in TENSORS}


def check_load(comm, url, step, rank, world):
    wants = wants_of(rank, world)
    return check_loaded(rd.load(comm, url, wants, timeout=120), wants, step, rank, world)


def check_loaded(back, wants, step, rank, world):
    """back (a RankLoad of ``wants``) holds step ``step``'s blocks and this rank's tree."""
    assert back["controller"] == {"step": step}, back["controller"]
    for name, block in wants.items():
        want = global_tensor(name, step)
        if block is not None:
            want = want.narrow(0, block.offsets[0], block.sizes[0])
        got = back.blocks[name]
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.shape)
        assert torch.equal(got.reshape(-1).view(torch.uint8),
                           want.contiguous().reshape(-1).view(torch.uint8)), name
    if back.saved_world_size == world:
        assert back.rank_state == {"rank": rank}, back.rank_state
    return back


def run_manager(comm, prefix, last, rank, world, record):
    """The manager mode (see the module's docstring)."""
    import warnings

    import rckpt
    from rckpt import storage

    mgr = rckpt.CheckpointManager(prefix, comm=comm, keep=2, timeout=120)
    for step in range(1, last + 1):
        mgr.save(step, state_of(rank, world, step), rank_state={"rank": rank})
    record["steps"] = mgr.steps()
    if rank == 0:
        whole = storage.read(mgr.path(last))
        storage.write(mgr.path(last), whole[:len(whole) // 2])
    mgr.steps()  # every rank waits for rank 0's damage (a collective)
    wants = wants_of(rank, world)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        back = mgr.load(wants=wants)
    record["loaded"] = mgr.loaded_step
    record["warned"] = [str(w.message) for w in caught]
    check_loaded(back, wants, last - 1, rank, world)
    mgr.close()


def main(argv):
    mode, url, step, out = argv[1], argv[2], int(argv[3]), argv[4]
    store = os.environ.get("RCKPT_JOB_STORE")
    if store:
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                                world_size=world)
        comm = None
    else:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank, world = comm.Get_rank(), comm.Get_size()
    record: dict[str, object] = {"rank": rank, "ok": True, "error": None}
    try:
        if mode == "manager":
            import torch.distributed as dist
            run_manager(dist.group.WORLD if store else comm, url, step, rank, world, record)
        else:
            if mode == "save":
                rd.save(comm, url, state_of(rank, world, step), rank_state={"rank": rank},
                        codec=os.environ.get("RCKPT_JOB_CODEC", "none"), timeout=120)
            check_load(comm, url, step, rank, world)
    except Exception as e:  # noqa: BLE001  (reported to the test)
        record = {"rank": rank, "ok": False, "error": [type(e).__name__, str(e)]}
        traceback.print_exc()
    with open(os.path.join(out, f"{rank}.json"), "w") as f:
        json.dump(record, f)
    sys.stdout.flush()
    sys.stderr.flush()
    if not store:
        return  # mpi4py finalises MPI at the interpreter's exit
    import torch.distributed as dist
    if record["ok"]:
        dist.destroy_process_group()
    # After a failure a peer may be gone (killed), and gloo's teardown may
    # wait for it: the process ends, and the group with it. gloo's threads
    # may also release tensors during the interpreter's shutdown
    # (launch.py's end_gloo_job): end without it.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
