"""rckpt's glue to torch's CUDA world, without a GPU: loads onto CUDA devices take their memory
from torch.empty (torch's caching allocator), order their copies after torch.cuda.current_stream,
and resolve model_device="auto" as torch.cuda.current_device(). Each case runs in a child
process where "libcuda.so.1" is the stand-in driver of the C++ tests (RCKPT_CUDA_STANDIN) and
torch.cuda is played by fake_torch_cuda.py on top of it; the real GPU suite is test_gpu.py."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

STANDIN = os.environ.get("RCKPT_CUDA_STANDIN", "")
pytestmark = [
    pytest.mark.skipif(not STANDIN or not os.path.exists(STANDIN),
                       reason="no stand-in CUDA driver (RCKPT_CUDA_STANDIN)"),
    pytest.mark.skipif(torch.cuda.is_available(),
                       reason="torch here has CUDA: test_gpu.py covers the real thing"),
]

HERE = Path(__file__).resolve().parent

PRELUDE = """
import json, sys, threading, time
sys.path.insert(0, {here!r})
import torch
import rckpt
from fake_torch_cuda import (CudaBlocks, Driver, FakeCudaTensor, FakeSavedCuda, FakeTorchCuda,
                             UnrecordedCuda)

driver = Driver()
state = {{"model": {{"w": torch.arange(24, dtype=torch.float32).reshape(4, 6),
                     "b": torch.linspace(-1, 1, 6, dtype=torch.float64),
                     "empty": torch.zeros(0, 3)}},
         "metrics": {{"loss": torch.tensor([0.5, 0.25])}}}}
PATH = {path!r}
rckpt.save(PATH, state)
out = {{}}

def describe(ck):
    got = {{}}
    for section, tensors in ck.items():
        for name, t in tensors.items():
            key = section + "." + name
            if isinstance(t, FakeCudaTensor):
                got[key] = {{"device": str(t.device),
                            "standin_device": driver.device_of(t.data_ptr()) if t.nbytes else None,
                            "equal": torch.equal(t.cpu(), state[section][name])}}
            else:
                got[key] = {{"device": str(t.device), "equal": torch.equal(t, state[section][name])}}
    return got
"""

EPILOGUE = """
fake.free_all()
out["violations"] = driver.violations()
driver.close()
print("RESULT " + json.dumps(out))
"""


def run_child(tmp_path: Path, body: str, devices: int = 2) -> dict[str, Any]:
    libdir = tmp_path / "driver"
    libdir.mkdir()
    (libdir / "libcuda.so.1").symlink_to(os.path.abspath(STANDIN))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{libdir}:{env.get('LD_LIBRARY_PATH', '')}"
    env["RCKPT_STANDIN_DEVICES"] = str(devices)
    code = (PRELUDE.format(here=str(HERE), path=str(tmp_path / "s.rckpt")) +
            textwrap.dedent(body) + EPILOGUE)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    assert result["violations"] == "", result["violations"]
    return result


def test_a_load_onto_cuda_takes_its_memory_from_torch_and_orders_after_torchs_stream(tmp_path):
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, current=0)
        fake.install()
        ck = rckpt.load(PATH, map_location="cuda:1")
        out["got"] = describe(ck)
        out["empty_calls"] = fake.empty_calls
        out["stream_calls"] = fake.stream_calls
        out["threads"] = sorted(fake.threads)
        out["main"] = threading.current_thread().name
        del ck
    """)
    got = r["got"]
    for key in ("model.w", "model.b", "model.empty"):
        assert got[key]["device"] == "cuda:1" and got[key]["equal"], (key, got[key])
    # Host-role sections stay in host memory under every option (docs/RELOCATION.md).
    assert got["metrics.loss"] == {"device": "cpu", "equal": True}
    # The bytes are in the stand-in's memory of cuda:1, where torch.empty put them.
    assert got["model.w"]["standin_device"] == 1 and got["model.b"]["standin_device"] == 1
    # One torch.empty per tensor with bytes, on cuda:1, on the calling thread.
    assert sorted((tuple(shape), index) for shape, _, index in r["empty_calls"]
                  if 0 not in shape) == [((4, 6), 1), ((6,), 1)]
    assert {index for _, _, index in r["empty_calls"]} == {1}
    assert r["stream_calls"] and set(r["stream_calls"]) == {1}
    assert r["threads"] == [r["main"]]


def test_a_load_waits_for_the_work_pending_on_torchs_current_stream(tmp_path):
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, current=1)
        fake.install()
        release = driver.hold_default_stream(1)   # torch's stream of cuda:1 is busy
        box = {}
        t = threading.Thread(target=lambda: box.update(ck=rckpt.load(PATH, map_location="cuda:1")))
        t.start()
        time.sleep(0.5)
        out["finished_while_held"] = not t.is_alive()
        release()
        t.join()
        out["got"] = describe(box.pop("ck"))
    """)
    assert r["finished_while_held"] is False
    assert all(v["equal"] for v in r["got"].values()), r["got"]
    assert r["got"]["model.w"]["device"] == "cuda:1" and r["got"]["model.w"]["standin_device"] == 1


@pytest.mark.parametrize("current", [0, 1])
def test_model_device_auto_is_torchs_current_device(tmp_path, current):
    r = run_child(tmp_path, f"""
        fake = FakeTorchCuda(driver, current={current})
        fake.install()
        ck = rckpt.load(PATH, model_device="auto")
        out["got"] = describe(ck)
        del ck
    """)
    assert r["got"]["model.w"]["device"] == f"cuda:{current}"
    assert r["got"]["model.w"]["standin_device"] == current
    assert r["got"]["model.w"]["equal"] and r["got"]["model.b"]["equal"]
    # Only the model's tensors move; the rest stay where they were saved.
    assert r["got"]["metrics.loss"]["device"] == "cpu" and r["got"]["metrics.loss"]["equal"]


def test_bare_cuda_is_torchs_current_device_everywhere_a_device_is_given(tmp_path):
    # Rank 3 of a torchrun job on a 4-GPU node, after torch.cuda.set_device(3): torch.load's
    # map_location="cuda" means cuda:3 there, and so does every bare "cuda" rckpt is given.
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, device_count=4, current=3)
        fake.install()
        cases = {
            "map_location='cuda'": dict(map_location="cuda"),
            "map_location=torch.device('cuda')": dict(map_location=torch.device("cuda")),
            "model_device='cuda'": dict(model_device="cuda"),
            "model_device=torch.device('cuda')": dict(model_device=torch.device("cuda")),
            "tag map cpu -> cuda": dict(map_location={"cpu": "cuda"}),
            "callable -> 'cuda'": dict(map_location=lambda info: "cuda"),
        }
        out["got"] = {}
        for name, kwargs in cases.items():
            ck = rckpt.load(PATH, **kwargs)
            out["got"][name] = describe(ck)
            del ck
            fake.free_all()
        out["devices_asked"] = sorted({index for _, _, index in fake.empty_calls})
    """, devices=4)
    for name, got in r["got"].items():
        assert got["model.w"]["device"] == "cuda:3", name
        assert got["model.w"]["standin_device"] == 3, name
        assert got["model.w"]["equal"], name
    assert r["devices_asked"] == [3]


def test_torch_and_rckpt_disagreeing_about_the_gpus_is_an_error_not_a_guess(tmp_path):
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, device_count=3)
        fake.install()
        try:
            rckpt.load(PATH, model_device="auto")
            out["error"] = None
        except rckpt.errors.DeviceUnavailableError as e:
            out["error"] = str(e)
        fake.available = False
        try:
            rckpt.load(PATH, map_location="cuda:0")
            out["unavailable"] = None
        except rckpt.errors.DeviceUnavailableError as e:
            out["unavailable"] = str(e)
        out["empty_calls"] = fake.empty_calls
    """)
    assert r["error"] is not None and "torch sees 3" in r["error"] and "rckpt sees 2" in r["error"]
    assert r["unavailable"] is not None
    assert "torch in this process cannot use CUDA" in r["unavailable"]
    assert 'map_location="cpu"' in r["unavailable"]
    assert r["empty_calls"] == []


def test_torch_out_of_memory_is_rckpts_out_of_memory_and_nothing_is_left_allocated(tmp_path):
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, empty_error="CUDA out of memory. Tried to allocate 96.00 B")
        fake.install()
        try:
            rckpt.load(PATH, map_location="cuda:0")
            out["error"] = None
        except rckpt.errors.OutOfMemoryError as e:
            out["error"] = str(e)
            out["is_memory_error"] = isinstance(e, MemoryError)
    """)
    assert r["error"] is not None and "torch.empty" in r["error"] and "out of memory" in r["error"]
    assert r["is_memory_error"]


SIDE_STREAM_SAVE = """
    fake = FakeTorchCuda(driver, current=0)
    fake.install()
    blocks = CudaBlocks(driver)
    side = driver.create_stream(0)            # an all-gather stream, a user's side stream
    values = torch.arange(1024, dtype=torch.float32)
    t = blocks.tensor(values, 0, side, cls={cls})
    release = driver.hold_default_stream(0)   # torch's current stream is busy: the snapshot
    fut = rckpt.save_async(PATH + ".async", {{"model": {{"t": t}}}})   # copy is held back
    out["recorded"] = list(t.recorded)
    freed = t.data_ptr()
    blocks.free(t)                            # freed right after the call ...
    del t
    reused = blocks.fill(values.numel() * 4, 0, side, 0xFF)   # ... and its memory asked for again
    out["handed_out_at_once"] = reused == freed
    release()
    fut.result()
    got = rckpt.load(PATH + ".async", map_location="cpu")["model"]["t"]
    out["saved_intact"] = bool(torch.equal(got, values))
    out["changed"] = int((got != values).sum())
    blocks.close()
    driver.destroy_stream(0, side)
"""


def test_save_async_records_every_cuda_tensor_on_the_stream_its_copies_were_ordered_against(
        tmp_path):
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, current=1)
        fake.install()
        blocks = CudaBlocks(driver)
        sides = [driver.create_stream(0), driver.create_stream(1)]
        tensors = {"a0": blocks.tensor(torch.ones(64), 0, sides[0]),
                   "a1": blocks.tensor(torch.full((5, 3), 2.0), 1, sides[1]),
                   "b1": blocks.tensor(torch.zeros(16, dtype=torch.float64), 1, sides[1]),
                   "empty0": blocks.tensor(torch.zeros(0), 0, sides[0])}
        release = driver.hold_default_stream(0)
        fut = rckpt.save_async(PATH + ".async", {"model": dict(tensors), "host": {"h": torch.ones(3)}})
        out["recorded"] = {k: list(t.recorded) for k, t in tensors.items()}
        out["done_at_return"] = fut.done()
        out["streams_asked"] = sorted(set(fake.stream_calls))
        release()
        fut.result()
        ck = rckpt.load(PATH + ".async", map_location="cpu")
        out["equal"] = {k: bool(torch.equal(ck["model"][k], torch.Tensor.as_subclass(t, torch.Tensor)))
                        for k, t in tensors.items()}
        for t in tensors.values():
            blocks.free(t)
        blocks.close()
        for d, s in enumerate(sides):
            driver.destroy_stream(d, s)
    """)
    # Each tensor is recorded once, before save_async returns (its copy still held back), on
    # torch's current stream of its own device: the stream rckpt's copies were ordered against
    # (the fake's is the default stream, handle 0). An empty one too (torch ignores that).
    assert r["done_at_return"] is False
    assert r["streams_asked"] == [0, 1]
    assert r["recorded"] == {"a0": [0], "a1": [0], "b1": [0], "empty0": [0]}, r["recorded"]
    assert all(r["equal"].values()), r["equal"]


def test_a_side_stream_tensor_freed_right_after_save_async_is_saved_intact(tmp_path):
    r = run_child(tmp_path, SIDE_STREAM_SAVE.format(cls="FakeSavedCuda"))
    assert r["recorded"] == [0]
    # The allocator held the block until torch's stream passed the copies.
    assert r["handed_out_at_once"] is False
    assert r["saved_intact"], f"{r['changed']} values changed"


def test_without_the_record_the_same_free_corrupts_the_snapshot(tmp_path):
    # The hazard the record prevents, reproduced by the stand-in's allocator: the check above
    # can fail.
    r = run_child(tmp_path, SIDE_STREAM_SAVE.format(cls="UnrecordedCuda"))
    assert r["recorded"] == []
    assert r["handed_out_at_once"] is True
    assert not r["saved_intact"] and r["changed"] == 1024, r


def test_loads_lease_from_the_device_pool_and_take_their_scratch_from_torch(tmp_path):
    r = run_child(tmp_path, """
        fake = FakeTorchCuda(driver, current=0)
        fake.install()
        big = PATH + ".zstd"
        rckpt.save(big, {"model": {"w": torch.linspace(0, 1, 50000)}}, codec="zstd")
        stats = []
        for _ in range(4):
            ck = rckpt.load(big, map_location="cuda:0")
            stats.append(ck.stats)
            del ck
        out["stats"] = stats
        out["pool"] = rckpt.device_pool_stats()
        out["scratch_calls"] = [c for c in fake.empty_calls if c[1] == "torch.uint8"]
        rckpt.release_device_pool()
        out["released"] = rckpt.device_pool_stats()
    """)
    first, last = r["stats"][0], r["stats"][-1]
    # Every shuffled byte was un-shuffled on the device, none on the host.
    assert last["device_unshuffled_bytes"] == 200000 and last["host_unshuffled_bytes"] == 0
    assert last["host_unshuffle_reason"] == ""
    # One pinned block and the same streams and events for every load after the first; the
    # un-shuffle scratch is torch's (one torch.empty of bytes per load), never the pool's.
    for key in ("pinned_allocations", "streams_created", "events_created"):
        assert last["device_pool"][key] == first["device_pool"][key], key
    assert last["device_pool"]["pinned_allocations"] == 1
    assert last["device_pool"]["device_allocations"] == 0
    assert len(r["scratch_calls"]) == 4
    pool = r["pool"]
    assert 0 < pool["pinned_bytes"] <= pool["pinned_cap"] == 512 << 20
    released = r["released"]
    assert (released["pinned_bytes"], released["streams"], released["events"]) == (0, 0, 0)
