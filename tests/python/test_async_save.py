"""rckpt.save_async and SaveFuture: the file holds the state at the call,
whatever the caller does next; one save in flight; every background error
surfaces once, with the path and the cause; saves pending at interpreter exit
finish; Ctrl-C while waiting cancels."""

import contextlib
import copy
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import rckpt
from conftest import assert_same


def train_state(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step(model, opt)
    return model, opt


def step(model, opt):
    loss = model(torch.randn(16, 64)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def snapshot(state):
    """A deep copy of a state: what the file must hold."""
    return copy.deepcopy(state)


def full_state(model, opt, epoch):
    return {"model": model.state_dict(), "optimizer": opt.state_dict(),
            "controller": {"epoch": epoch, "history": [1.0, 2.0]}}


def test_file_holds_the_state_at_the_call_after_optimizer_step_add_and_del(tmp_path):
    model, opt = train_state()
    state = full_state(model, opt, 3)
    expected = snapshot(state)
    fut = rckpt.save_async(tmp_path / "ck.rckpt", state)
    # Everything a training loop does next, before the persist may have run.
    step(model, opt)                                   # in place: parameters and Adam state
    next(model.parameters()).data.add_(1.0)
    state["controller"]["epoch"] = 4                   # the tree
    state["controller"]["history"].append(3.0)
    del state, model, opt
    assert fut.result() is None
    back = rckpt.load(tmp_path / "ck.rckpt")
    assert_same(dict(back), expected)


def test_rng_is_captured_at_the_call_not_at_the_persist(tmp_path):
    torch.manual_seed(5)
    rng = rckpt.capture_rng()
    after_capture = torch.rand(4)
    fut = rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.ones(3)}}, rng=rng)
    torch.rand(1000)  # the generator moves on while the file is written
    fut.result()
    rckpt.restore_rng(rckpt.load(tmp_path / "ck.rckpt").rng)
    assert torch.equal(torch.rand(4), after_capture)


def test_two_saves_in_a_row_each_file_holds_its_own_state(tmp_path):
    model, opt = train_state()
    first = snapshot(full_state(model, opt, 1))
    f1 = rckpt.save_async(tmp_path / "a.rckpt", full_state(model, opt, 1))
    step(model, opt)
    second = snapshot(full_state(model, opt, 2))
    f2 = rckpt.save_async(tmp_path / "b.rckpt", full_state(model, opt, 2))  # f1 may be pending
    assert f1.done()  # one save in flight: the second call waited for the first
    step(model, opt)
    f2.result()
    assert_same(dict(rckpt.load(tmp_path / "a.rckpt")), first)
    assert_same(dict(rckpt.load(tmp_path / "b.rckpt")), second)


def test_same_path_twice_keeps_the_newer(tmp_path):
    rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.zeros(5)}})
    rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.ones(5)}}).result()
    assert torch.equal(rckpt.load(tmp_path / "ck.rckpt")["model"]["w"], torch.ones(5))
    assert os.listdir(tmp_path) == ["ck.rckpt"]


def test_future_interface(tmp_path):
    seen = []
    fut = rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.ones(5)}})
    assert fut.result(timeout=60) is None
    assert fut.done() and fut.exception() is None
    fut.add_done_callback(seen.append)  # already done: called at once
    assert seen == [fut]
    assert "done" in repr(fut) and fut.path == str(tmp_path / "ck.rckpt")


def test_done_callback_runs_once_the_file_is_durable(tmp_path):
    release, called = threading.Event(), threading.Event()
    seen = []

    def hold(done, total):
        release.wait()
        return True

    fut = rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.ones(5)}}, progress=hold)
    def on_done(f):
        seen.append(os.path.exists(f.path))
        called.set()

    fut.add_done_callback(on_done)
    assert not fut.done() and seen == []
    release.set()
    assert called.wait(60)
    assert seen == [True]


def test_result_timeout_raises_timeout_error_and_the_save_goes_on(tmp_path):
    release = threading.Event()
    fut = rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.ones(5)}},
                           progress=lambda d, t: release.wait() or True)
    with pytest.raises(TimeoutError, match="not done after 0.01 s"):
        fut.result(timeout=0.01)
    release.set()
    fut.result()
    assert rckpt.load(tmp_path / "ck.rckpt")["model"]["w"].sum() == 5


def test_error_in_a_missing_directory_names_the_path_and_cause(tmp_path):
    path = tmp_path / "gone" / "ck.rckpt"
    fut = rckpt.save_async(path, {"model": {"w": torch.ones(5)}})
    err = fut.exception()
    assert isinstance(err, rckpt.Error) and str(path) in str(err)
    with pytest.raises(type(err)):
        fut.result()


def test_directory_removed_mid_run_surfaces_and_next_save_works(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    rckpt.save_async(d / "ck.rckpt", {"model": {"w": torch.ones(5)}}).result()
    for name in os.listdir(d):
        os.remove(d / name)
    d.rmdir()
    with pytest.raises(rckpt.Error, match="ck.rckpt"):
        rckpt.save_async(d / "ck.rckpt", {"model": {"w": torch.ones(5)}}).result()
    d.mkdir()
    rckpt.save_async(d / "ck.rckpt", {"model": {"w": torch.zeros(5)}}).result()


def test_unretrieved_error_is_raised_by_the_next_save_which_starts_nothing(tmp_path):
    fut = rckpt.save_async(tmp_path / "gone" / "a.rckpt", {"model": {"w": torch.ones(5)}})
    with pytest.raises(rckpt.Error, match="a.rckpt"):
        rckpt.save_async(tmp_path / "b.rckpt", {"model": {"w": torch.ones(5)}})
    assert not (tmp_path / "b.rckpt").exists()
    assert fut.done()
    # Handed over once: the next save runs.
    rckpt.save_async(tmp_path / "b.rckpt", {"model": {"w": torch.ones(5)}}).result()
    assert (tmp_path / "b.rckpt").exists()


def test_progress_exception_cancels_and_is_the_futures_error(tmp_path):
    rckpt.save(tmp_path / "ck.rckpt", {"model": {"w": torch.zeros(5)}})

    def boom(done, total):
        raise RuntimeError("stop here")

    fut = rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": torch.ones(5)}}, progress=boom)
    with pytest.raises(RuntimeError, match="stop here"):
        fut.result()
    assert torch.equal(rckpt.load(tmp_path / "ck.rckpt")["model"]["w"], torch.zeros(5))
    assert os.listdir(tmp_path) == ["ck.rckpt"]


def test_bad_state_raises_at_the_call(tmp_path):
    with pytest.raises(TypeError, match="model.f"):
        rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"f": object()}})
    with pytest.raises(TypeError, match="path"):
        rckpt.save_async(3, {"model": {}})
    with pytest.raises(rckpt.InvalidArgumentError, match="codec"):
        rckpt.save_async(tmp_path / "ck.rckpt", {"model": {}}, codec="lz4")


def test_zstd_and_emulated_devices(tmp_path):
    w = torch.randn(1000)
    expected = w.clone()
    fut = rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": w}}, codec="zstd",
                           chunk_bytes=1024, origin="cuda:1")
    w.add_(1)
    fut.result()
    back = rckpt.load(tmp_path / "ck.rckpt", model_device="cpu")
    assert torch.equal(back["model"]["w"], expected)
    assert back.origin["model.w"] == "cuda:1"


@contextlib.contextmanager
def mounted_tmpfs(path, options):
    """A tmpfs at ``path`` (needs root and a kernel that lets this process mount)."""
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_no_space_left_surfaces_and_the_previous_file_survives(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "size=2m") as d:
        rckpt.save(d / "ck.rckpt", {"model": {"w": torch.ones(1000)}})
        before = (d / "ck.rckpt").read_bytes()
        fut = rckpt.save_async(d / "ck.rckpt", {"model": {"w": torch.ones(1 << 20)}})  # 4 MiB
        err = fut.exception()
        assert isinstance(err, rckpt.IoError), err
        assert "No space left on device" in str(err) and "ck.rckpt" in str(err)
        assert (d / "ck.rckpt").read_bytes() == before
        assert os.listdir(d) == ["ck.rckpt"]


def test_read_only_directory_surfaces(tmp_path):
    with mounted_tmpfs(tmp_path / "ro", "ro,size=1m") as d:
        err = rckpt.save_async(d / "ck.rckpt", {"model": {"w": torch.ones(5)}}).exception()
        assert isinstance(err, rckpt.Error) and "ck.rckpt" in str(err)
        assert "Read-only file system" in str(err)


def run_python(code, *args):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          capture_output=True, text=True, env=dict(os.environ), timeout=300)


def test_interpreter_exit_finishes_the_pending_save(tmp_path):
    r = run_python("""
        import sys, threading, torch, rckpt
        release = threading.Event()
        # Still writing when the script ends: the exit must wait for it.
        def hold(done, total):
            release.set()
            return True
        rckpt.save_async(sys.argv[1], {"model": {"w": torch.arange(1 << 20)}}, progress=hold)
        release.wait()
        """, tmp_path / "ck.rckpt")
    assert r.returncode == 0, r.stderr
    assert torch.equal(rckpt.load(tmp_path / "ck.rckpt")["model"]["w"], torch.arange(1 << 20))


def test_interpreter_exit_reports_a_failure_nobody_saw(tmp_path):
    r = run_python("""
        import sys, torch, rckpt
        rckpt.save_async(sys.argv[1], {"model": {"w": torch.ones(5)}})
        """, tmp_path / "gone" / "ck.rckpt")
    assert "asynchronous save to" in r.stderr and "ck.rckpt" in r.stderr, r.stderr


def test_ctrl_c_in_result_cancels_and_keeps_the_previous_file(tmp_path):
    r = run_python("""
        import os, signal, sys, threading, torch, rckpt
        # Ctrl-C is KeyboardInterrupt even where this process was started with SIGINT
        # ignored (a background job of a non-interactive shell, xargs, nohup), in which case
        # Python installs no handler of its own.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        path = sys.argv[1]
        rckpt.save(path, {"model": {"w": torch.zeros(5)}})
        waiting, cancelled, fired = threading.Event(), threading.Event(), []
        def interrupt_once_waiting(done, total):
            if not fired:
                fired.append(True)
                waiting.wait()
                os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C, seen by the main thread
                cancelled.wait()                      # the persist goes on only once it is
            return True
        fut = rckpt.save_async(path, {"model": {"w": torch.ones(1 << 20)}}, chunk_bytes=4096,
                               progress=interrupt_once_waiting)
        class Saver:  # tells the callback when result() has cancelled the save
            def __init__(self, saver):
                self.saver = saver
            def cancel(self):
                self.saver.cancel()
                cancelled.set()
        fut._saver = Saver(fut._saver)
        try:
            waiting.set()
            fut.result()
        except KeyboardInterrupt:
            print("interrupted", type(fut.exception()).__name__, fut.exception())
        """, tmp_path / "ck.rckpt")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "interrupted IoError" in r.stdout and "cancelled" in r.stdout, r.stdout
    assert torch.equal(rckpt.load(tmp_path / "ck.rckpt")["model"]["w"], torch.zeros(5))
    assert os.listdir(tmp_path) == ["ck.rckpt"]


def test_snapshot_memory_is_reused_across_saves(tmp_path):
    from rckpt.async_save import _module_saver
    w = torch.randn(1 << 18)
    rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": w}}).result()
    capacity = _module_saver().stats()["snapshot_capacity"]
    assert capacity >= w.numel() * 4
    for _ in range(5):
        w.add_(1)
        rckpt.save_async(tmp_path / "ck.rckpt", {"model": {"w": w}}).result()
        stats = _module_saver().stats()
        assert stats["snapshot_capacity"] == capacity
        assert stats["snapshot_bytes"] == w.numel() * 4
    assert torch.equal(rckpt.load(tmp_path / "ck.rckpt")["model"]["w"], w)


def test_takes_what_save_takes_a_state_dict_root(tmp_path):
    model, _ = train_state()
    sd = model.state_dict()
    expected = snapshot(sd)
    fut = rckpt.save_async(tmp_path / "ck.rckpt", sd)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0)
    fut.result()
    assert_same(rckpt.load(tmp_path / "ck.rckpt"), expected)


def test_a_file_object_is_refused_with_a_pointer_to_save(tmp_path):
    with open(tmp_path / "ck.rckpt", "wb") as f:
        with pytest.raises(TypeError, match="rckpt.save takes file objects"):
            rckpt.save_async(f, {"model": {"w": torch.ones(2)}})
