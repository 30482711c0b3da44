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


def run(code, cwd):
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_a_process_group_job_needs_no_mpi(tmp):
    r = run("import sys\n"
            "sys.modules['mpi4py'] = None  # as if it were not installed\n"
            "import torch, torch.distributed as dist\n"
            "import rckpt.distributed as rd\n"
            "dist.init_process_group('gloo', init_method='file://./store', rank=0, world_size=1)\n"
            "rd.save(None, 'ck.rckpt', {'model': {'w': rd.Shard(torch.ones(2, 3), (0, 0), (2, 3))}})\n"
            "back = rd.load(dist.group.WORLD, 'ck.rckpt', {'model.w': None})\n"
            "assert torch.equal(back.blocks['model.w'], torch.ones(2, 3))\n"
            "maps = open('/proc/self/maps').read()\n"
            "print('libmpi loaded' if 'libmpi' in maps else 'no MPI library loaded')\n", tmp)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no MPI library loaded", r.stdout
    assert torch.equal(rckpt.load(tmp / "ck.rckpt")["model"]["w"], torch.ones(2, 3))


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
