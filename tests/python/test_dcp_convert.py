"""`rckpt convert DIR out.rckpt` of torch.distributed.checkpoint (DCP) directories:
rckpt.load of the result gives what dcp.load gives from the original."""

import os

import pytest
import torch

import rckpt
from conftest import DATA, assert_same, run_cli


def plain(state):
    """The state with every mapping a dict and every list a list (what a .rckpt holds)."""
    if isinstance(state, dict):
        return {k: plain(v) for k, v in state.items()}
    if isinstance(state, list):
        return [plain(v) for v in state]
    return state


def zeros_like_state(state):
    """DCP loads in place: a state of the same structure with every tensor zeroed
    and every other value replaced, so that what dcp.load puts there is checked."""
    if isinstance(state, dict):
        return {k: zeros_like_state(v) for k, v in state.items()}
    if isinstance(state, list):
        return [zeros_like_state(v) for v in state]
    if isinstance(state, torch.Tensor):
        return torch.zeros_like(state)
    return None


def dcp_or_skip():
    return pytest.importorskip(
        "torch.distributed.checkpoint",
        reason=f"torch.distributed.checkpoint is absent from torch {torch.__version__}; "
               "the C++ tests check DCP import on the committed fixtures")


def convert(src, out):
    r = run_cli("convert", src, out)
    assert r.returncode == 0, r.stderr
    return r


def test_model_and_optimizer_state_round_trip_through_convert(tmp):
    dcp = dcp_or_skip()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Linear(8, 2, bias=False))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.8, 0.99))
    model(torch.randn(16, 4)).square().sum().backward()
    optim.step()
    try:
        from torch.distributed.checkpoint.state_dict import get_state_dict
        model_sd, optim_sd = get_state_dict(model, optim)
    except ImportError:
        model_sd, optim_sd = model.state_dict(), optim.state_dict()
    state = plain({"model": model_sd, "optim": optim_sd, "epoch": 3, "note": "dcp"})
    ck_dir = tmp / "ck"
    dcp.save(state, checkpoint_id=str(ck_dir), no_dist=True)

    out = tmp / "ck.rckpt"
    convert(ck_dir, out)
    want = zeros_like_state(state)
    dcp.load(want, checkpoint_id=str(ck_dir), no_dist=True)
    got = rckpt.load(str(out))
    assert_same(got.to_dict(), want)
    # Optimizer state keyed by parameter names that hold dots stays nested.
    assert got["optim"]["state"]["0.weight"]["exp_avg"].shape == (8, 4)
    assert got["optim"]["param_groups"][0]["betas"] == (0.8, 0.99)
    assert got.tensors["optim.state.0.weight.exp_avg"] is got["optim"]["state"]["0.weight"]["exp_avg"]
    assert got.sections == {"model": "model", "optim": "data", "epoch": "data", "note": "data"}
    assert run_cli("verify", out).returncode == 0


def test_two_rank_sharded_checkpoint_converts_to_whole_tensors(tmp):
    dcp = dcp_or_skip()
    src = os.path.join(DATA, "dcp", "sharded2")  # tests/data/make_dcp_fixture.py
    out = tmp / "sharded2.rckpt"
    convert(src, out)
    want = {"model": {"rows": torch.zeros(5, 3), "cols": torch.zeros(4, 6, dtype=torch.int32),
                      "rep": torch.zeros(4, dtype=torch.float64)},
            "epoch": None}
    dcp.load(want, checkpoint_id=src, no_dist=True)
    got = rckpt.load(str(out))
    assert_same(got.to_dict(), want)
    assert torch.equal(got["model"]["cols"], torch.arange(24, dtype=torch.int32).reshape(4, 6))


def test_inspect_shows_a_dcp_directory_as_its_conversion():
    r = run_cli("inspect", os.path.join(DATA, "dcp", "simple"))
    assert r.returncode == 0, r.stderr
    assert "dcp" in r.stdout
    assert "optim.state.layer.0.weight.exp_avg" in r.stdout


def test_hostile_metadata_is_refused_and_never_run(tmp):
    marker = "/tmp/rckpt-dcp-hostile-ran"  # what pickle.load of it would create
    if os.path.exists(marker):
        os.remove(marker)
    out = tmp / "x.rckpt"
    r = run_cli("convert", os.path.join(DATA, "dcp", "hostile"), out)
    assert r.returncode == 5, r.stderr
    assert "'os.system'" in r.stderr and "not on the allow-list" in r.stderr
    assert not os.path.exists(marker)
    assert not out.exists()


def test_errors_name_what_is_wrong(tmp):
    r = run_cli("convert", tmp, tmp / "x.rckpt")
    assert r.returncode == 2, r.stderr
    assert "without .metadata" in r.stderr
    r = run_cli("convert", os.path.join(DATA, "dcp", "bad_shape"), tmp / "x.rckpt")
    assert r.returncode == 4, r.stderr
    assert "model.w" in r.stderr and "[3, 2]" in r.stderr
    assert not (tmp / "x.rckpt").exists()


def test_a_failed_conversion_keeps_the_previous_output(tmp):
    out = tmp / "x.rckpt"
    convert(os.path.join(DATA, "dcp", "sharded2"), out)
    before = out.read_bytes()
    r = run_cli("convert", os.path.join(DATA, "dcp", "overlap"), out)
    assert r.returncode == 4 and "overlap" in r.stderr
    assert out.read_bytes() == before
