"""Writes the torch.distributed.checkpoint (DCP) fixtures under tests/data/dcp/.

Run with a torch 2.x that has torch.distributed.checkpoint (the committed files
were made with torch 2.15 on CPU):

    python tests/data/make_dcp_fixture.py tests/data/dcp

Every tensor holds known values (arange-based) so the C++ tests
(tests/convert/dcp_import_test.cc) check them without torch:

- simple/: one process; nested dicts, a list, a key containing a dot, bf16,
  int64, bool and 0-d tensors, non-tensor values.
- sharded2/: two processes (gloo on CPU, mp.spawn); DTensors sharded on dim 0
  (uneven, 5 rows) and on dim 1, a replicated DTensor and a plain value.
- bad_dtype/, bad_shape/, overlap/, escape/ (paths leaving the directory),
  transformed/ (DCP stream extensions), hostile/, hostile_getattr/: damaged
  or hostile .metadata files (copies of the above rewritten).
"""

import os
import pickle
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp


def simple_state():
    return {
        "model": {
            "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "b": torch.arange(3, dtype=torch.float32).to(torch.bfloat16),
        },
        "optim": {
            "state": {"layer.0.weight": {"step": torch.tensor(5.0),
                                         "exp_avg": torch.arange(4, dtype=torch.float64)}},
            "param_groups": [{"lr": 0.125, "params": ["layer.0.weight"]}],
        },
        "lst": [torch.arange(2, dtype=torch.int64), 3.5, None, True],
        "mask": torch.tensor([True, False, True]),
        # DCP stores nothing for the empty dict: the list comes back with None there.
        "holes": [{}, {"a": torch.arange(2, dtype=torch.int16)}],
        # DCP flattens dicts and lists only: the tuple is stored whole (torch.save).
        "pair": (torch.arange(3, dtype=torch.uint8), "tag"),
        "step": 7,
        "name": "run-1",
    }


def sharded_worker(rank, world, out, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    rows = torch.arange(15, dtype=torch.float32).reshape(5, 3)       # 3 + 2 rows
    cols = torch.arange(24, dtype=torch.int32).reshape(4, 6)         # 3 + 3 columns
    rep = torch.arange(4, dtype=torch.float64)
    state = {
        "model": {
            "rows": distribute_tensor(rows, mesh, [Shard(0)]),
            "cols": distribute_tensor(cols, mesh, [Shard(1)]),
            "rep": distribute_tensor(rep, mesh, [Replicate()]),
        },
        "epoch": 3,
    }
    dcp.save(state, checkpoint_id=out)
    dist.barrier()
    dist.destroy_process_group()


def rewrite_metadata(src, dst, change):
    shutil.copytree(src, dst)
    with open(os.path.join(dst, ".metadata"), "rb") as f:
        md = pickle.load(f)
    change(md)
    with open(os.path.join(dst, ".metadata"), "wb") as f:
        pickle.dump(md, f)


def clear_checkpoint_id(md):
    # The checkpoint id is the absolute path it was saved to: not worth
    # committing.
    if getattr(md, "storage_meta", None) is not None:
        md.storage_meta.checkpoint_id = None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "tests/data/dcp")
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)

    simple = os.path.join(root, "simple")
    dcp.save(simple_state(), checkpoint_id=simple, no_dist=True)
    sharded = os.path.join(root, "sharded2")
    mp.spawn(sharded_worker, args=(2, sharded, 29517), nprocs=2, join=True)
    for d in (simple, sharded):
        tmp = d + ".tmp"
        rewrite_metadata(d, tmp, clear_checkpoint_id)
        shutil.rmtree(d)
        os.rename(tmp, d)

    def wrong_dtype(md):
        md.state_dict_metadata["model.w"].properties.dtype = torch.float64

    def wrong_shape(md):
        tsm = md.state_dict_metadata["model.w"]
        tsm.size = torch.Size([3, 2])
        tsm.chunks[0].sizes = torch.Size([3, 2])

    def overlap(md):
        chunks = md.state_dict_metadata["model.rows"].chunks
        # Both chunks keep their bytes; the second claims to start at row 2,
        # overlapping the first (rows 0..2) and leaving row 4 uncovered.
        index = [k for k in md.storage_data if k.fqn == "model.rows" and k.offset[0] == 3][0]
        info = md.storage_data.pop(index)
        chunks[1].offsets = torch.Size([2, 0])
        md.storage_data[type(index)("model.rows", torch.Size([2, 0]), index.index)] = info

    rewrite_metadata(simple, os.path.join(root, "bad_dtype"), wrong_dtype)
    rewrite_metadata(simple, os.path.join(root, "bad_shape"), wrong_shape)
    rewrite_metadata(sharded, os.path.join(root, "overlap"), overlap)

    def escape(md):
        for info in md.storage_data.values():
            info.relative_path = "../simple/" + info.relative_path

    def transformed(md):
        for info in md.storage_data.values():
            info.transform_descriptors = ["zstd"]

    rewrite_metadata(simple, os.path.join(root, "escape"), escape)
    rewrite_metadata(simple, os.path.join(root, "transformed"), transformed)

    # A .metadata that would run a shell command if unpickled by pickle.load.
    os.makedirs(os.path.join(root, "hostile"))
    marker = "/tmp/rckpt-dcp-hostile-ran"
    with open(os.path.join(root, "hostile", ".metadata"), "wb") as f:
        f.write(b"\x80\x04cos\nsystem\n(X" + len("touch " + marker).to_bytes(4, "little") +
                ("touch " + marker).encode() + b"tR.")
    # getattr used on something else than an allowed enum: getattr(Metadata, "__init__").
    os.makedirs(os.path.join(root, "hostile_getattr"))
    with open(os.path.join(root, "hostile_getattr", ".metadata"), "wb") as f:
        f.write(b"\x80\x04cbuiltins\ngetattr\n(ctorch.distributed.checkpoint.metadata\n"
                b"Metadata\nX\x08\x00\x00\x00__init__tR)R.")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        main()
