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
    assert text.startswith("\rsave [") and text.endswith("\n"), text
    assert "100%" in text and "8.0 MiB / 8.0 MiB" in text, text
    assert text.count("\n") == 1, text  # one line, redrawn in place


def test_progress_off_a_terminal_writes_whole_lines(tmp):
    log = io.StringIO()  # a job's log: lines, never a carriage return
    bar = rckpt.ProgressBar("save", stream=log, interval=0)
    for done in (0, 3 << 20, 6 << 20, 8 << 20, 8 << 20):
        assert bar(done, 8 << 20) is True
    lines = log.getvalue().split("\n")
    assert lines[-1] == "" and "\r" not in log.getvalue(), log.getvalue()
    assert [line.split(",")[0] for line in lines[:-2]] == [
        "save:   0% 0 B / 8.0 MiB", "save:  38% 3.0 MiB / 8.0 MiB", "save:  75% 6.0 MiB / 8.0 MiB"]
    assert lines[-2].startswith("save: 100% 8.0 MiB / 8.0 MiB in ") and lines[-2].endswith("/s")
    # Between lines at least interval seconds pass; the end always has its line, once.
    log = io.StringIO()
    bar = rckpt.ProgressBar("load", stream=log, interval=3600)
    for done in (0, 3 << 20, 8 << 20, 8 << 20):
        bar(done, 8 << 20)
    assert log.getvalue().count("\n") == 1 and log.getvalue().startswith("load: 100% "), log
    rckpt.save(tmp / "l.rckpt", state(8))
    log = io.StringIO()
    rckpt.load(tmp / "l.rckpt", progress=rckpt.ProgressBar("load", stream=log, interval=3600))
    assert log.getvalue().startswith("load: 100% 8.0 MiB / 8.0 MiB in "), log.getvalue()


def test_progress_true_writes_lines_to_a_redirected_stderr(tmp):
    script = ("import sys, torch, rckpt\n"
              "state = {'model': {'w': torch.ones(1 << 20)}}\n"
              "rckpt.save(sys.argv[1], state, progress=True)\n"
              "rckpt.load(sys.argv[1], progress=True)\n")
    with open(tmp / "stderr.log", "w") as err:
        subprocess.run([sys.executable, "-c", script, str(tmp / "r.rckpt")], stderr=err,
                       check=True, env=dict(os.environ))
    text = (tmp / "stderr.log").read_text()
    assert "\r" not in text and text.endswith("\n"), repr(text)
    lines = text.splitlines()
    assert [line.split(":")[0] for line in lines if "100%" in line] == ["save", "load"], lines
    assert all(" / 4.0 MiB" in line for line in lines), lines


CHILD = r"""
import signal, sys, time, torch, rckpt
# Ctrl-C is KeyboardInterrupt even where this process was started with SIGINT ignored (a
# background job of a non-interactive shell, xargs, nohup), in which case Python installs no
# handler of its own.
signal.signal(signal.SIGINT, signal.default_int_handler)
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
