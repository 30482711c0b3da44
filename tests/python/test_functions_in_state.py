"""Functions in a saved state: refused where they could never be restored, left out with a
warning naming them when the caller asks, kept as inert references in LR schedulers' states
(where the scheduler built at a restart has them); and classes a PyTorch file's import keeps
as inert objects, warned about or refused on load."""

import os
import warnings
from typing import Any

import pytest
import torch

import rckpt
from conftest import DATA


def _identity(x):
    return x


class _Warmup:
    """An lr_lambda object: LambdaLR saves its attributes, a function among them."""

    def __init__(self):
        self.steps = 3
        self.curve = _identity

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.steps) * self.curve(1.0)


def _state():
    return {"c": {"f": lambda x: x, "g": torch.sigmoid, "n": 1}}


def test_a_function_outside_a_scheduler_state_is_refused_naming_its_key_path(tmp):
    path = tmp / "f.rckpt"
    rckpt.save(path, {"c": {"n": 0}})
    with pytest.raises(TypeError, match=r"^c\.f: cannot store the lambda .*<lambda>: a function "
                                        r"is code, .* could never be restored .* pass "
                                        r"drop_functions=True"):
        rckpt.save(path, _state())
    with pytest.raises(TypeError, match=r"^c\.g: cannot store the function torch\.sigmoid"):
        rckpt.save(path, {"c": {"g": torch.sigmoid}})
    model = torch.nn.Linear(1, 1)
    with pytest.raises(TypeError, match=r"^c\.0: cannot store the method .*forward of a "
                                        r"torch\.nn\.modules\.linear\.Linear"):
        rckpt.save(path, {"c": [model.forward]})
    assert rckpt.load(path)["c"] == {"n": 0}  # the previous file is intact


def test_drop_functions_leaves_them_out_with_a_warning_naming_the_key_paths(tmp):
    path = tmp / "f.rckpt"
    state = _state()
    state["c"]["listed"] = [1, _identity]
    with pytest.warns(rckpt.DroppedValueWarning,
                      match=r"rckpt\.save left out 3 function values .*: c\.f, c\.g, "
                            r"c\.listed\.1$"):
        rckpt.save(path, state, drop_functions=True)
    # A dict leaves the entry out; a list holds None in its place.
    assert rckpt.load(path)["c"] == {"n": 1, "listed": [1, None]}


def test_a_save_without_functions_warns_nothing(tmp):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rckpt.save(tmp / "f.rckpt", {"c": {"n": 1}}, drop_functions=True)


def test_drop_functions_must_be_a_bool(tmp):
    with pytest.raises(TypeError, match=r"rckpt\.save: drop_functions must be True or False, "
                                        r"not 'yes'"):
        rckpt.save(tmp / "f.rckpt", {"c": {}}, drop_functions="yes")  # type: ignore[arg-type]


def test_save_async_and_the_manager_refuse_or_drop_functions_alike(tmp):
    with pytest.raises(TypeError, match=r"^c\.f: cannot store the lambda"):
        rckpt.save_async(tmp / "a.rckpt", _state())
    with pytest.warns(rckpt.DroppedValueWarning, match=r"rckpt\.save_async left out 2 .*c\.f, c\.g"):
        rckpt.save_async(tmp / "a.rckpt", _state(), drop_functions=True).result()
    assert rckpt.load(tmp / "a.rckpt")["c"] == {"n": 1}
    for async_save in (True, False):
        with rckpt.CheckpointManager(tmp / f"m{async_save}", async_save=async_save) as mgr:
            with pytest.raises(TypeError, match=r"^c\.g: cannot store the function"):
                mgr.save(1, {"c": {"g": torch.sigmoid}})
        with rckpt.CheckpointManager(tmp / f"m{async_save}", async_save=async_save,
                                     drop_functions=True) as mgr:
            with pytest.warns(rckpt.DroppedValueWarning, match=r"c\.f, c\.g"):
                mgr.save(2, _state()).result()
            assert mgr.load()["c"] == {"n": 1}


def test_an_lr_lambda_object_holding_a_function_keeps_working(tmp):
    params = [torch.nn.Parameter(torch.ones(2))]
    opt = torch.optim.SGD(params, lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _Warmup())
    for _ in range(2):
        opt.step()
        sched.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error", rckpt.DroppedValueWarning)
        rckpt.save(tmp / "s.rckpt", {"scheduler": sched.state_dict()})
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, _Warmup())
    warmup: Any = sched2.lr_lambdas[0]
    warmup.steps = 99  # restored from the file
    sched2.load_state_dict(rckpt.load(tmp / "s.rckpt")["scheduler"])
    assert warmup.steps == 3 and warmup.curve is _identity
    for _ in range(3):
        opt.step()
        opt2.step()
        sched.step()
        sched2.step()
        assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_a_pytorch_file_with_unknown_classes_warns_naming_them_or_is_refused_with_strict():
    path = os.path.join(DATA, "pytorch", "custom_class.pt")
    with pytest.warns(rckpt.InertObjectWarning,
                      match=r"rckpt\.load: .*custom_class\.pt \(pytorch\) holds classes outside "
                            r"the known set, kept as inert objects .*: mylib\.metrics\.MetricTracker "
                            r"\(strict=True refuses them\)"):
        ck = rckpt.load(path)
    assert isinstance(ck["metric_tracker"], rckpt.InertObject)
    with pytest.raises(rckpt.UnsupportedError, match="MetricTracker"):
        rckpt.load(path, strict=True)


def test_an_rckpt_file_and_a_pytorch_file_of_known_classes_warn_nothing(tmp):
    rckpt.save(tmp / "k.rckpt", {"model": {"w": torch.ones(2)}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rckpt.load(tmp / "k.rckpt")
        rckpt.load(os.path.join(DATA, "pytorch", "optimizer_adam.pt"), strict=True)
