"""The job side of test_dcp.py, run under torchrun on gloo (CPU), one scenario a run:

    dcp_driver.py save OUT DIR   the ranks save one state dict of DTensors, whole tensors
                                 and values (some in lists) three ways: dcp.save through rckpt.dcp.Writer
                                 (DIR/ck.rckpt), dcp.async_save through it (DIR/async.rckpt),
                                 and dcp.save through DCP's FileSystemWriter (DIR/ref/)
    dcp_driver.py load OUT DIR   any number of ranks load DIR/ck.rckpt and DIR/async.rckpt
                                 with rckpt.dcp.Reader, and DIR/ref with FileSystemReader,
                                 into DTensors sharded another way, and compare
    dcp_driver.py s3 OUT PREFIX  dcp.save to PREFIX + "ck.rckpt" and dcp.async_save to
                                 PREFIX + "async.rckpt" (s3:// URLs, as checkpoint_id),
                                 then dcp.load of both resharded (test_s3_dcp.py)

Every rank checks its own tensors against the global ones (an assertion
failure fails the job) and writes what it saw to OUT/<rank>.jsonl.
"""

import json
import os
import sys
import traceback
import zlib
from typing import Any

import torch

# name -> dtype, global shape, the dimension the saving job shards it along
# (None: a whole tensor, which DCP treats as replicated).
TENSORS = {
    "model.w1": (torch.float32, (64, 24), 0),
    "model.w2": (torch.bfloat16, (20, 36), 1),
    "model.bias": (torch.float32, (24,), None),
    "optim.state.w1.exp_avg": (torch.float32, (64, 24), 0),
    "optim.state.w1.step": (torch.float32, (), None),
    # In a list: on ranks other than the coordinator, which writes the whole
    # tensor, the DTensor's list has no item 0.
    "layers.0": (torch.float32, (5,), None),
    "layers.1.w": (torch.float32, (12, 8), 0),
}
VALUES: dict[str, Any] = {"optim": {"param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": ["w1"]}]},
          "extra": {"epoch": 3, "name": "run-7", "best": None}}


def global_tensor(name):
    dtype, shape, _ = TENSORS[name]
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    return torch.randn(shape, generator=g).to(dtype)


def nested(leaf):
    """The state dict with leaf(name) at each tensor's place, and the values."""
    return {
        "model": {"w1": leaf("model.w1"), "w2": leaf("model.w2"), "bias": leaf("model.bias")},
        "optim": {"state": {"w1": {"exp_avg": leaf("optim.state.w1.exp_avg"),
                                   "step": leaf("optim.state.w1.step")}},
                  "param_groups": [dict(g) for g in VALUES["optim"]["param_groups"]]},
        "extra": dict(VALUES["extra"]),
        "layers": [leaf("layers.0"), {"w": leaf("layers.1.w"), "scale": 0.5}],
    }


def state_dict(mesh, shard_dim_of):
    """The job's state: DTensors sharded as shard_dim_of(name) says, whole tensors."""
    from torch.distributed.tensor import Shard, distribute_tensor

    def leaf(name):
        dim = shard_dim_of(name)
        t = global_tensor(name)
        return t.clone() if dim is None else distribute_tensor(t, mesh, [Shard(dim)])
    return nested(leaf)


def empty_like_state(mesh, shard_dim_of):
    """A destination of the same layout, its tensors zero."""
    from torch.distributed.tensor import Shard, distribute_tensor

    def leaf(name):
        dim = shard_dim_of(name)
        t = torch.zeros_like(global_tensor(name))
        return t if dim is None else distribute_tensor(t, mesh, [Shard(dim)])
    sd = nested(leaf)
    sd["optim"]["param_groups"] = [{"lr": 0.0, "betas": (0.0, 0.0), "params": [""]}]
    sd["extra"] = {"epoch": 0, "name": "", "best": 1.0}
    sd["layers"][1]["scale"] = 0.0
    return sd


def raw(t):
    """A tensor's bytes (bitwise comparison)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def check(sd, what):
    """The state dict holds every tensor bit for bit, and the values."""
    from torch.distributed.tensor import DTensor
    for name in TENSORS:
        node = sd
        for k in name.split("."):
            node = node[int(k)] if isinstance(node, list) else node[k]
        whole = node.full_tensor() if isinstance(node, DTensor) else node
        expected = global_tensor(name)
        assert whole.dtype == expected.dtype and whole.shape == expected.shape, (what, name)
        assert torch.equal(raw(whole), raw(expected)), f"{what}: {name} differs"
    assert sd["optim"]["param_groups"] == VALUES["optim"]["param_groups"], (what, sd["optim"])
    assert sd["extra"] == VALUES["extra"], (what, sd["extra"])
    assert sd["layers"][1]["scale"] == 0.5, (what, sd["layers"])


_results: Any = None  # this rank's OUT/<rank>.jsonl


def report(**fields):
    _results.write(json.dumps(fields) + "\n")
    _results.flush()


def scenario_save(rank, world, directory):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    import rckpt.dcp
    mesh = init_device_mesh("cpu", (world,))
    sd = state_dict(mesh, lambda name: TENSORS[name][2])
    dcp.save(sd, storage_writer=rckpt.dcp.Writer(os.path.join(directory, "ck.rckpt")))
    future = dcp.async_save(sd, storage_writer=rckpt.dcp.Writer(
        os.path.join(directory, "async.rckpt"), codec="zstd", chunk_bytes=1024))
    future.result()
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(os.path.join(directory, "ref")))
    report(rank=rank, world=world, saved=True)


def scenario_load(rank, world, directory):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    import rckpt.dcp
    mesh = init_device_mesh("cpu", (world,))
    # Resharded: what the saving job split by rows is split by columns, and the
    # other way round; whole tensors stay whole.
    other = {0: 1, 1: 0, None: None}

    def shard_dim_of(name):
        return other[TENSORS[name][2]]
    for source in ("ck.rckpt", "async.rckpt", "ref"):
        sd = empty_like_state(mesh, shard_dim_of)
        path = os.path.join(directory, source)
        reader = (dcp.FileSystemReader(path) if source == "ref" else rckpt.dcp.Reader(path))
        dcp.load(sd, storage_reader=reader)
        check(sd, source)
    report(rank=rank, world=world, loaded=True)


def scenario_s3(rank, world, prefix):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    import rckpt.dcp
    mesh = init_device_mesh("cpu", (world,))
    sd = state_dict(mesh, lambda name: TENSORS[name][2])
    dcp.save(sd, checkpoint_id=prefix + "ck.rckpt", storage_writer=rckpt.dcp.Writer())
    future = dcp.async_save(sd, checkpoint_id=prefix + "async.rckpt",
                            storage_writer=rckpt.dcp.Writer(codec="zstd"))
    future.result()
    other = {0: 1, 1: 0, None: None}
    for name in ("ck.rckpt", "async.rckpt"):
        back = empty_like_state(mesh, lambda n: other[TENSORS[n][2]])
        dcp.load(back, checkpoint_id=prefix + name, storage_reader=rckpt.dcp.Reader())
        check(back, name)
    report(rank=rank, world=world, saved=True, loaded=True)


def main(argv):
    import torch.distributed as dist
    global _results
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        _results = open(os.path.join(argv[2], f"{rank}.jsonl"), "w")
        {"save": scenario_save, "load": scenario_load, "s3": scenario_s3}[argv[1]](rank, world, *argv[3:])
    except BaseException:  # noqa: BLE001  (end the whole job)
        sys.stderr.write(f"rank {rank}: FAIL\n{traceback.format_exc()}")
        sys.stderr.flush()
        os._exit(1)
    _results.close()
    from launch import end_gloo_job
    end_gloo_job()  # a torch bug aborts some exits (launch.py)


if __name__ == "__main__":
    main(sys.argv)
