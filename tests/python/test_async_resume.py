"""The training loop of docs/PYTHON.md saving with rckpt.save_async
(--async): killed with SIGKILL while a save may still be in the background
and resumed, it ends bit-identical to an uninterrupted run that saved
synchronously, RNG streams included (captured at the call, not at the
persist)."""

import os
import signal
import subprocess
import sys

import pytest

from conftest import doc_example, run_cli


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    return doc_example("PYTHON.md", "train.py", tmp_path_factory.mktemp("example"))


def run(script, run_dir, *args):
    return subprocess.run([sys.executable, str(script), str(run_dir), *map(str, args)],
                          capture_output=True, text=True, env=dict(os.environ))


STEPS = 14


@pytest.fixture(scope="module")
def reference(script, tmp_path_factory):
    d = tmp_path_factory.mktemp("ref")
    r = run(script, d, STEPS)  # synchronous saves
    assert r.returncode == 0, r.stderr
    return d / "last.rckpt"


def test_uninterrupted_async_run_equals_the_synchronous_one(script, reference, tmp_path):
    r = run(script, tmp_path, STEPS, "--async")
    assert r.returncode == 0, r.stderr
    d = run_cli("diff", reference, tmp_path / "last.rckpt")
    assert d.returncode == 0, d.stdout + d.stderr


@pytest.mark.parametrize("crash_at,every", [(3, 1), (7, 2), (11, 3)])
def test_killed_async_run_resumes_bit_identical(script, reference, tmp_path, crash_at, every):
    crashed = run(script, tmp_path, STEPS, "--crash-at", crash_at, "--every", every, "--async")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert [n for n in os.listdir(tmp_path) if ".tmp-" not in n] == ["last.rckpt"]
    resumed = run(script, tmp_path, STEPS, "--every", every, "--async")
    assert resumed.returncode == 0, resumed.stderr
    d = run_cli("diff", reference, tmp_path / "last.rckpt")
    assert d.returncode == 0, d.stdout + d.stderr
