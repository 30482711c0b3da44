"""How a typed training script calls rckpt: checked by mypy (scripts/test.sh), never run.

Every call here is one the API takes at run time; mypy fails when an
annotation of rckpt rejects one of them, and assert_type fails when a
return type changes.
"""

from __future__ import annotations

import io
import os
import pathlib
import random
from typing import Any

import numpy as np
import torch
from mpi4py import MPI
from typing_extensions import assert_type

import rckpt


def save_and_load(model: torch.nn.Module, opt: torch.optim.Optimizer, path: pathlib.Path) -> None:
    rng = rckpt.capture_rng({"loader": np.random.default_rng(0), "gen": torch.Generator()})
    assert_type(rng, rckpt.RngState)
    record: rckpt.RngRecord = rng["python.random"]
    assert_type(record.data, bytes)
    rckpt.save(path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                      "controller": {"epoch": 3}}, rng=rng, codec="zstd", level=3,
               metadata={"run": "a", "step": 7}, origin="cuda:1", progress=True)
    rckpt.save(str(path), model.state_dict(), progress=lambda done, total: done < total)
    rckpt.save(os.fsencode(str(path)), torch.ones(3), origin={"model": torch.device("cuda", 0)})
    buf = io.BytesIO()
    rckpt.save(buf, {"model": model.state_dict()})
    with open(path, "wb") as f:
        rckpt.save(f, {"model": model.state_dict()}, progress=rckpt.ProgressBar("save"))

    ck = rckpt.load(path, map_location="cpu", sections=["model"], threads=4)
    model.load_state_dict(ck["model"])
    rckpt.load(path, map_location={"cuda:0": "cuda:1"})
    rckpt.load(path, map_location={"cuda:0": torch.device("cpu")})
    rckpt.load(path, map_location=torch.device("cpu"))
    rckpt.load(path, map_location=lambda storage, location: storage)
    rckpt.load(path, map_location=lambda info: None if info["role"] == "model" else "cpu")
    rckpt.load(path, model_device="auto", skip_sections=("optimizer",), verify=False)
    rckpt.load(io.BytesIO(buf.getvalue()), progress=False)
    with open(path, "rb") as f:
        rckpt.load(f, emulate_devices=2, file_tree=True)

    rckpt.load_into(path, {"model": model.state_dict()}, strict=False)
    report = rckpt.restore_rng(ck.rng, {"gen": torch.Generator()}, device_count=0,
                               cuda_set_state=lambda state, index: None)
    assert_type(report.restored, list[str])
    assert_type(report.skipped, list[str])
    assert_type(rckpt.cuda_device_count(), int)
    random.seed(0)


def checkpoint_fields(ck: rckpt.Checkpoint) -> None:
    assert_type(ck.rng, rckpt.RngState)
    assert_type(ck.tensors["model.w"], torch.Tensor)
    assert_type(ck.placement, dict[str, str])
    assert_type(ck.saved_world_size, int | None)
    assert_type(ck.to_dict(), dict[str, Any])
    ck["extra"] = {"note": "x"}
    del ck["extra"]


def errors(path: str) -> None:
    try:
        rckpt.load(path)
    except rckpt.NotFoundError as e:
        assert_type(e.code, str)
    except rckpt.Error:
        pass


def extension_modules() -> None:
    from rckpt import _core
    assert_type(_core.human_bytes(1 << 20), str)
    assert_type(_core.version, str)


def distributed(comm: MPI.Comm, weight: torch.Tensor) -> None:
    import rckpt.distributed as rd
    rd.save(comm, pathlib.Path("run/last.rckpt"),
            {"model": {"w": rd.Shard.split(weight, comm.rank, comm.size), "b": torch.ones(2)}},
            rank_state={"cursor": 1}, rng=rckpt.capture_rng(), progress=True)
    block = rd.part((4096, 1024), comm.rank, comm.size, dim=1)
    assert_type(block.offsets, tuple[int, ...])
    back = rd.load(comm, "run/last.rckpt",
                   {"model.w": block, "model.b": None, "model.c": ((0,), (4,))},
                   model_device="cpu")
    assert_type(back, rd.RankLoad)
    assert_type(back.blocks["model.w"], torch.Tensor)
    assert_type(back.saved_rng, dict[int, rckpt.RngState])
