"""`import rckpt.distributed` needs neither mpi4py nor an MPI run time: a job
launched by torchrun checkpoints through its torch.distributed process group
alone. Runs in a fresh interpreter where mpi4py cannot be imported."""

import os
import subprocess
import sys

import pytest
import torch

import rckpt
import rckpt.distributed as rd

PACKAGE_PARENT = os.path.dirname(os.path.dirname(rckpt.__file__))


CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "process_group_child.py")


def test_a_process_group_job_needs_no_mpi(tmp):
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    r = subprocess.run([sys.executable, CHILD, str(tmp)], capture_output=True, text=True,
                       env=env, cwd=tmp, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no MPI library loaded", r.stdout
    assert torch.equal(rckpt.load(tmp / "ck.rckpt")["model"]["w"], torch.ones(2, 3))


# Records every tensor handed to gloo (weakref callbacks count those whose last
# holder let go) and checks, each time one of rckpt.distributed's collectives
# returns, that gloo's worker holds none of them any more.
RELEASE_CHECK = r"""
import os, sys, weakref, torch, torch.distributed as dist
os.sched_setaffinity(0, {int(sys.argv[3])})  # gloo's threads too: made after this
import rckpt.distributed as rd
given, released = [], []
def spy(collective):
    def call(*args, **kwargs):
        for a in args:
            for t in (a if isinstance(a, list) else [a]):
                if isinstance(t, torch.Tensor):
                    given.append(weakref.ref(t, released.append))
        return collective(*args, **kwargs)
    return call
def check(method):
    def call(*args, **kwargs):
        result = method(*args, **kwargs)
        assert len(released) == len(given), (
            f"{method.__name__} returned while gloo held {len(given) - len(released)} of "
            f"its tensors")
        return result
    return call
dist.all_gather, dist.broadcast = spy(dist.all_gather), spy(dist.broadcast)
rd._TorchComm.allgather = check(rd._TorchComm.allgather)
rd._TorchComm.broadcast = check(rd._TorchComm.broadcast)
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
try:
    for i in range(40):
        rd.save(None, sys.argv[2], {"model": {"w": torch.full((3,), float(i))}})
        back = rd.load(None, sys.argv[2], {"model.w": None})
        assert torch.equal(back.blocks["model.w"], torch.full((3,), float(i)))
    print(len(given), "tensors given to gloo, every one let go when its collective returned")
finally:
    dist.destroy_process_group()
"""


def test_collectives_return_once_gloo_let_go_of_their_tensors(tmp):
    """What keeps a job's exit from aborting (docs/DISTRIBUTED.md): gloo's worker
    lets go of a finished collective a moment after it returns, and
    rckpt.distributed waits for that moment. The job shares one CPU with a
    busy process, which makes the moment late often enough: without the wait
    some collective of the 80 calls returns before it."""
    cpu = min(os.sched_getaffinity(0))
    spin = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
        r = subprocess.run([sys.executable, "-c", RELEASE_CHECK, str(tmp / "rendezvous"),
                            str(tmp / "ck.rckpt"), str(cpu)], capture_output=True, text=True,
                           env=env, cwd=tmp, timeout=600)
    finally:
        busy.kill()
        busy.wait()
    assert r.returncode == 0, r.stderr
    given = int(r.stdout.split()[0])
    assert given >= 80, r.stdout  # a collective or more in each call


def test_comm_none_without_torch_distributed_says_what_to_do(tmp):
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        pytest.skip("torch.distributed is initialised in this process")
    with pytest.raises(ValueError, match=r"init_process_group\(\) first"):
        rd.save(None, tmp / "ck.rckpt", {"model": {"w": torch.ones(2)}})
    with pytest.raises(TypeError, match="comm must be a torch.distributed ProcessGroup, an "
                                        "mpi4py communicator or None"):
        rd.load("world", tmp / "ck.rckpt", {"model.w": None})
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        rd.save(None, tmp / "ck.rckpt", {"model": {"w": torch.ones(2)}}, timeout=0)
