"""restore_rng on the RNG records of files other programs wrote: a Trainer rng_state.pth
(Trainer._save_rng_state's dict) and accelerate's random_states_<i>.pkl
(save_accelerator_state's), made here with torch.save of the same dicts. Read from the file
and from its .rckpt, restore_rng puts every record back into the generator it came from, so
that the next draws of random, NumPy and torch are the ones the writing process would have
made; CUDA records go to the devices that exist (PYTHON.md, "RNG")."""

import random
import struct

import numpy as np
import pytest
import torch

import rckpt


def cuda_state(seed, offset):
    """A CUDA generator's state as torch >= 2.1 gives it: u64 seed, i64 Philox offset."""
    return torch.frombuffer(bytearray(struct.pack("<Qq", seed, offset)), dtype=torch.uint8)


def seed_and_draw():
    """Generators in a state of a run under way (a cached Gaussian in Python's and NumPy's)."""
    random.seed(6)
    random.gauss(0, 1)
    np.random.seed(5)
    np.random.standard_normal()
    torch.manual_seed(7)
    torch.rand(5)


def seed_otherwise():
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)


def next_draws():
    return (random.random(), random.gauss(0, 1), np.random.standard_normal(3).tolist(),
            np.random.randint(0, 1000, 4).tolist(), torch.rand(3), torch.randn(2))


def same_draws(a, b):
    return a[:4] == b[:4] and all(torch.equal(x, y) for x, y in zip(a[4:], b[4:]))


def trainer_state(cuda):
    """Trainer._save_rng_state's dict; "cuda" as one device's state or, in a distributed run,
    get_rng_state_all()'s list."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "cpu": torch.random.get_rng_state()}
    if cuda is not None:
        state["cuda"] = cuda
    return state


def accelerate_state(cuda):
    """save_accelerator_state's dict (torch_cuda_manual_seed is get_rng_state_all()'s list,
    empty without CUDA)."""
    return {"step": 3, "random_state": random.getstate(),
            "numpy_random_seed": np.random.get_state(),
            "torch_manual_seed": torch.get_rng_state(), "torch_cuda_manual_seed": cuda}


LAYOUTS = {
    "Trainer": ("rng_state.pth", trainer_state, ["python", "numpy", "cpu"]),
    "accelerate": ("random_states_0.pkl", accelerate_state,
                   ["random_state", "numpy_random_seed", "torch_manual_seed"]),
}


def files(tmp, name, state):
    torch.save(state, tmp / name)
    rckpt.convert(tmp / name, tmp / (name + ".rckpt"))
    return [tmp / name, tmp / (name + ".rckpt")]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_restore_rng_restores_every_generator_of_the_file(tmp, layout):
    name, make, records = LAYOUTS[layout]
    seed_and_draw()
    state = make(None if layout == "Trainer" else [])  # as written on a machine without CUDA
    expected = next_draws()
    for path in files(tmp, name, state):
        ck = rckpt.load(path)
        assert sorted(ck.rng) == sorted(records), path
        seed_otherwise()
        assert not same_draws(next_draws(), expected)  # the test can fail
        report = rckpt.restore_rng(ck.rng, device_count=0)
        assert sorted(report.restored) == sorted(records) and report.skipped == [], path
        assert same_draws(next_draws(), expected), path


@pytest.mark.parametrize("layout,cuda,names", [
    ("Trainer", cuda_state(11, 0), ["cuda"]),
    ("Trainer", [cuda_state(11, 4), cuda_state(12, 8), cuda_state(13, 12)],
     ["cuda.0", "cuda.1", "cuda.2"]),
    ("accelerate", [cuda_state(11, 4), cuda_state(12, 8), cuda_state(13, 12)],
     ["torch_cuda_manual_seed.0", "torch_cuda_manual_seed.1", "torch_cuda_manual_seed.2"]),
], ids=["Trainer, one device", "Trainer, distributed", "accelerate"])
def test_cuda_records_go_to_the_devices_that_exist(tmp, layout, cuda, names):
    """Device i's record restores device i's generator where i < device_count; records of
    devices the machine lacks are skipped, and all of them on a machine without CUDA."""
    name, make, records = LAYOUTS[layout]
    states = cuda if isinstance(cuda, list) else [cuda]
    for path in files(tmp, name, make(cuda)):
        ck = rckpt.load(path)
        assert [(n, ck.rng[n].kind, ck.rng[n].origin) for n in names] == \
            [(n, "torch_cuda", f"cuda:{i}") for i, n in enumerate(names)], path
        calls = []
        report = rckpt.restore_rng(ck.rng, device_count=2,
                                   cuda_set_state=lambda t, i: calls.append((i, t.clone())))
        kept = min(len(names), 2)
        assert [i for i, _ in calls] == list(range(kept)), path
        assert all(torch.equal(t, states[i]) for i, t in calls), path
        assert sorted(report.restored) == sorted(records + names[:kept]), path
        assert report.skipped == names[kept:], path
        report = rckpt.restore_rng(ck.rng, device_count=0,
                                   cuda_set_state=lambda t, i: calls.append((i, t)))
        assert sorted(report.skipped) == sorted(names) and len(calls) == kept, path


def test_records_under_other_names_or_of_another_kind_are_left_alone(tmp):
    """A packed folder's rng_state.cpu or a state dict's own "cpu" entry of another kind names
    no process-wide generator to restore."""
    seed_and_draw()
    torch.save({"rng_state": trainer_state(None), "cpu": cuda_state(3, 4)}, tmp / "other.pt")
    ck = rckpt.load(tmp / "other.pt")
    assert ck.rng["cpu"].kind == "torch_cuda"  # 16 bytes under an RNG key
    seed_otherwise()
    before = next_draws()
    seed_otherwise()
    report = rckpt.restore_rng(ck.rng, device_count=2, cuda_set_state=lambda t, i: 1 / 0)
    assert report.restored == []
    assert sorted(report.skipped) == ["cpu", "rng_state.cpu", "rng_state.numpy",
                                      "rng_state.python"]
    assert same_draws(next_draws(), before)


def test_capture_rngs_records_restore_as_before():
    seed_and_draw()
    rng = rckpt.capture_rng()
    expected = next_draws()
    seed_otherwise()
    report = rckpt.restore_rng(rng, device_count=0)
    assert report.restored == ["python.random", "numpy.global", "torch.cpu"]
    assert same_draws(next_draws(), expected)
