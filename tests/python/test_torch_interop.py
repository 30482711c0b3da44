"""A file saved from Python and the same state's torch.save, converted by the
CLI, are identical to `rckpt diff`; the CLI reads Python-saved files."""

import json

import torch

import rckpt
from conftest import run_cli
from test_roundtrip import train_state


def test_diff_python_save_vs_torch_save_reports_identical(tmp):
    state = train_state(steps=4)
    state["controller"]["shape"] = torch.Size([3, 4])
    state["controller"]["dtype"] = torch.float16
    state["controller"]["device"] = torch.device("cpu")
    state["controller"]["big"] = 2**80
    state["metrics"]["per_key"] = {1: 0.5, 2: 0.25}
    rckpt.save(tmp / "py.rckpt", state)
    torch.save(state, tmp / "state.pt")
    conv = run_cli("convert", tmp / "state.pt", tmp / "conv.rckpt")
    assert conv.returncode == 0, conv.stderr
    for other in ("conv.rckpt", "state.pt"):
        d = run_cli("diff", tmp / "py.rckpt", tmp / other)
        assert d.returncode == 0, other + ": " + d.stdout + d.stderr
    # And a real difference is reported.
    state["controller"]["epoch"] = 8
    rckpt.save(tmp / "py2.rckpt", state)
    assert run_cli("diff", tmp / "py2.rckpt", tmp / "conv.rckpt").returncode == 1


def test_cli_inspects_and_verifies_a_python_saved_file(tmp):
    rckpt.save(tmp / "a.rckpt", {"model": {"w": torch.ones(2, 3)}}, origin="cuda:1",
               rng=rckpt.capture_rng(), codec="zstd")
    assert run_cli("verify", tmp / "a.rckpt").returncode == 0
    ins = json.loads(run_cli("inspect", "--json", tmp / "a.rckpt").stdout)
    tensors = {t["name"]: t for t in ins["tensors"]}
    assert tensors["model.w"]["device"] == "cuda:1"
    assert tensors["model.w"]["dtype"] == "f32"


def test_python_loads_a_converted_torch_file_with_its_rng(tmp):
    torch.manual_seed(11)
    state = {"model": {"w": torch.randn(3)}, "torch_rng_state": torch.get_rng_state()}
    torch.save(state, tmp / "h.pt")
    assert run_cli("convert", tmp / "h.pt", tmp / "h.rckpt").returncode == 0
    ck = rckpt.load(tmp / "h.rckpt")
    assert torch.equal(ck["model"]["w"], state["model"]["w"])  # type: ignore[index]
    # The RNG record comes back as torch's form: a uint8 CPU tensor.
    torch.set_rng_state(ck["torch_rng_state"])
    assert torch.equal(torch.get_rng_state(), state["torch_rng_state"])  # type: ignore[arg-type]
