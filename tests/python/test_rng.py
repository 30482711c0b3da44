"""capture_rng / restore_rng for every generator, and the rule for fewer CUDA devices."""

import random

import numpy as np
import pytest
import torch

import rckpt


def draws(gens):
    return (random.random(), np.random.rand(), torch.rand(3).tolist(),
            [g.random() if hasattr(g, "random") else torch.rand(2, generator=g).tolist()
             for g in gens.values()])


def test_capture_restore_every_generator_continues_the_same_sequence(tmp):
    gens = {"pcg": np.random.default_rng(1), "mt": np.random.Generator(np.random.MT19937(2)),
            "sfc": np.random.Generator(np.random.SFC64(3)),
            "philox": np.random.Generator(np.random.Philox(4)),
            "dxsm": np.random.Generator(np.random.PCG64DXSM(5)),
            "legacy": np.random.RandomState(6), "torchgen": torch.Generator().manual_seed(7)}
    np.random.randn()  # leaves a cached gaussian in the legacy state
    random.gauss(0, 1)
    for g in gens.values():
        g.random(3) if hasattr(g, "random") and not isinstance(g, torch.Generator) else None
    rng = rckpt.capture_rng(gens)
    rckpt.save(tmp / "r.rckpt", {"controller": {}}, rng=rng)
    expected = draws(gens)
    expected_gauss = (random.gauss(0, 1), np.random.randn())
    ck = rckpt.load(tmp / "r.rckpt")
    assert list(ck.rng) == list(rng)
    assert {n: r.kind for n, r in ck.rng.items()}["python.random"] == "python"
    report = rckpt.restore_rng(ck.rng, gens)
    assert set(report.restored) == set(rng) and report.skipped == []
    assert draws(gens) == expected
    assert (random.gauss(0, 1), np.random.randn()) == expected_gauss


def test_rng_records_load_to_host_under_every_option(tmp):
    rng = rckpt.RngState(rckpt.capture_rng())
    rng["torch.cuda.0"] = rckpt.RngRecord("torch_cuda", "cuda:0", bytes(range(16)))
    rng["torch.cuda.1"] = rckpt.RngRecord("torch_cuda", "cuda:1", bytes(range(16, 32)))
    rckpt.save(tmp / "r.rckpt", {"model": {"w": torch.ones(2)}}, rng=rng, origin="cuda:1")
    for kwargs in ({"map_location": "cuda:0"}, {"model_device": "cuda:0"},
                   {"map_location": {"cuda:1": "cuda:0"}}, {"map_location": "cpu"}):
        ck = rckpt.load(tmp / "r.rckpt", emulate_devices=1, **kwargs)
        assert ck.placement["model.w"] == ("cpu" if kwargs.get("map_location") == "cpu" else "cuda:0")
        assert ck.rng["torch.cuda.1"] == rng["torch.cuda.1"]  # bytes on the host
        assert ck.rng["torch.cuda.1"].origin == "cuda:1"


@pytest.mark.parametrize("devices", [0, 1, 2, 3])
def test_cuda_generators_restore_to_the_devices_that_exist(tmp, devices):
    rng = rckpt.RngState()
    for i in range(2):
        rng[f"torch.cuda.{i}"] = rckpt.RngRecord("torch_cuda", f"cuda:{i}", bytes([i]) * 16)
    rckpt.save(tmp / "r.rckpt", {"controller": {}}, rng=rng)
    ck = rckpt.load(tmp / "r.rckpt", emulate_devices=devices)
    set_calls = []
    report = rckpt.restore_rng(ck.rng, device_count=rckpt.cuda_device_count(devices),
                               cuda_set_state=lambda s, i: set_calls.append((i, bytes(s.numpy()))))
    assert set_calls == [(i, bytes([i]) * 16) for i in range(min(devices, 2))]
    assert report.skipped == [f"torch.cuda.{i}" for i in range(devices, 2)]


def test_damaged_record_restores_nothing(tmp):
    rng = rckpt.capture_rng()
    random.seed(5)
    before = random.getstate()
    bad = rckpt.RngState(rng)
    bad["torch.cpu"] = rckpt.RngRecord("torch_cpu", "cpu", b"\x00" * 10)
    with pytest.raises(rckpt.CorruptionError, match="5056"):
        rckpt.restore_rng(bad)
    assert random.getstate() == before  # python.random came first and was not touched


def test_unknown_generator_is_a_type_error():
    with pytest.raises(TypeError, match="'x' is a"):
        rckpt.capture_rng({"x": object()})
