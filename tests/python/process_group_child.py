"""A one-process torch.distributed job that checkpoints through rckpt.distributed
with mpi4py hidden, as test_distributed_import.py runs it:

    python process_group_child.py DIRECTORY

Writes DIRECTORY/ck.rckpt, loads it back and prints whether an MPI library
was loaded. The rendezvous file is a fresh one in DIRECTORY (never a shared
path), and the group is destroyed before the interpreter exits, also when
the job fails. stress_process_group_exit.py runs it many times under load:
the exit must never abort.
"""

import os
import sys

sys.modules["mpi4py"] = None  # type: ignore[assignment]  # as if it were not installed

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import rckpt.distributed as rd  # noqa: E402


def main(directory):
    path = os.path.join(directory, "ck.rckpt")
    store = os.path.join(directory, "rendezvous")
    dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
    try:
        rd.save(None, path, {"model": {"w": rd.Shard(torch.ones(2, 3), (0, 0), (2, 3))}})
        back = rd.load(dist.group.WORLD, path, {"model.w": None})
        assert torch.equal(back.blocks["model.w"], torch.ones(2, 3))
    finally:
        dist.destroy_process_group()
    with open("/proc/self/maps") as f:
        print("libmpi loaded" if "libmpi" in f.read() else "no MPI library loaded")


if __name__ == "__main__":
    main(sys.argv[1])
