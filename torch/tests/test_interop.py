"""rckpt::libtorch against Python: the examples of examples/libtorch run on files Python wrote,
and Python reads what they write.

- a model trained in Python is served from C++ and comes back identical, outputs included;
- a C++ training run stopped and resumed is bit-identical to one that never stopped;
- a C++ run's model, optimizer and RNG resume in Python, and Python's in C++.

Run by scripts/test-libtorch.sh with RCKPT_TORCH_EXAMPLES (the directory of the built
`train` and `serve`), RCKPT_CLI and the rckpt package on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

import rckpt
from interop_common import Net, make_optimizer, train

EXAMPLES = Path(os.environ.get("RCKPT_TORCH_EXAMPLES", ""))
CLI = os.environ.get("RCKPT_CLI", "rckpt")
OTHER_PYTHON = os.environ.get("RCKPT_TORCH_OTHER_PYTHON", "")
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(
    not (EXAMPLES / "train").exists(),
    reason="RCKPT_TORCH_EXAMPLES does not name the built examples (scripts/test-libtorch.sh)")


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert result.returncode == 0, \
        f"{args}: exit {result.returncode}\n{result.stdout}{result.stderr}"
    return result.stdout


def assert_same_state(a, b, exact=True):
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        if exact or not a[key].is_floating_point():
            assert torch.equal(a[key], b[key]), key
        else:
            torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6,
                                       msg=lambda m, key=key: f"{key}: {m}")


def test_a_model_python_trained_is_served_from_cpp_and_comes_back_identical(tmp_path):
    torch.manual_seed(3)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    train(net, opt, 0, 5)
    state = net.state_dict()
    model = tmp_path / "model.rckpt"
    rckpt.save(model, {"model": state})
    x = torch.randn(16, 8)
    rckpt.save(tmp_path / "inputs.rckpt", {"x": x})

    out = run(EXAMPLES / "serve", model, tmp_path / "inputs.rckpt", tmp_path / "outputs.rckpt",
              "--resave", tmp_path / "resaved.rckpt")
    assert "y of shape [16, 4]" in out
    net.eval()
    with torch.no_grad():
        expected = net(x)
    outputs = rckpt.load(tmp_path / "outputs.rckpt")
    assert list(outputs) == ["y"]
    assert torch.equal(outputs["y"], expected)  # the same libtorch kernels, bit for bit

    resaved = rckpt.load(tmp_path / "resaved.rckpt")["model"]
    assert_same_state(resaved, state)  # every key, in order, every dtype (num_batches_tracked)
    again = Net()
    again.load_state_dict(resaved)
    again.eval()
    with torch.no_grad():
        assert torch.equal(again(x), expected)

    # A state_dict saved alone (rckpt.save(path, model.state_dict())) serves the same.
    rckpt.save(tmp_path / "flat.rckpt", state)
    run(EXAMPLES / "serve", tmp_path / "flat.rckpt", tmp_path / "inputs.rckpt",
        tmp_path / "flat-outputs.rckpt")
    assert torch.equal(rckpt.load(tmp_path / "flat-outputs.rckpt")["y"], expected)


def test_serve_names_what_does_not_match(tmp_path):
    wrong = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Linear(32, 4))
    rckpt.save(tmp_path / "model.rckpt", {"model": wrong.state_dict()})
    rckpt.save(tmp_path / "inputs.rckpt", {"x": torch.zeros(2, 8)})
    result = subprocess.run([EXAMPLES / "serve", tmp_path / "model.rckpt",
                             tmp_path / "inputs.rckpt", tmp_path / "outputs.rckpt"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "missing keys (in the module, not in the file): fc1.weight" in result.stderr
    assert "unexpected keys (in the file, not in the module): 0.weight, 0.bias" in result.stderr
    assert not (tmp_path / "outputs.rckpt").exists()


def test_a_cpp_run_resumed_is_bit_identical(tmp_path):
    run(EXAMPLES / "train", "--run", tmp_path / "straight", "--steps", 6, "--every", 3)
    out = run(EXAMPLES / "train", "--run", tmp_path / "stopped", "--steps", 6, "--stop-after", 4)
    assert "stopping after step 4" in out
    out = run(EXAMPLES / "train", "--run", tmp_path / "resumed", "--steps", 6,
              "--resume", tmp_path / "stopped" / "last.rckpt")
    assert "at step 4" in out
    diff = subprocess.run([CLI, "diff", tmp_path / "straight" / "last.rckpt",
                           tmp_path / "resumed" / "last.rckpt"], capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout + diff.stderr


@pytest.mark.parametrize("name", ["adam", "adamw", "sgd"])
def test_a_run_moves_between_cpp_and_python_with_its_optimizer(tmp_path, name):
    # Bit-identical where both languages compute the same; Adam's moments are a lerp_ in
    # Python and mul_/add_ in libtorch, a rounding apart.
    exact = name == "sgd"
    run(EXAMPLES / "train", "--run", tmp_path / "cpp", "--steps", 6, "--every", 6,
        "--optimizer", name)
    run(EXAMPLES / "train", "--run", tmp_path / "cpp3", "--steps", 6, "--stop-after", 3,
        "--optimizer", name)
    cpp6 = rckpt.load(tmp_path / "cpp" / "last.rckpt")

    # C++ -> Python: the model, the optimizer and torch's RNG of C++'s step 3.
    ck = rckpt.load(tmp_path / "cpp3" / "last.rckpt")
    net = Net()
    net.load_state_dict(ck["model"])
    opt = make_optimizer(name, net)
    opt.load_state_dict(ck["optimizer"])
    assert opt.state_dict()["param_groups"] == ck["optimizer"]["param_groups"]
    for index, fields in ck["optimizer"]["state"].items():
        for field, value in fields.items():
            assert torch.equal(opt.state_dict()["state"][index][field], value), (index, field)
    report = rckpt.restore_rng(ck.rng)
    assert report.restored == ["torch.cpu"]
    step, _ = train(net, opt, ck["controller"]["step"], 6)
    assert step == 6
    assert_same_state(net.state_dict(), cpp6["model"], exact)

    # Python -> C++: Python's step 4 (its layout, its capture_rng), resumed by train.cc.
    # Loaded again: the optimizer above trained the state tensors it was given in place
    # (load_state_dict keeps tensors already on the parameter's device and dtype).
    ck = rckpt.load(tmp_path / "cpp3" / "last.rckpt")
    net = Net()
    net.load_state_dict(ck["model"])
    opt = make_optimizer(name, net)
    opt.load_state_dict(ck["optimizer"])
    rckpt.restore_rng(ck.rng)
    step, loss = train(net, opt, 3, 4)
    rckpt.save(tmp_path / "py4.rckpt",
               {"model": net.state_dict(), "optimizer": opt.state_dict(),
                "controller": {"step": step, "loss": loss}},
               rng=rckpt.capture_rng())
    run(EXAMPLES / "train", "--run", tmp_path / "cpp-after-py", "--steps", 6,
        "--optimizer", name, "--resume", tmp_path / "py4.rckpt")
    resumed = rckpt.load(tmp_path / "cpp-after-py" / "last.rckpt")
    assert resumed["controller"]["step"] == 6
    assert_same_state(resumed["model"], cpp6["model"], exact)
    for index, fields in cpp6["optimizer"]["state"].items():
        for field, value in fields.items():
            other = resumed["optimizer"]["state"][index][field]
            if exact or field == "step":
                assert torch.equal(other, value), (index, field)
            else:
                torch.testing.assert_close(other, value, rtol=1e-5, atol=1e-7)


@pytest.mark.skipif(not OTHER_PYTHON, reason="RCKPT_TORCH_OTHER_PYTHON names no second Python "
                    "(scripts/test-libtorch.sh passes the one of Debian's torch 1.13)")
def test_another_torch_resumes_a_cpp_run_and_cpp_resumes_it(tmp_path):
    # AdamW: torch 1.13 writes its groups without decoupled_weight_decay. Its kernels are not
    # the examples' libtorch's, so the runs agree within roundings.
    run(EXAMPLES / "train", "--run", tmp_path / "cpp", "--steps", 6, "--every", 6,
        "--optimizer", "adamw")
    run(EXAMPLES / "train", "--run", tmp_path / "cpp3", "--steps", 6, "--stop-after", 3,
        "--optimizer", "adamw")
    out = run(OTHER_PYTHON, HERE / "resume_in_python.py", tmp_path / "cpp3" / "last.rckpt",
              tmp_path / "other4.rckpt", "--optimizer", "adamw", "--until", 4)
    assert "trained to step 4" in out
    run(EXAMPLES / "train", "--run", tmp_path / "back", "--steps", 6, "--optimizer", "adamw",
        "--resume", tmp_path / "other4.rckpt")
    assert_same_state(rckpt.load(tmp_path / "back" / "last.rckpt")["model"],
                      rckpt.load(tmp_path / "cpp" / "last.rckpt")["model"],
                      exact=False)
