"""rckpt.doctor() and `python -m rckpt doctor`: what rckpt sees of the GPUs, and
torch's view beside it. Without a GPU here, the driver is the machine's (none)
or the stand-in driver of the C++ tests (RCKPT_CUDA_STANDIN), whose two devices
torch cannot see."""

import os
import subprocess
import sys

import pytest
import torch

import rckpt

STANDIN = os.environ.get("RCKPT_CUDA_STANDIN", "")
needs_standin = pytest.mark.skipif(not STANDIN or not os.path.exists(STANDIN),
                                   reason="no stand-in CUDA driver (RCKPT_CUDA_STANDIN)")


def test_a_machine_without_a_driver_is_usable_and_says_why():
    report = rckpt.doctor(cuda_driver="/nonexistent/libcuda.so.1")
    assert report.ok and report.problem is None
    assert report.devices == []
    assert "was not found" in report.no_device_reason
    assert report.cuda_built
    text = str(report)
    assert "devices: none" in text and "OK: no GPU here" in text


@needs_standin
def test_devices_are_listed_by_uuid_with_their_memory_and_bus(monkeypatch):
    monkeypatch.setenv("RCKPT_STANDIN_DEVICES", "2")
    report = rckpt.doctor(cuda_driver=STANDIN, compare_torch=False)
    assert report.ok, report.problem
    assert [d.index for d in report.devices] == [0, 1]
    assert report.devices[0].uuid != report.devices[1].uuid
    assert all(d.memory_bytes > 0 for d in report.devices)
    assert report.driver_version == 13000
    assert report.pinned_probe_error is None
    assert "cuda:1" in str(report)
    # Only this process's device (no torch, no LOCAL_RANK: cuda:0) is examined.
    assert report.current_device == 0
    assert [d.examined for d in report.devices] == [True, False]
    assert report.devices[0].kernel_loads
    assert "not examined" in str(report)


@needs_standin
def test_the_device_examined_is_the_local_ranks_or_every_one_when_asked(monkeypatch):
    # The stand-in's two devices (it reads RCKPT_STANDIN_DEVICES once, when the process first
    # loads it); rank 1 of a torchrun job without torch's view says which is its own.
    monkeypatch.setenv("RCKPT_STANDIN_DEVICES", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    report = rckpt.doctor(cuda_driver=STANDIN, compare_torch=False)
    assert report.ok, report.problem
    assert report.current_device == 1
    assert [d.examined for d in report.devices] == [False, True]
    assert "cuda:1's context" in str(report)
    every = rckpt.doctor(cuda_driver=STANDIN, compare_torch=False, all_devices=True)
    assert every.all_devices and all(d.examined and d.kernel_loads for d in every.devices)
    # The kernel image's driver minimum, and why.
    assert report.kernel_min_driver_version == 12000
    assert "R525" in report.kernel_min_driver_why
    assert "needs a driver for CUDA 12.0 or newer" in str(report)


@needs_standin
def test_gpus_torch_cannot_use_are_a_problem_with_the_fix():
    if torch.cuda.is_available():
        pytest.skip("torch here has CUDA: the stand-in's devices would not be its own")
    report = rckpt.doctor(cuda_driver=STANDIN)
    assert not report.ok
    assert report.torch is not None and not report.torch.matches
    assert report.problem is not None
    assert "torch in this process cannot use CUDA" in report.problem
    assert 'map_location="cpu"' in report.problem


@needs_standin
def test_python_m_rckpt_doctor_exits_with_the_verdict():
    env = dict(os.environ)
    ok = subprocess.run([sys.executable, "-m", "rckpt", "doctor", "--cuda-driver",
                         "/nonexistent/libcuda.so.1"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "OK: no GPU here" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "rckpt", "doctor", "--cuda-driver", STANDIN],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == (0 if torch.cuda.is_available() else 6), bad.stdout + bad.stderr
    usage = subprocess.run([sys.executable, "-m", "rckpt", "frobnicate"], capture_output=True,
                           text=True, env=env)
    assert usage.returncode == 2 and "python -m rckpt doctor" in usage.stderr


def test_doctor_checks_its_argument():
    with pytest.raises(TypeError, match="cuda_driver must be a non-empty str"):
        rckpt.doctor(cuda_driver="")
