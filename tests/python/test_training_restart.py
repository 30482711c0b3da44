"""The training loop of docs/PYTHON.md, run as written: killed after S steps
with SIGKILL and resumed, it ends bit-identical to the uninterrupted run."""

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


STEPS = 14  # 6 batches per epoch: crosses two epoch boundaries


@pytest.fixture(scope="module")
def reference(script, tmp_path_factory):
    refs = {}
    for origin in (None, "cuda:1"):
        d = tmp_path_factory.mktemp("ref")
        r = run(script, d, STEPS, *(["--origin", origin] if origin else []))
        assert r.returncode == 0, r.stderr
        refs[origin] = d / "last.rckpt"
    return refs


@pytest.mark.parametrize("crash_at,every,origin", [
    (2, 1, None), (6, 1, None), (9, 4, None), (13, 3, None),  # 6 batches an epoch: 6 ends one
    (5, 2, "cuda:1"), (9, 4, "cuda:1")])
def test_killed_run_resumes_bit_identical(script, reference, tmp, crash_at, every, origin):
    extra = ["--every", every] + (["--origin", origin] if origin else [])
    crashed = run(script, tmp, STEPS, "--crash-at", crash_at, *extra)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    if origin:
        # The checkpoint says the model lived on cuda:1, which this machine
        # lacks: a load with no placement option refuses, "auto" resumes.
        ins = run_cli("inspect", "--json", tmp / "last.rckpt")
        assert '"cuda:1"' in ins.stdout
        plan = run_cli("plan", tmp / "last.rckpt")
        assert plan.returncode == 6, plan.stdout + plan.stderr
    resumed = run(script, tmp, STEPS, *extra)
    assert resumed.returncode == 0, resumed.stderr
    d = run_cli("diff", reference[origin], tmp / "last.rckpt")
    assert d.returncode == 0, d.stdout + d.stderr
