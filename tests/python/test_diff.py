"""`rckpt diff` compares state, not container shapes; `rckpt convert` keeps
what each format can carry: Python-saved RNG records survive .pt and
.safetensors, and files of the same state written by torch, safetensors, DCP
and rckpt.dcp.Writer are identical by default (and not under --strict)."""

import json
import random

import numpy as np
import pytest
import torch

import rckpt
from conftest import run_cli


def small_model_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    model(torch.randn(8, 4))  # running statistics move
    return model.state_dict()


def test_rng_records_captured_by_python_survive_pt_and_safetensors(tmp):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    w = torch.randn(3, 4)
    cpu_state, py_state = torch.get_rng_state(), random.getstate()
    rckpt.save(tmp / "a.rckpt", {"model": {"w": w}, "epoch": 3}, rng=rckpt.capture_rng(),
               metadata={"run": "r1"})
    for chain in (["back.pt", "rt.rckpt"], ["back.safetensors", "rt.rckpt"],
                  ["back.pt", "back.safetensors", "rt.rckpt"]):
        src = tmp / "a.rckpt"
        for out in chain:
            r = run_cli("convert", src, tmp / out)
            assert r.returncode == 0, r.stderr
            assert "warning" not in r.stderr, r.stderr
            src = tmp / out
        d = run_cli("diff", "--strict", tmp / "a.rckpt", tmp / "rt.rckpt")
        assert d.returncode == 0, f"{chain}: {d.stdout}{d.stderr}"
    ck = rckpt.load(tmp / "rt.rckpt")
    assert set(ck.rng) >= {"python.random", "numpy.global", "torch.cpu"}
    # The .pt between is what torch.load reads: the states as uint8 tensors
    # (numpy's, torch's) and random.getstate()'s tuple.
    plain = torch.load(tmp / "back.pt", weights_only=True)
    assert torch.equal(plain["torch.cpu"], cpu_state)
    assert plain["python.random"] == py_state


def test_torch_state_dict_and_its_safetensors_file_are_the_same_state(tmp):
    safetensors = pytest.importorskip("safetensors.torch",
                                      reason="safetensors is not installed")
    sd = small_model_state()
    torch.save(sd, tmp / "sd.pt")
    safetensors.save_file(dict(sd), tmp / "sd.safetensors")
    d = run_cli("diff", tmp / "sd.pt", tmp / "sd.safetensors")
    assert d.returncode == 0, d.stdout + d.stderr
    assert "state tree: B does not record one" in d.stdout
    assert run_cli("diff", "--strict", tmp / "sd.pt", tmp / "sd.safetensors").returncode == 1
    assert run_cli("diff", "--tensors-only", tmp / "sd.pt", tmp / "sd.safetensors").returncode == 0
    # A changed tensor is a difference in every mode.
    sd["0.weight"][0, 0] += 1
    safetensors.save_file(dict(sd), tmp / "changed.safetensors")
    for mode in ([], ["--strict"], ["--tensors-only"]):
        d = run_cli("diff", *mode, "--json", tmp / "sd.pt", tmp / "changed.safetensors")
        assert d.returncode == 1, mode
        report = json.loads(d.stdout)
        assert report["schema_version"] == 2
        assert [x["name"] for x in report["differences"] if x["kind"] == "tensor"] == ["0.weight"]


def test_dcp_directory_and_its_rckpt_writer_file_are_the_same_state(tmp):
    dcp = pytest.importorskip(
        "torch.distributed.checkpoint",
        reason=f"torch.distributed.checkpoint is absent from torch {torch.__version__}; "
               "tests/tools/diff_test.cc checks the committed fixtures of tests/data/diff")
    if not hasattr(dcp, "save"):
        pytest.skip(f"torch {torch.__version__} has no dcp.save (torch >= 2.2); "
                    "tests/tools/diff_test.cc checks the committed fixtures of tests/data/diff")
    import rckpt.dcp
    torch.manual_seed(1)
    # Lists both store as lists: param_groups, lists of tensors and values.
    state = {"model": dict(small_model_state()), "epoch": 3, "note": "x",
             "optim": {"lr": 1e-3, "betas": (0.9, 0.999),
                       "param_groups": [{"lr": 1e-3, "params": ["0.weight", "0.bias"]},
                                        {"lr": 0.0, "params": ["1.weight"]}]},
             "layers": [torch.randn(3), [torch.randn(2), 4, [0.5, "gelu"]], {"w": torch.randn(2)}]}
    dcp.save(state, checkpoint_id=str(tmp / "dcp"), no_dist=True)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "w.rckpt"), no_dist=True)
    d = run_cli("diff", "--json", tmp / "dcp", tmp / "w.rckpt")
    assert d.returncode == 0, d.stdout + d.stderr
    report = json.loads(d.stdout)
    assert report["mode"] == "state" and report["identical"]
    assert {n["what"] for n in report["not_compared"]} == {
        "sections and roles", "origin devices", "key order", "metadata"}
    assert run_cli("diff", "--strict", tmp / "dcp", tmp / "w.rckpt").returncode == 1
    # Both convert to the same .rckpt state.
    assert run_cli("convert", tmp / "dcp", tmp / "from_dcp.rckpt").returncode == 0
    d = run_cli("diff", tmp / "from_dcp.rckpt", tmp / "w.rckpt")
    assert d.returncode == 0, d.stdout + d.stderr
