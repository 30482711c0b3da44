"""rckpt.CheckpointManager: steps exist only once durable under their final
name, pruning after the new checkpoint is durable, resume newest-first past
damaged files and never past trouble (memory, a bad option), leftover
temporaries cleaned by the next save, and SIGKILL at several points of a
background save never costs an earlier checkpoint."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import rckpt
from conftest import assert_same


def state_at(step):
    g = torch.Generator().manual_seed(step)
    return {"model": {"w": torch.randn(2000, generator=g)}, "controller": {"step": step}}


@pytest.mark.parametrize("async_save", [True, False])
def test_keep_and_keep_every_prune_after_each_save(tmp_path, async_save):
    with rckpt.CheckpointManager(tmp_path, keep=2, keep_every=4, async_save=async_save) as m:
        for step in range(10):
            m.save(step, state_at(step))
        m.wait()
        assert m.steps() == [0, 4, 8, 9]
        assert m.latest_step() == 9
    assert sorted(os.listdir(tmp_path)) == ["latest", "step-000000.rckpt", "step-000004.rckpt",
                                            "step-000008.rckpt", "step-000009.rckpt"]
    assert (tmp_path / "latest").read_text() == "9\n"


def test_keep_none_keeps_everything_and_names_grow_past_six_digits(tmp_path):
    with rckpt.CheckpointManager(tmp_path, keep=None) as m:
        for step in (1, 2, 1234567):
            m.save(step, state_at(step))
    assert rckpt.CheckpointManager(tmp_path).steps() == [1, 2, 1234567]
    assert (tmp_path / "step-1234567.rckpt").exists()


def test_load_returns_the_state_and_step(tmp_path):
    m = rckpt.CheckpointManager(tmp_path)
    for step in (10, 20):
        m.save(step, state_at(step))
    ck = m.load()
    assert ck.step == 20
    assert_same(dict(ck), state_at(20))
    assert m.load(10).step == 10
    target = {"model": {"w": torch.zeros(2000)}}
    assert m.load_into(target) == 20
    assert torch.equal(target["model"]["w"], state_at(20)["model"]["w"])
    m.close()


def test_a_save_in_flight_is_not_a_step_until_durable(tmp_path):
    release = threading.Event()
    m = rckpt.CheckpointManager(tmp_path, keep=1, progress=lambda d, t: release.wait() or True)
    release.set()
    m.save(1, state_at(1)).result()
    release.clear()
    fut = m.save(2, state_at(2))
    assert m.steps() == [1] and m.latest_step() == 1   # step 2 is being written
    assert (tmp_path / "latest").read_text() == "1\n"
    release.set()
    fut.result()
    assert m.steps() == [2]  # keep=1: step 1 pruned only now
    assert (tmp_path / "latest").read_text() == "2\n"
    m.close()


def test_a_failed_save_is_never_a_step_and_prunes_nothing(tmp_path):
    cancel = threading.Event()
    m = rckpt.CheckpointManager(tmp_path, keep=1,
                                progress=lambda d, t: not cancel.is_set())
    m.save(1, state_at(1)).result()
    cancel.set()
    fut = m.save(2, state_at(2))
    assert isinstance(fut.exception(), rckpt.IoError)
    assert m.steps() == [1] and m.latest_step() == 1
    assert (tmp_path / "latest").read_text() == "1\n"
    assert sorted(os.listdir(tmp_path)) == ["latest", "step-000001.rckpt"]
    m.close()


def test_an_unretrieved_failure_is_raised_by_the_next_save(tmp_path):
    cancel_once = [True]  # the first progress call (of step 1's persist) cancels

    def progress(done, total):
        return not (cancel_once and cancel_once.pop())

    m = rckpt.CheckpointManager(tmp_path, progress=progress)
    m.save(1, state_at(1))
    with pytest.raises(rckpt.IoError, match="cancelled"):
        m.save(2, state_at(2))
    assert m.steps() == []
    m.save(2, state_at(2))
    m.close()
    assert rckpt.CheckpointManager(tmp_path).steps() == [2]


def corrupt(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # inside the tensor data: a checksum failure
    path.write_bytes(bytes(data))


def test_load_falls_back_past_damaged_latest_with_a_warning(tmp_path):
    with rckpt.CheckpointManager(tmp_path, keep=None) as m:
        for step in (1, 2, 3):
            m.save(step, state_at(step))
    corrupt(tmp_path / "step-000003.rckpt")
    with open(tmp_path / "step-000002.rckpt", "r+b") as f:
        f.truncate(100)
    m = rckpt.CheckpointManager(tmp_path, keep=None)
    with pytest.warns(UserWarning) as caught:
        ck = m.load()
    assert ck.step == 1
    assert_same(dict(ck), state_at(1))
    messages = [str(w.message) for w in caught]
    assert any("step-000003.rckpt" in s and "checksum" in s.lower() for s in messages), messages
    assert any("step-000002.rckpt" in s for s in messages), messages
    # A step asked for by number does not fall back.
    with pytest.raises(rckpt.CorruptionError):
        m.load(3)


def test_nothing_that_verifies_is_not_found(tmp_path):
    m = rckpt.CheckpointManager(tmp_path)
    with pytest.raises(rckpt.NotFoundError, match="no checkpoint"):
        m.load()
    m.save(1, state_at(1)).result()
    corrupt(tmp_path / "step-000001.rckpt")
    with pytest.warns(UserWarning, match="step-000001.rckpt"):
        with pytest.raises(rckpt.NotFoundError):
            m.load()


def test_load_skips_damage_and_raises_trouble(tmp_path, monkeypatch):
    with rckpt.CheckpointManager(tmp_path, keep=None) as m:
        for step in (1, 2):
            m.save(step, state_at(step))
    m = rckpt.CheckpointManager(tmp_path, keep=None)
    # A bad option fails on the newest step as it would on any: raised as it is, not
    # taken for damage (which would fall back to step 1, then say nothing loads).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(rckpt.InvalidArgumentError, match="unknown section .no-such-section."):
            m.load(sections=["no-such-section"])
    assert m.loaded_step is None
    # A link to a removed file is no step (the listing finds no file there, as object
    # storage lists no missing object).
    os.symlink(tmp_path / "removed.rckpt", tmp_path / "step-000003.rckpt")
    assert m.steps() == [1, 2]
    os.remove(tmp_path / "step-000003.rckpt")
    # A step whose file is gone by the time it is read (listed, then removed) is skipped,
    # with a warning.
    shutil.copy(tmp_path / "step-000002.rckpt", tmp_path / "step-000003.rckpt")
    load = rckpt.checkpoint.load

    def removed_first(path, **options):
        if path.endswith("step-000003.rckpt") and os.path.exists(path):
            os.remove(path)
        return load(path, **options)
    monkeypatch.setattr(rckpt.checkpoint, "load", removed_first)
    with pytest.warns(UserWarning, match="skipping .*step-000003.rckpt"):
        assert m.load().step == 2
    with pytest.raises(rckpt.NotFoundError, match="step 3 is not saved"):
        m.load(3)


def test_load_raises_out_of_memory_rather_than_loading_an_older_step(tmp_path):
    run = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__),
                                                       "manager_oom_child.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=240,
                         env=dict(os.environ, MALLOC_ARENA_MAX="1"))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["error"] == "OutOfMemoryError" and out["loaded"] is None, (out, run.stderr)
    assert "host memory" in out["message"], out


def test_a_save_removes_temporaries_of_dead_processes_only(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"step-000004.rckpt.tmp-{dead.pid}-0123456789abcdef"
    stale_latest = tmp_path / f"latest.tmp-{dead.pid}-0123456789abcdef"
    live = tmp_path / f"step-000005.rckpt.tmp-{os.getpid()}-0123456789abcdef"
    other = tmp_path / "notes.txt"
    for p in (stale, stale_latest, live, other):
        p.write_bytes(b"partial")
    everything = sorted(os.listdir(tmp_path))
    m = rckpt.CheckpointManager(tmp_path)
    assert m.steps() == []
    assert sorted(os.listdir(tmp_path)) == everything  # opening to read takes nothing over
    m.save(1, state_at(1)).result()
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, other.name, "latest",
                                                   "step-000001.rckpt"])


def test_bad_arguments_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="keep must be an int >= 1 or None, got 0"):
        rckpt.CheckpointManager(tmp_path, keep=0)
    with pytest.raises(ValueError, match="keep_every must be"):
        rckpt.CheckpointManager(tmp_path, keep_every=-5)
    with pytest.raises(TypeError, match="unknown save options \\['codek'\\]"):
        rckpt.CheckpointManager(tmp_path, codek="zstd")
    m = rckpt.CheckpointManager(tmp_path)
    with pytest.raises(ValueError, match="step must be an int >= 0, got -1"):
        m.save(-1, state_at(0))
    m.save(3, state_at(3)).result()
    with pytest.raises(ValueError, match="step 3 is already saved"):
        m.save(3, state_at(3))
    m.close()
    with pytest.raises(rckpt.Error, match="closed"):
        m.steps()


def test_a_stale_higher_step_never_evicts_the_one_just_saved(tmp_path):
    rckpt.save(tmp_path / "step-005000.rckpt", state_at(5000))  # an older run's
    with rckpt.CheckpointManager(tmp_path, keep=1) as m:
        m.save(10, state_at(10))
    assert sorted(os.listdir(tmp_path)) == ["latest", "step-000010.rckpt", "step-005000.rckpt"]


# SIGKILL during background saves. The child saves steps 1..3 with a
# progress callback that, at the chosen point of step 3's persist, tells the
# parent so on stdout and blocks; the parent then kills it.
CHILD = r"""
import os, sys, threading, torch, rckpt
directory, point = sys.argv[1], sys.argv[2]
hold = threading.Event()
def progress(done, total):
    if state["step"] == 3 and (point == "start" or
                               (point == "middle" and 2 * done >= total) or
                               (point == "end" and done >= total)):
        print("at", point, flush=True)
        hold.wait()  # forever: the parent kills us here
    return True
state = {"step": 0}
m = rckpt.CheckpointManager(directory, keep=2, progress=progress, chunk_bytes=1 << 16)
for step in (1, 2, 3):
    m.wait()  # so that the progress callback sees whose persist it is in
    state["step"] = step
    g = torch.Generator().manual_seed(step)
    m.save(step, {"model": {"w": torch.randn(1 << 18, generator=g)},
                  "controller": {"step": step}})
    if point == "durable" and step == 3:
        m.wait()
        print("at durable", flush=True)
        hold.wait()
m.wait()
"""


@pytest.mark.parametrize("point", ["start", "middle", "end", "durable"])
def test_sigkill_during_a_background_save_keeps_every_earlier_checkpoint(tmp_path, point):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), point],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline()
    assert line == f"at {point}\n", child.stderr.read()
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    child.stderr.close()

    names = os.listdir(tmp_path)
    if point == "durable":
        assert "step-000003.rckpt" in names
    else:
        # The partial file is never under its final name.
        assert "step-000003.rckpt" not in names
        assert any(n.startswith("step-000003.rckpt.tmp-") for n in names), names
    m = rckpt.CheckpointManager(tmp_path, keep=2)
    expected = [2, 3] if point == "durable" else [1, 2]
    assert m.steps() == expected
    for s in expected:
        rckpt.load(m.path(s), verify=True)
    latest = m.latest_step()
    ck = m.load()
    assert ck.step == latest == expected[-1]
    assert ck["controller"]["step"] == latest
    m.save(latest + 1, state_at(latest + 1)).result()
    assert not any(".tmp-" in n for n in os.listdir(tmp_path))  # cleaned by the save


def test_every_file_the_manager_touches_goes_through_the_librarys_file_system(tmp_path,
                                                                            monkeypatch):
    """Locally as in object storage, the manager's steps, "latest", listings, pruning and
    clean-up go through the library's file systems (rckpt.storage, rckpt.save): over the
    in-memory one nothing reaches the disk, a dead writer's temporary there is removed,
    and a fault injected into it (a rename that fails) fails the save, leaving the
    committed steps and "latest" as they were."""
    mem = rckpt._core.memory_file_system()
    monkeypatch.setattr(rckpt.s3, "file_system", lambda paths, s3, who: mem)
    d = str(tmp_path / "ckpt")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = os.path.join(d, f"step-000007.rckpt.tmp-{dead.pid}-0123456789abcdef")
    rckpt.storage.write(stale, b"partial")
    with rckpt.CheckpointManager(d, keep=2, async_save=False) as m:
        for step in (1, 2, 3):
            m.save(step, state_at(step))
        assert m.steps() == [2, 3]
        assert rckpt.storage.read(os.path.join(d, "latest")) == b"3\n"
        assert not rckpt.storage.exists(stale)
        assert not os.path.exists(d)  # nothing on the disk
        rckpt._core.memory_file_system_faults(mem, fail_rename=True)
        with pytest.raises(rckpt.IoError, match="Input/output error"):
            m.save(4, state_at(4))
        rckpt._core.memory_file_system_faults(mem)
        assert m.steps() == [2, 3]
        assert rckpt.storage.read(os.path.join(d, "latest")) == b"3\n"
        assert [f.path for f in rckpt.storage.list_files(d + "/")] == [
            os.path.join(d, n) for n in ("latest", "step-000002.rckpt", "step-000003.rckpt")]
        m.load()
        assert m.loaded_step == 3
