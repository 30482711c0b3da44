"""What training loops put in their state: every optimizer, every LR scheduler, GradScaler,
NumPy values, functions; each saved with rckpt and restored so that training continues
identically."""

import inspect
import json
import warnings

import numpy as np
import pytest
import torch

import rckpt
from conftest import run_cli

SCHEDULERS = torch.optim.lr_scheduler


def _params():
    torch.manual_seed(0)
    return [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]


def _loss(params):
    return sum((p * p).sum() for p in params)


# Every optimizer class of torch.optim: how to build one over the params.
OPTIMIZERS = {
    "ASGD": lambda p: torch.optim.ASGD(p, lr=0.01),
    "Adadelta": lambda p: torch.optim.Adadelta(p),
    "Adafactor": lambda p: torch.optim.Adafactor(p),  # type: ignore[attr-defined]
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
    "Adam": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01),
    "Adamax": lambda p: torch.optim.Adamax(p),
    "LBFGS": lambda p: torch.optim.LBFGS(p, lr=0.1, history_size=3),
    "Muon": lambda p: torch.optim.Muon([x for x in p if x.dim() == 2], lr=0.02),  # type: ignore[attr-defined]  # 2-d only
    "NAdam": lambda p: torch.optim.NAdam(p),
    "RAdam": lambda p: torch.optim.RAdam(p),
    "RMSprop": lambda p: torch.optim.RMSprop(p, momentum=0.9, centered=True),
    "Rprop": lambda p: torch.optim.Rprop(p),
    "SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "SparseAdam": lambda p: torch.optim.SparseAdam(p),
}


def _classes(module, base):
    return sorted(name for name, cls in vars(module).items()
                  if inspect.isclass(cls) and issubclass(cls, base) and cls is not base
                  and not name.startswith("_"))


def test_the_optimizer_table_has_every_optimizer_of_torch_optim():
    missing = set(_classes(torch.optim, torch.optim.Optimizer)) - set(OPTIMIZERS)
    assert not missing, f"torch.optim has optimizers this suite does not try: {missing}"


def _step(opt, params, sparse=False):
    def closure():
        opt.zero_grad()
        if sparse:
            for p in params:
                p.grad = (2 * p.detach()).to_sparse()
            return _loss(params).detach()
        loss = _loss(params)
        loss.backward()
        return loss
    opt.step(closure)


@pytest.mark.parametrize("name", sorted(set(_classes(torch.optim, torch.optim.Optimizer))))
def test_every_optimizer_continues_identically_after_a_round_trip(tmp, name):
    sparse = name == "SparseAdam"
    params = _params()
    opt = OPTIMIZERS[name](params)
    for _ in range(3):
        _step(opt, params, sparse)
    rckpt.save(tmp / "o.rckpt", {"model": {f"p{i}": p for i, p in enumerate(params)},
                                 "optimizer": opt.state_dict()})
    ck = rckpt.load(tmp / "o.rckpt")
    params2 = [torch.nn.Parameter(ck["model"][f"p{i}"].clone()) for i in range(len(params))]
    opt2 = OPTIMIZERS[name](params2)
    opt2.load_state_dict(ck["optimizer"])
    for _ in range(3):
        _step(opt, params, sparse)
        _step(opt2, params2, sparse)
    for a, b in zip(params, params2):
        assert torch.equal(a, b), name


def _sched_opt():
    return torch.optim.SGD(_params(), lr=0.1, momentum=0.9)


def _cyclic_fn(x):
    return 0.5 ** x


# Every scheduler of torch.optim.lr_scheduler: how to build one (same arguments both times).
SCHEDULER_MAKERS = {
    "LambdaLR": lambda o: SCHEDULERS.LambdaLR(o, lambda e: 0.9 ** e),
    "MultiplicativeLR": lambda o: SCHEDULERS.MultiplicativeLR(o, lambda e: 0.95),
    "StepLR": lambda o: SCHEDULERS.StepLR(o, step_size=2, gamma=0.5),
    "MultiStepLR": lambda o: SCHEDULERS.MultiStepLR(o, milestones=[2, 5], gamma=0.3),
    "ConstantLR": lambda o: SCHEDULERS.ConstantLR(o, factor=0.5, total_iters=4),
    "LinearLR": lambda o: SCHEDULERS.LinearLR(o, start_factor=0.2, total_iters=6),
    "ExponentialLR": lambda o: SCHEDULERS.ExponentialLR(o, gamma=0.9),
    "PolynomialLR": lambda o: SCHEDULERS.PolynomialLR(o, total_iters=8, power=2.0),
    "CosineAnnealingLR": lambda o: SCHEDULERS.CosineAnnealingLR(o, T_max=5),
    "CosineAnnealingWarmRestarts": lambda o: SCHEDULERS.CosineAnnealingWarmRestarts(o, T_0=3),
    "CyclicLR": lambda o: SCHEDULERS.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                              mode="exp_range", gamma=0.9),
    "CyclicLR(scale_fn)": lambda o: SCHEDULERS.CyclicLR(o, base_lr=0.01, max_lr=0.1,
                                                        step_size_up=3, scale_fn=_cyclic_fn),
    "OneCycleLR": lambda o: SCHEDULERS.OneCycleLR(o, max_lr=0.5, total_steps=20),
    "OneCycleLR(linear)": lambda o: SCHEDULERS.OneCycleLR(o, max_lr=0.5, total_steps=20,
                                                          anneal_strategy="linear"),
    "SequentialLR": lambda o: SCHEDULERS.SequentialLR(
        o, [SCHEDULERS.LinearLR(o, start_factor=0.5, total_iters=2),
            SCHEDULERS.OneCycleLR(o, max_lr=0.5, total_steps=20)], milestones=[2]),
    "ChainedScheduler": lambda o: SCHEDULERS.ChainedScheduler(
        [SCHEDULERS.ExponentialLR(o, gamma=0.9),
         SCHEDULERS.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2)]),
    "ReduceLROnPlateau": lambda o: SCHEDULERS.ReduceLROnPlateau(o, patience=0, factor=0.5),
    "SWALR": lambda o: torch.optim.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=4),  # type: ignore[call-arg]
}


def _scheduler_classes():
    bases = tuple(c for c in (getattr(SCHEDULERS, "LRScheduler", None),
                              getattr(SCHEDULERS, "_LRScheduler", None)) if c is not None)
    found = {name for name, cls in vars(SCHEDULERS).items()
             if inspect.isclass(cls) and issubclass(cls, bases) and cls not in bases}
    return found | {"ReduceLROnPlateau"}


def test_the_scheduler_table_has_every_scheduler_of_torch():
    covered = {name.split("(")[0] for name in SCHEDULER_MAKERS}
    missing = _scheduler_classes() - covered
    assert not missing, f"torch.optim.lr_scheduler has schedulers this suite skips: {missing}"


def _lrs(opt):
    return [g["lr"] for g in opt.param_groups] + [g.get("momentum") for g in opt.param_groups]


def _sched_step(sched, i):
    if isinstance(sched, SCHEDULERS.ReduceLROnPlateau):
        sched.step(1.0)  # never better: the LR drops every step
    else:
        sched.step()


@pytest.mark.parametrize("name", sorted(SCHEDULER_MAKERS))
def test_every_scheduler_continues_identically_after_a_round_trip(tmp, name):
    warnings.simplefilter("ignore", UserWarning)  # torch's "step the optimizer first"
    opt = _sched_opt()
    sched = SCHEDULER_MAKERS[name](opt)
    for i in range(5):
        opt.step()
        _sched_step(sched, i)
    rckpt.save(tmp / "s.rckpt", {"optimizer": opt.state_dict(), "scheduler": sched.state_dict()})  # type: ignore[attr-defined]
    ck = rckpt.load(tmp / "s.rckpt")
    opt2 = _sched_opt()
    sched2 = SCHEDULER_MAKERS[name](opt2)
    opt2.load_state_dict(ck["optimizer"])
    sched2.load_state_dict(ck["scheduler"])  # type: ignore[attr-defined]
    assert _lrs(opt2) == _lrs(opt), name
    for i in range(5, 12):
        opt.step()
        opt2.step()
        _sched_step(sched, i)
        _sched_step(sched2, i)
        assert _lrs(opt2) == _lrs(opt), f"{name}: step {i}"


def test_functions_in_a_scheduler_state_are_inert_references_left_out_on_load(tmp):
    opt = _sched_opt()
    sched = SCHEDULERS.OneCycleLR(opt, max_lr=0.5, total_steps=20)
    # A scheduler's state_dict() has base_lrs and last_epoch beside its functions.
    state = {"scheduler": {"fn": sched._annealing_cos, "plain": _cyclic_fn,  # type: ignore[attr-defined]
                           "listed": [_cyclic_fn], "base_lrs": [0.5], "last_epoch": 3}}
    rckpt.save(tmp / "m.rckpt", state)
    ck = rckpt.load(tmp / "m.rckpt")
    # Dict entries holding a function are left out; elsewhere an inert FunctionRef stays.
    assert ck["scheduler"] == {"listed": [rckpt.FunctionRef(f"{__name__}._cyclic_fn")],
                               "base_lrs": [0.5], "last_epoch": 3}
    # The file shows what each reference was.
    text = json.dumps(json.loads(run_cli("inspect", "--json", tmp / "m.rckpt").stdout))
    assert "torch.optim.lr_scheduler.OneCycleLR._annealing_cos" in text
    assert "rckpt.function" in text


def test_grad_scaler_state_round_trips(tmp):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch 2: "use torch.amp.GradScaler"
        scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
    rckpt.save(tmp / "g.rckpt", {"scaler": scaler.state_dict()})  # {} without CUDA
    assert rckpt.load(tmp / "g.rckpt")["scaler"] == scaler.state_dict()
    amp = getattr(torch, "amp", None)
    if amp is None or not hasattr(amp, "GradScaler"):
        pytest.skip(f"torch {torch.__version__} has no torch.amp.GradScaler (torch >= 2.3)")
    scaler = amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    params = _params()
    opt = torch.optim.SGD(params, lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        scaler.scale(_loss(params)).backward()
        scaler.step(opt)
        scaler.update()
    state = scaler.state_dict()
    rckpt.save(tmp / "g2.rckpt", {"scaler": state})
    back = amp.GradScaler("cpu")
    back.load_state_dict(rckpt.load(tmp / "g2.rckpt")["scaler"])
    assert back.state_dict() == state and back.get_scale() == scaler.get_scale()


NUMERIC_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "float16", "float32", "float64", "longdouble", "complex64",
                  "complex128", "clongdouble", "datetime64[s]", "timedelta64[ms]"]


def _example(dtype, shape):
    n = int(np.prod(shape))
    raw = np.arange(1, n + 1)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        a = (raw + 1j * (raw + 0.5)).astype(dt)
    elif dt.kind in "mM":
        a = raw.astype(np.int64).view(dt)
    elif dt.kind == "b":
        a = (raw % 3 == 0)
    elif dt.kind == "f":
        a = (raw / 3).astype(dt)
    else:
        a = (raw * 7).astype(dt)
    return a.reshape(shape)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3)])
def test_numpy_arrays_come_back_as_numpy_of_the_same_dtype_and_shape(tmp, dtype, shape):
    a = _example(dtype, shape)
    rckpt.save(tmp / "n.rckpt", {"metrics": {"a": a}})
    b = rckpt.load(tmp / "n.rckpt")["metrics"]["a"]
    assert type(b) is np.ndarray
    assert b.dtype == a.dtype and b.shape == a.shape
    assert a.tobytes() == b.tobytes()


def test_numpy_arrays_are_tensors_in_the_file_and_others_keep_their_layout(tmp):
    big_endian = np.arange(6, dtype=">i4").reshape(2, 3)
    strided = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    readonly = np.arange(3.0)
    readonly.flags.writeable = False
    state = {"data": {"be": big_endian, "strided": strided, "ro": readonly,
                      "same": [readonly, readonly]}}
    rckpt.save(tmp / "n.rckpt", state)
    ck = rckpt.load(tmp / "n.rckpt")
    assert ck["data"]["be"].dtype == np.dtype("int32")  # native byte order, same values
    assert np.array_equal(ck["data"]["be"], big_endian)
    assert np.array_equal(ck["data"]["strided"], strided)
    assert np.array_equal(ck["data"]["ro"], readonly)
    # The array is a tensor of its own key path; one array met twice is stored once.
    assert set(ck.tensors) == {"data.be", "data.strided", "data.ro"}
    assert ck.tensors["data.be"].dtype == torch.int32 and ck.tensors["data.be"].shape == (2, 3)


@pytest.mark.parametrize("value", [
    np.float64(0.3), np.float32(0.1), np.float16(1.5), np.int64(7), np.int8(-3),
    np.uint64(2 ** 64 - 1), np.uint8(200), np.bool_(True), np.complex64(1 + 2j),
    np.complex128(-0.5j), np.longdouble("0.1"), np.datetime64("2024-02-29T12:00", "m"),
    np.timedelta64(90, "s"), np.str_("epoch"), np.bytes_(b"\x00\xff")],
    ids=lambda v: type(v).__name__)
def test_numpy_scalars_come_back_with_their_type_and_value(tmp, value):
    rckpt.save(tmp / "s.rckpt", {"controller": {"x": value, "in_list": [value]}})
    back = rckpt.load(tmp / "s.rckpt")["controller"]
    for b in (back["x"], back["in_list"][0]):
        assert type(b) is type(value)
        assert b.tobytes() == value.tobytes()


def test_numpy_values_the_tree_cannot_hold_are_refused_naming_the_path(tmp):
    with pytest.raises(TypeError, match=r"^metrics\.names: cannot store a numpy array of "
                                        r"dtype object"):
        rckpt.save(tmp / "x.rckpt", {"metrics": {"names": np.array(["a", None], dtype=object)}})
    with pytest.raises(TypeError, match=r"^metrics\.rec: cannot store a numpy array of dtype"):
        rckpt.save(tmp / "x.rckpt", {"metrics": {"rec": np.zeros(2, dtype="i4,f4")}})
    assert not (tmp / "x.rckpt").exists()


def test_a_hostile_numpy_marker_stays_inert(tmp):
    # Markers that do not look exactly as rckpt writes them are not rebuilt.
    for fields in ({"dtype": "object", "value": 1}, {"dtype": "f8,i4", "value": 1.0},
                   {"dtype": "float64", "value": "x"}, {"dtype": "float64", "value": 1.0, "x": 1}):
        rckpt.save(tmp / "h.rckpt", {"m": {"v": rckpt.InertObject("numpy.scalar", fields)}})
        back = rckpt.load(tmp / "h.rckpt")["m"]["v"]
        assert back == rckpt.InertObject("numpy.scalar", fields)
    bogus = {"dtype": "float64", "data": torch.zeros(3, dtype=torch.int8)}
    rckpt.save(tmp / "h.rckpt", {"m": {"v": rckpt.InertObject("numpy.ndarray", bogus)}})
    assert isinstance(rckpt.load(tmp / "h.rckpt")["m"]["v"], rckpt.InertObject)


def test_counters_and_deques_keep_their_type(tmp):
    import collections
    state = {"scheduler": {"milestones": collections.Counter({2: 1, 5: 2}),
                           "recent": collections.deque([1.0, 2.0], maxlen=3)}}
    rckpt.save(tmp / "c.rckpt", state)
    back = rckpt.load(tmp / "c.rckpt")["scheduler"]
    assert type(back["milestones"]) is collections.Counter and back["milestones"] == state[
        "scheduler"]["milestones"]
    assert back["milestones"][9] == 0, "a Counter, not a dict"
    assert type(back["recent"]) is collections.deque and back["recent"].maxlen == 3
    assert list(back["recent"]) == [1.0, 2.0]


def test_modules_and_objects_with_state_dict_are_refused_with_what_to_write(tmp):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"^model: cannot store a module \(torch\.nn\.modules\."
                                        r"linear\.Linear\).*model\.state_dict\(\)"):
        rckpt.save(tmp / "x.rckpt", {"model": model})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"^opt: cannot store a torch\.optim\.sgd\.SGD; save its "
                                        r"state, obj\.state_dict\(\)"):
        rckpt.save(tmp / "x.rckpt", {"opt": opt})


def test_a_function_reference_in_a_file_is_never_imported_or_called(tmp, monkeypatch):
    import os
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    evil = rckpt.InertObject("rckpt.function", {"name": "os.system", "bound_to": None})
    rckpt.save(tmp / "e.rckpt", {"scheduler": {"fn": evil, "fns": [evil]}})
    back = rckpt.load(tmp / "e.rckpt")["scheduler"]
    assert back == {"fns": [rckpt.FunctionRef("os.system")]}
    assert not callable(back["fns"][0]) and called == []
