"""Progress callbacks, the ready-made bar, cancel and Ctrl-C."""

import io
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import rckpt


def state(mib=64):
    return {"model": {f"w{i}": torch.randn(256, 1024) for i in range(mib)}}


def test_callback_sees_bytes_done_of_total(tmp):
    calls = []
    rckpt.save(tmp / "p.rckpt", state(16), progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1][0] == calls[-1][1] >= 16 << 20
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
    calls.clear()
    rckpt.load(tmp / "p.rckpt", progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1][0] == calls[-1][1]


def test_callback_false_cancels_and_keeps_previous_file(tmp):
    path = tmp / "c.rckpt"
    rckpt.save(path, {"model": {"w": torch.ones(3)}})
    before = path.read_bytes()
    with pytest.raises(rckpt.IoError, match="cancel"):
        rckpt.save(path, state(16), progress=lambda d, t: d < t // 2)
    assert path.read_bytes() == before
    assert os.listdir(tmp) == ["c.rckpt"]  # the temporary is gone
    with pytest.raises(ZeroDivisionError):
        rckpt.save(path, state(16), progress=lambda d, t: 1 / 0)
    assert path.read_bytes() == before


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_draws_binary_units_on_a_terminal(tmp):
    out = FakeTerminal()
    rckpt.save(tmp / "b.rckpt", state(8), progress=rckpt.ProgressBar("save", stream=out))
    text = out.getvalue()
    assert "100%" in text and "8.0 MiB / 8.0 MiB" in text, text
    quiet = io.StringIO()  # not a terminal: nothing drawn
    rckpt.load(tmp / "b.rckpt", progress=rckpt.ProgressBar("load", stream=quiet))
    assert quiet.getvalue() == ""
    rckpt.load(tmp / "b.rckpt", progress=True)  # the ready-made bar on stderr


CHILD = r"""
import sys, time, torch, rckpt
op, path = sys.argv[1], sys.argv[2]
state = {"model": {f"w{i}": torch.randn(1024, 1024) for i in range(32)}}
if op == "load":
    rckpt.save(path + ".big", state)
started = [False]
def progress(done, total):
    if not started[0]:
        started[0] = True
        print("started", flush=True)
    time.sleep(0.5)  # a slow disk: the signal arrives while the operation is under way
    return True
try:
    if op == "save":
        rckpt.save(path, state, progress=progress)
    else:
        rckpt.load(path + ".big", progress=progress)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.parametrize("op", ["save", "load"])
def test_ctrl_c_cancels_cleanly(tmp, op):
    path = tmp / "k.rckpt"
    rckpt.save(path, {"model": {"w": torch.ones(3)}})
    before = path.read_bytes()
    p = subprocess.Popen([sys.executable, "-c", CHILD, op, str(path)], stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ))
    assert p.stdout.readline().strip() == "started"  # type: ignore[union-attr]
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert out.strip() == "interrupted"
    assert p.returncode == 0
    # A cancelled save leaves the previous file and no temporary behind.
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp)) == sorted(["k.rckpt"] + (["k.rckpt.big"] if op == "load" else []))
