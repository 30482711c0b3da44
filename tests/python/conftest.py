"""Shared helpers of the Python package's tests."""

import os
import importlib.util
import re
import shutil
import subprocess
import sys

import pytest
import torch

import rckpt

CLI = os.environ.get("RCKPT_CLI", "rckpt")
DATA = os.environ.get("RCKPT_TEST_DATA_DIR",
                      os.path.join(os.path.dirname(__file__), "..", "data"))
SOURCE = os.environ.get("RCKPT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (tests/gpu/run.sh runs these)")


def pytest_report_header(config):
    return (f"rckpt {rckpt.__version__} ({rckpt._core.__file__}); torch {torch.__version__} "
            f"({torch.__file__}); python {sys.version.split()[0]}")


def doc_example(doc, name, directory):
    """Writes the example of docs/<doc> marked ``<!-- example: <name> -->`` to directory/name."""
    with open(os.path.join(SOURCE, "docs", doc)) as f:
        text = f.read()
    m = re.search(r"<!-- example: " + re.escape(name) + r" -->\n```python\n(.*?)```", text, re.S)
    assert m, f"docs/{doc} lost its example {name}"
    path = directory / name
    path.write_text(m.group(1))
    return path


def run_cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)


def raw_bytes(t):
    """A tensor's bytes as a flat uint8 tensor (bitwise comparisons: NaN payloads, -0.0)."""
    return t.detach().contiguous().cpu().reshape(-1).view(torch.uint8)


def assert_same(a, b, path="state"):
    """Equal bit for bit: same types, same key order, same tensor bytes, dtype, shape, device."""
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert a.device == b.device, f"{path}: device {a.device} != {b.device}"
        assert torch.equal(raw_bytes(a), raw_bytes(b)), f"{path}: bytes differ"
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert type(k) is type(list(b.keys())[list(a.keys()).index(k)]), f"{path}: key type"
            assert_same(a[k], b[k], f"{path}.{k}")
        assert vars(a) == vars(b) if hasattr(a, "__dict__") else True, f"{path}: attributes"
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}.{i}")
    elif isinstance(a, float):
        assert a.hex() == b.hex() or (a != a and b != b), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


DCP_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dcp_driver.py")


def dcp_or_skip():
    """torch.distributed.checkpoint for a suite of rckpt.dcp, or a skip of the whole
    module on a torch without it, its async_save or DTensor (torch 2.x has them)."""
    dcp = pytest.importorskip("torch.distributed.checkpoint",
                              reason="this torch has no torch.distributed.checkpoint (torch 2.x)")
    if not hasattr(dcp, "async_save") or not hasattr(torch.distributed, "tensor"):
        pytest.skip(f"torch {torch.__version__}: DCP without async_save or DTensor",
                    allow_module_level=True)
    return dcp


def mpiexec_or_skip(what):
    """mpiexec for a suite that runs under mpirun, or a skip of the whole
    module (``what`` says which suite) naming what is missing."""
    skip = f"{what} skipped: "
    mpiexec = os.environ.get("RCKPT_MPIEXEC") or shutil.which("mpiexec")
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip(skip + "mpi4py is not installed (Debian: python3-mpi4py)",
                    allow_module_level=True)
    if not mpiexec:
        pytest.skip(skip + "no mpiexec on PATH", allow_module_level=True)
    return mpiexec
