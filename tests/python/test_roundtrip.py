"""save -> load from Python: every type of the mapping, every dtype, a real training state."""

import collections
import os

import pytest
import torch

import rckpt
from conftest import assert_same, raw_bytes


def train_state(steps=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                                torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(steps):
        x = torch.randn(4, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "controller": {"epoch": 7, "best": 0.31, "history": [0.5, 0.4, 0.31]},
            "metrics": {"loss": [1.0, 0.5], "names": ("a", "b")}}


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_round_trip_full_training_state(tmp, codec):
    state = train_state()
    rckpt.save(tmp / "s.rckpt", state, codec=codec)
    ck = rckpt.load(tmp / "s.rckpt")
    assert_same(state, dict(ck))
    # Adam's integer state keys stay ints.
    assert list(ck["optimizer"]["state"].keys()) == list(state["optimizer"]["state"].keys())
    assert all(type(k) is int for k in ck["optimizer"]["state"])
    # state_dict's module versions (OrderedDict attributes) come back.
    assert isinstance(ck["model"], collections.OrderedDict)
    assert ck["model"]._metadata == state["model"]._metadata  # type: ignore[attr-defined]
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                                torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 2))
    model.load_state_dict(ck["model"])


def test_round_trip_every_tree_type(tmp):
    state = {"controller": {
        "none": None, "t": True, "f": False, "i": -3, "big": 2**100, "neg_big": -(2**70) - 5,
        "edge": [2**63 - 1, -2**63, 2**63, -2**63 - 1], "float": 1.5, "nan": float("nan"),
        "negzero": -0.0, "str": "héllo", "bytes": b"\x00\xff", "list": [1, [2, 3]],
        "tuple": (1, (2, "x")), "empty": {}, "set": {1, 2, 3},
        "size": torch.Size([2, 3]), "dtype": torch.bfloat16, "dev": torch.device("cuda", 1),
        "cpu": torch.device("cpu"), 3: "int key", (1, "a"): "tuple key", None: "none key",
        2.5: "float key", False: "bool key", b"k": "bytes key",
        "inert": rckpt.InertObject("some.module.Thing", {"a": 1}),
    }}
    rckpt.save(tmp / "t.rckpt", state)
    ck = rckpt.load(tmp / "t.rckpt")
    assert_same(state, dict(ck))


def test_every_dtype_round_trips(tmp):
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8,
              torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
              torch.complex64, torch.complex128]
    state = {"model": {}}
    for d in dtypes:
        t = (torch.arange(24, dtype=torch.int64).reshape(2, 3, 4) % 7).to(d)
        state["model"][str(d)] = t
    state["model"]["nan"] = torch.tensor([float("nan"), -0.0, float("inf")])
    rckpt.save(tmp / "d.rckpt", state)
    ck = rckpt.load(tmp / "d.rckpt")
    assert_same(state, dict(ck))


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"])
def test_torch2_dtype_round_trips(tmp, name):
    if not hasattr(torch, name):
        pytest.skip(f"torch {torch.__version__} has no torch.{name} (float8: torch >= 2.1; "
                    "uint16/32/64: torch >= 2.3)")
    t = (torch.arange(24, dtype=torch.int64).reshape(2, 3, 4) % 7).to(getattr(torch, name))
    state = {"model": {"t": t}}
    rckpt.save(tmp / "d.rckpt", state)
    assert_same(state, dict(rckpt.load(tmp / "d.rckpt")))


def test_views_scalars_empty_and_shared_storage(tmp):
    base = torch.arange(12.0).reshape(3, 4)
    tied = torch.randn(5)
    state = {"model": {
        "transposed": base.t(), "sliced": base[:, 1::2], "expanded": torch.tensor([1.0, 2.0]).expand(3, 2),
        "scalar": torch.tensor(3.5), "empty": torch.empty(0, 4), "empty_int": torch.zeros(2, 0, dtype=torch.int32),
        "row0": base[0], "row1": base[1], "base": base, "tied_a": tied, "tied_b": tied,
        "conj": torch.tensor([1 + 2j, 3 - 1j]).conj(),
    }}
    rckpt.save(tmp / "v.rckpt", state)
    ck = rckpt.load(tmp / "v.rckpt")
    m = ck["model"]
    for k, v in state["model"].items():
        assert torch.equal(m[k], v.resolve_conj()), k
        assert m[k].is_contiguous()
    assert m["scalar"].dim() == 0 and m["empty"].shape == (0, 4)
    # One tensor object saved twice is one tensor in the file and one object back.
    assert m["tied_a"] is m["tied_b"]
    assert "model.tied_b" not in ck.tensors
    # Views of one storage are saved each with its own content.
    assert {"model.row0", "model.row1", "model.base"} <= set(ck.tensors)


def test_unsupported_value_is_type_error_naming_path_and_nothing_is_written(tmp):
    path = tmp / "x.rckpt"
    rckpt.save(path, {"model": {"w": torch.ones(2)}})
    before = path.read_bytes()

    class Foo:
        pass

    state = {"optimizer": {"state": {3: {"foo": Foo()}}}}
    with pytest.raises(TypeError, match=r"^optimizer\.state\.3\.foo: cannot store <class '.*Foo'>"):
        rckpt.save(path, state)
    assert path.read_bytes() == before
    assert os.listdir(tmp) == ["x.rckpt"]
    with pytest.raises(TypeError, match=r"model\.q: cannot store a tensor of dtype torch\.qint8"):
        rckpt.save(path, {"model": {"q": torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)}})
    with pytest.raises(TypeError, match=r"model\.s: cannot store a tensor with layout torch\.sparse_coo"):
        rckpt.save(path, {"model": {"s": torch.ones(2).to_sparse()}})
    with pytest.raises(TypeError, match=r"controller\.k: cannot use as a dict key <class 'frozenset'>"):
        rckpt.save(path, {"controller": {"k": {frozenset(): 1}}})
    with pytest.raises(TypeError, match=r"controller: cannot store <class 'frozenset'>"):
        rckpt.save(path, {"controller": frozenset()})
    cyc = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="contains itself"):
        rckpt.save(path, {"controller": cyc})
    # What is not a dict of sections is one section, "object", as load gives it back.
    with pytest.raises(TypeError, match=r"^object\.1: cannot store <class 'object'>"):
        rckpt.save(path, [1, object()])
    assert path.read_bytes() == before


def test_loaded_host_tensors_are_the_engines_buffers_without_copy(tmp):
    # By default (map_file=True) the engine hands back raw chunks in place:
    # the tensors' data pointers lie inside this process's mapping of the file.
    state = {"model": {f"w{i}": torch.randn(256, 1024) for i in range(4)}}  # 4 MiB
    path = tmp / "z.rckpt"
    rckpt.save(path, state)
    ck = rckpt.load(path)
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith(str(path)):
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                maps.append((lo, hi))
    assert maps, "the file is not mapped"
    for name, t in ck.tensors.items():
        assert any(lo <= t.data_ptr() < hi for lo, hi in maps), name
        assert torch.equal(t, state["model"][name.split(".", 1)[1]])
    # Writing to a mapped tensor changes this process's copy, not the file.
    first = next(iter(ck.tensors.values()))
    first.zero_()
    assert torch.equal(rckpt.load(path).tensors["model.w0"], state["model"]["w0"])
    # A copying load (map_file=False): the tensors of one load share the
    # engine's arena, consecutive tensors 64-byte aligned one after another.
    ck = rckpt.load(path, map_file=False)
    ptrs = [t.data_ptr() for t in ck.tensors.values()]
    sizes = [t.numel() * t.element_size() for t in ck.tensors.values()]
    assert all(ptrs[i + 1] - ptrs[i] == (sizes[i] + 63) // 64 * 64 for i in range(len(ptrs) - 1))


def test_load_into_refuses_targets_it_could_not_write_through(tmp):
    rckpt.save(tmp / "c.rckpt", {"model": {"z": torch.tensor([1 + 2j, 3j]), "t": torch.ones(2, 3)}})
    with pytest.raises(rckpt.InvalidArgumentError, match="conjugate"):
        rckpt.load_into(tmp / "c.rckpt", {"model": {"z": torch.zeros(2, dtype=torch.complex64).conj(),
                                                   "t": torch.zeros(2, 3)}})
    with pytest.raises(rckpt.InvalidArgumentError, match="not contiguous"):
        rckpt.load_into(tmp / "c.rckpt", {"model": {"z": torch.zeros(2, dtype=torch.complex64),
                                                   "t": torch.zeros(3, 2).t()}})
    z, t = torch.zeros(2, dtype=torch.complex64), torch.zeros(2, 3)
    rckpt.load_into(tmp / "c.rckpt", {"model": {"z": z, "t": t}})
    assert torch.equal(z, torch.tensor([1 + 2j, 3j])) and torch.equal(t, torch.ones(2, 3))


def test_metadata_and_stats(tmp):
    rckpt.save(tmp / "m.rckpt", {"model": {"w": torch.ones(3)}}, metadata={"run": "a1"})
    ck = rckpt.load(tmp / "m.rckpt")
    assert ck.metadata["run"] == "a1"
    assert ck.stats["bytes_restored"] == 12
    assert ck.sections == {"model": "model"}
    assert raw_bytes(ck["model"]["w"]).numel() == 12
