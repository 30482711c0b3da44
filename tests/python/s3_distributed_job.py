"""The job side of test_s3_distributed.py: one rank of a job that saves to or
loads from one object in S3 with rckpt.distributed, over a gloo process group
(RANK, WORLD_SIZE, and RCKPT_JOB_STORE: a temporary file for the rendezvous)
or mpi4py's COMM_WORLD (under mpiexec: RCKPT_JOB_STORE unset).

    s3_distributed_job.py save URL STEP OUT   save step STEP's state, then load it back
                                              at this world size and check it
    s3_distributed_job.py load URL STEP OUT   load at this world size and check step STEP

Each rank writes OUT/<rank>.json: {"rank", "ok", "error"} (the exception's
class and message when it raised). The S3 server is reached through the
AWS_* environment.
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


def check_load(comm, url, step, rank, world):
    wants = {name: (None if not TENSORS[name][1] else rd.part(TENSORS[name][1], rank, world))
             for name in TENSORS}
    back = rd.load(comm, url, wants, timeout=120)
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
