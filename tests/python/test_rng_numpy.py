"""NumPy's generator states and values inside torch.save files: imported as
numpy RNG records and the NumPy values rckpt.save writes, exported back as
NumPy pickles them, on whichever NumPy this interpreter has (NumPy 1 on
Debian's torch 1.13, NumPy 2 on the torch 2 venv)."""

import os
import random
import struct
import warnings
import zipfile

import numpy as np
import pytest
import torch

import rckpt
from conftest import DATA, run_cli

NUMPY_MODULE = "numpy._core" if int(np.__version__.split(".")[0]) >= 2 else "numpy.core"
BIT_GENERATORS = ["MT19937", "PCG64", "PCG64DXSM", "SFC64", "Philox"]


def load_like_trainer(path):
    """torch.load as transformers' Trainer loads rng_state.pth: weights_only=True with NumPy's
    globals allowed under the running NumPy's names (torch < 2.5 has no allow-list: a plain
    load)."""
    if not hasattr(torch.serialization, "safe_globals"):
        return torch.load(path)
    np_core = getattr(np, "_core") if NUMPY_MODULE == "numpy._core" else np.core
    allowed = [np_core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, weights_only=True)


def same(a, b):
    """Equal as NumPy's states compare: same types, dict keys, array dtypes and elements."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def generator(name, seed=3):
    g = np.random.Generator(getattr(np.random, name)(seed))
    g.random(5)
    g.integers(0, 10, dtype=np.uint32)  # a buffered 32-bit half where the generator keeps one
    return g


def trainer_rng_file(path):
    """What Trainer._save_rng_state writes (on a machine without CUDA)."""
    np.random.seed(5)
    np.random.standard_normal()  # a cached Gaussian
    random.seed(6)
    torch.manual_seed(7)
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "cpu": torch.random.get_rng_state()}
    torch.save(state, path)
    return state


def test_a_trainer_rng_file_converted_and_back_loads_as_trainer_loads_it(tmp):
    original = trainer_rng_file(tmp / "rng_state.pth")
    rckpt.convert(tmp / "rng_state.pth", tmp / "rng_state.rckpt")
    for how in ("python", "cli"):
        back = tmp / f"back_{how}" / "rng_state.pth"
        back.parent.mkdir()
        if how == "python":
            rckpt.convert(tmp / "rng_state.rckpt", back)
        else:
            r = run_cli("convert", tmp / "rng_state.rckpt", back)
            assert r.returncode == 0, r.stderr
        loaded = load_like_trainer(back)
        assert list(loaded) == ["python", "numpy", "cpu"]
        assert same(loaded["numpy"], original["numpy"]), how
        assert loaded["python"] == original["python"]
        assert torch.equal(loaded["cpu"], original["cpu"])
        # What Trainer._load_rng_state then does.
        np.random.seed(0)
        np.random.set_state(loaded["numpy"])
        assert same(np.random.get_state(), original["numpy"])
        # NumPy's globals are spelled as this NumPy spells them.
        with zipfile.ZipFile(back) as z:
            pickle = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
        assert f"{NUMPY_MODULE}.multiarray\n_reconstruct".encode() in pickle


def test_load_gives_numpys_own_state_and_restore_rng_restores_it(tmp):
    original = trainer_rng_file(tmp / "rng_state.pth")
    for path in (tmp / "rng_state.pth", tmp / "rng_state.rckpt"):
        if path.suffix == ".rckpt":
            rckpt.convert(tmp / "rng_state.pth", path)
        ck = rckpt.load(path)
        assert list(ck.rng) == ["python", "numpy", "cpu"]
        assert ck.rng["numpy"].kind == "numpy" and ck.rng["numpy"].origin == "cpu"
        assert same(ck["numpy"], original["numpy"])  # get_state()'s tuple, not bytes
        assert ck.metadata["rckpt.numpy_module"] == NUMPY_MODULE
        np.random.seed(1)
        report = rckpt.restore_rng(ck.rng)
        assert "numpy" in report.restored
        assert same(np.random.get_state(), original["numpy"])


@pytest.mark.parametrize("name", ["numpy", "numpy.global"])
def test_restore_rng_puts_a_legacy_record_named_numpy_or_numpy_global_into_numpys_globals(
        tmp, name):
    """Read from a file under Trainer's name or capture_rng's (a tree {"numpy": {"global":
    ...}}), from the .pt and from its .rckpt; other records of NumPy are left alone."""
    np.random.seed(5)
    np.random.standard_normal()  # a cached Gaussian
    original = np.random.get_state()
    expected = np.random.standard_normal(3)
    pcg = generator("PCG64")
    tree = {"numpy": original} if name == "numpy" else {"numpy": {"global": original}}
    torch.save({**tree, "cpu": torch.get_rng_state(),
                "saved": {"numpy": np.random.RandomState(9).get_state(),  # not the globals'
                          "pcg": pcg.bit_generator.state}}, tmp / "rng.pth")
    rckpt.convert(tmp / "rng.pth", tmp / "rng.rckpt")
    for path in (tmp / "rng.pth", tmp / "rng.rckpt"):
        ck = rckpt.load(path)
        assert ck.rng[name].kind == "numpy", path
        np.random.seed(1)
        report = rckpt.restore_rng(ck.rng)
        assert name in report.restored, path
        assert {"saved.numpy", "saved.pcg"} <= set(report.skipped), path
        assert same(np.random.get_state(), original), path
        assert np.array_equal(np.random.standard_normal(3), expected), path
    # A bit generator's record under the global's name has no legacy state to give it.
    rng = rckpt.capture_rng({"pcg": pcg}, python=False, numpy=False, torch=False)
    np.random.seed(1)
    before = np.random.get_state()
    report = rckpt.restore_rng(rckpt.RngState({name: rng["numpy.pcg"]}))
    assert report == rckpt.RestoreReport([], [name])
    assert same(np.random.get_state(), before)


def test_every_bit_generators_state_round_trips(tmp):
    gens = {name.lower(): generator(name) for name in BIT_GENERATORS}
    states = {k: g.bit_generator.state for k, g in gens.items()}
    torch.save({"rngs": states}, tmp / "g.pt")
    ck = rckpt.load(tmp / "g.pt")
    assert {n: r.kind for n, r in ck.rng.items()} == {f"rngs.{k}": "numpy" for k in states}
    for k, g in gens.items():
        assert same(ck["rngs"][k], states[k]), k
        expected = g.random(4)
        g.bit_generator.state = ck["rngs"][k]
        assert same(g.random(4), expected), k
    # The records as capture_rng writes them for the same generators: the
    # importer and the Python package share the layouts.
    for k, g in gens.items():
        g.bit_generator.state = states[k]
    captured = rckpt.capture_rng(gens, python=False, numpy=False, torch=False)
    assert {k: captured[f"numpy.{k}"].data for k in gens} == \
        {k: ck.rng[f"rngs.{k}"].data for k in gens}
    rckpt.convert(tmp / "g.pt", tmp / "g.rckpt")
    rckpt.convert(tmp / "g.rckpt", tmp / "back.pt")
    back = torch.load(tmp / "back.pt", weights_only=False)
    assert all(same(back["rngs"][k], states[k]) for k in states)


def test_capture_rngs_records_export_as_uint8_tensors_that_any_torch_load_reads(tmp):
    # Records only rckpt.save holds (no NumPy state in the tree) stay bytes in a
    # .pt, so that torch.load(weights_only=True) needs no NumPy globals.
    rckpt.save(tmp / "c.rckpt", {"controller": {"epoch": 1}},
               rng=rckpt.capture_rng({"pcg": generator("PCG64")}))
    rckpt.convert(tmp / "c.rckpt", tmp / "c.pt")
    back = torch.load(tmp / "c.pt", weights_only=True)
    assert back["numpy.global"].dtype == torch.uint8 and back["numpy.global"].numel() == 2516
    assert back["numpy.pcg"].numel() == 44
    ck = rckpt.load(tmp / "c.pt")
    assert ck.rng["numpy.global"].kind == "numpy"  # the record rckpt wrote beside data.pkl


def test_a_damaged_numpy_record_is_refused_naming_the_field():
    state = np.random.RandomState(1).get_state()
    data = bytearray(rckpt.capture_rng({"g": np.random.RandomState(1)}, python=False,
                                       torch=False)["numpy.g"].data)
    struct.pack_into("<I", data, 2500, 700)  # pos past the 624 words
    rng = rckpt.RngState({"numpy": rckpt.RngRecord("numpy", "cpu", bytes(data))})
    with pytest.raises(rckpt.CorruptionError, match=r"field '2' \(u32 at offset 2500\): "
                                                    r"expected 0\.\.624, got 700"):
        rckpt.restore_rng(rng)
    assert same(np.random.RandomState(1).get_state(), state)


NUMERIC_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "float16", "float32", "float64", "longdouble", "complex64",
                  "complex128", "clongdouble", "datetime64[s]", "timedelta64[ms]", ">i4", ">c16"]


def example(dtype, shape):
    n = int(np.prod(shape))
    raw = np.arange(1, n + 1)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        a = (raw + 1j * (raw + 0.5)).astype(dt)
    elif dt.kind in "mM":
        a = raw.astype(np.int64).view(dt)
    elif dt.kind == "b":
        a = raw % 3 == 0
    elif dt.kind == "f":
        a = (raw / 3).astype(dt)
    else:
        a = (raw * 7).astype(dt)
    return a.reshape(shape)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_numpy_arrays_in_a_pt_come_back_as_rckpt_save_gives_them(tmp, dtype):
    arrays = {"zero_d": example(dtype, ()), "empty": example(dtype, (0, 2)),
              "matrix": example(dtype, (2, 3)),
              "fortran": np.asfortranarray(example(dtype, (2, 3)))}
    torch.save({"metrics": arrays}, tmp / "a.pt")
    rckpt.save(tmp / "a.rckpt", {"metrics": arrays})
    from_pt = rckpt.load(tmp / "a.pt")
    from_rckpt = rckpt.load(tmp / "a.rckpt")
    for k, a in arrays.items():
        for b in (from_pt["metrics"][k], from_rckpt["metrics"][k]):
            assert type(b) is np.ndarray and b.dtype == a.dtype.newbyteorder("=") and \
                b.shape == a.shape and np.array_equal(a, b), (dtype, k)
        assert torch.equal(from_pt.tensors[f"metrics.{k}"], from_rckpt.tensors[f"metrics.{k}"])
    rckpt.convert(tmp / "a.pt", tmp / "a2.rckpt")
    rckpt.convert(tmp / "a2.rckpt", tmp / "back.pt")
    back = torch.load(tmp / "back.pt", weights_only=False)["metrics"]
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype.newbyteorder("=") and np.array_equal(back[k], a)


@pytest.mark.parametrize("value", [
    np.float64(0.3), np.float32(0.1), np.float16(1.5), np.int64(7), np.int8(-3),
    np.uint64(2 ** 64 - 1), np.uint8(200), np.bool_(True), np.complex64(1 + 2j),
    np.complex128(-0.5j), np.longdouble("0.1"), np.datetime64("2024-02-29T12:00", "m"),
    np.timedelta64(90, "s"), np.str_("\u00e9poque"), np.bytes_(b"\x00\xff")],
    ids=lambda v: type(v).__name__)
def test_numpy_scalars_in_a_pt_come_back_with_their_type_and_value(tmp, value):
    torch.save({"controller": {"x": value}}, tmp / "s.pt")
    b = rckpt.load(tmp / "s.pt")["controller"]["x"]
    assert type(b) is type(value) and b.tobytes() == value.tobytes()
    rckpt.convert(tmp / "s.pt", tmp / "s.rckpt")
    rckpt.convert(tmp / "s.rckpt", tmp / "back.pt")
    b = torch.load(tmp / "back.pt", weights_only=False)["controller"]["x"]
    assert type(b) is type(value) and b.tobytes() == value.tobytes()


def test_values_rckpt_save_wrote_export_as_numpy_values(tmp):
    hist = np.arange(4, dtype=np.uint32)
    rckpt.save(tmp / "m.rckpt", {"metrics": {"hist": hist, "best": np.float32(0.25)}})
    rckpt.convert(tmp / "m.rckpt", tmp / "m.pt")
    back = torch.load(tmp / "m.pt", weights_only=False)["metrics"]
    assert back["hist"].dtype == np.uint32 and np.array_equal(back["hist"], hist)
    assert type(back["best"]) is np.float32 and back["best"] == np.float32(0.25)


@pytest.mark.parametrize("major", [1, 2])
def test_the_fixture_of_either_numpy_major_converts_back_spelled_as_it_was(tmp, major):
    src = os.path.join(DATA, "pytorch", f"numpy_values_np{major}.pt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rckpt.convert(src, tmp / "v.rckpt")
        # What stays inert (string, object and structured arrays, a subclass,
        # a dtype) is written as None.
        rckpt.convert(tmp / "v.rckpt", tmp / "v.pt", drop_objects=True)
    assert "numpy.matrix" in str(caught[0].message)
    dropped = [str(w.message) for w in caught if w.category is rckpt.DroppedValueWarning]
    assert len(dropped) == 5 and all("at 'inert." in m for m in dropped)
    with zipfile.ZipFile(tmp / "v.pt") as z:
        pickle = z.read("archive/data.pkl")
    spelled = "numpy._core" if major == 2 else "numpy.core"
    assert f"{spelled}.multiarray\n_reconstruct".encode() in pickle
    if major == 2 and NUMPY_MODULE == "numpy.core":
        pytest.skip("NumPy 1 cannot unpickle NumPy 2's module names (numpy._core)")
    original = torch.load(src, weights_only=False)
    back = torch.load(tmp / "v.pt", weights_only=False)
    for part in ("arrays", "scalars", "rng"):
        for k, v in original[part].items():
            b = back[part][k]
            if isinstance(v, np.ndarray):
                assert v.dtype.newbyteorder("=") == b.dtype and np.array_equal(v, b), k
            elif isinstance(v, np.generic):
                assert type(b) is type(v) and b.tobytes() == v.tobytes(), k
            else:
                assert same(b, v), k
