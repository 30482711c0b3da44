"""rckpt.distributed to s3://: the ranks of a job (gloo, mpi4py) write ONE
object with one multipart upload, any world size loads it, and a rank killed
mid-upload or rank 0 killed before the upload's completion leaves the
previous object and no incomplete upload; a CheckpointManager with comm=
keeps its steps under a prefix, one object each.

Jobs of 2 ranks (s3_distributed_job.py), started here with a rendezvous
through a temporary file, so a test can kill one rank and watch the other.
Objects are about 10 MiB (each rank's region is padded to S3's 5 MiB part
minimum). The throttling storms and a rank that never comes are tested in
C++ (tests/s3/s3_distributed_test.cc), with the ranks as threads.
"""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import pytest

from conftest import run_cli
from s3_env import FaultProxy, S3Env, fault_proxy, s3_env_or_skip, s3_prefix, s3_server  # noqa: F401

s3_env_or_skip()
torch = pytest.importorskip("torch")
import torch.distributed  # noqa: E402

import rckpt.distributed as rd  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import s3_distributed_job as job  # noqa: E402

JOB = os.path.join(os.path.dirname(__file__), "s3_distributed_job.py")
WORLD = 2

if not torch.distributed.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)
# The S3 stage runs the Python S3 suites on two venvs within one time budget:
# these jobs run on the Debian venv's (torch 1.13, which has mpi4py);
# torch 2's collective saves to S3 are test_s3_dcp.py's.
if int(torch.__version__.split(".")[0]) >= 2 and os.environ.get("RCKPT_S3_ALL_VENVS") != "1":
    pytest.skip("rckpt.distributed's S3 jobs run once per S3 stage, on the Debian venv "
                "(torch 2 is test_s3_dcp.py's; RCKPT_S3_ALL_VENVS=1 runs them here too)",
                allow_module_level=True)


class Job:
    """WORLD ranks of s3_distributed_job.py over gloo, each its own process."""

    def __init__(self, mode: str, url: str, step: int, env: Dict[str, str], tmp,
                 codec: str = "none"):
        self.out = str(tmp)
        store = os.path.join(self.out, "store")
        self.logs = [open(os.path.join(self.out, f"{r}.log"), "wb") for r in range(WORLD)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, JOB, mode, url, str(step), self.out],
                env=dict(os.environ, **env, RANK=str(r), WORLD_SIZE=str(WORLD),
                         RCKPT_JOB_STORE=store, RCKPT_JOB_CODEC=codec, OMP_NUM_THREADS="1"),
                stdin=subprocess.DEVNULL, stdout=self.logs[r], stderr=subprocess.STDOUT)
            for r in range(WORLD)]

    def kill(self, rank: int) -> None:
        self.procs[rank].send_signal(signal.SIGKILL)

    def wait(self, timeout: float = 240) -> List[Optional[dict]]:
        """Every rank's record (None for a rank that wrote none: killed)."""
        try:
            for p in self.procs:
                p.wait(timeout)
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for log in self.logs:
                log.close()
        return [self.record(r) for r in range(WORLD)]

    def record(self, rank: int) -> Optional[dict]:
        path = os.path.join(self.out, f"{rank}.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def log(self) -> str:
        text = ""
        for r in range(WORLD):
            with open(os.path.join(self.out, f"{r}.log"), errors="replace") as f:
                text += f"--- rank {r}\n{f.read()[-4000:]}"
        return text


def save_alone(url: str, step: int) -> None:
    """Step `step` saved by a job of one process (the previous checkpoint)."""
    rd.save(rd.LOCAL, url, job.state_of(0, 1, step), rank_state={"rank": 0})


def expect_step(url: str, step: int) -> None:
    """One process loads `url` whole, every chunk verified: step `step`'s state."""
    job.check_load(rd.LOCAL, url, step, 0, 1)
    verified = run_cli("verify", url)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def keys_and_uploads(env: S3Env, prefix: str):
    with env.client() as s3:
        keys = [o["key"] if isinstance(o, dict) else o for o in s3.list_objects(env.bucket, prefix)]
        uploads = s3.list_multipart_uploads(env.bucket, prefix)
    return keys, uploads


@pytest.fixture
def aws(s3_server, monkeypatch):
    """This process reaches the server as the jobs do: through AWS_*."""
    for k, v in s3_server.aws_environ().items():
        monkeypatch.setenv(k, v)
    return s3_server.aws_environ()


def test_gloo_ranks_write_one_object_that_one_process_loads_whole(s3_server, s3_prefix, aws,
                                                                  tmp_path):
    url = s3_server.url(s3_prefix + "ck.rckpt")
    records = Job("save", url, 1, aws, tmp_path).wait()
    assert all(r and r["ok"] for r in records), records
    keys, uploads = keys_and_uploads(s3_server, s3_prefix)
    assert len(keys) == 1 and not uploads, (keys, uploads)
    expect_step(url, 1)
    shown = run_cli("inspect", "--json", url)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["metadata"]["rckpt.world_size"] == str(WORLD)


def mpi_job(mode: str, url: str, step: int, aws: Dict[str, str], tmp, **env: str) -> List[dict]:
    """WORLD ranks of s3_distributed_job.py under mpiexec; every rank's record. Skips
    without mpi4py or mpiexec."""
    mpiexec = os.environ.get("RCKPT_MPIEXEC") or shutil.which("mpiexec")
    if importlib.util.find_spec("mpi4py") is None or not mpiexec:
        pytest.skip("MPI runs skipped: mpi4py or mpiexec is missing (Debian: python3-mpi4py, "
                    "openmpi-bin)")
    cmd = [mpiexec, "--oversubscribe", "-np", str(WORLD)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--mca", "btl", "self,vader", sys.executable, JOB, mode, url, str(step), str(tmp)]
    environ = dict(os.environ, **aws, **env, OMP_NUM_THREADS="1")
    environ.pop("RCKPT_JOB_STORE", None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=environ)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    records = []
    for r in range(WORLD):
        with open(os.path.join(tmp, f"{r}.json")) as f:
            records.append(json.load(f))
    return records


def test_mpi_ranks_write_one_compressed_object_over_the_previous(s3_server, s3_prefix, aws,
                                                                 tmp_path):
    url = s3_server.url(s3_prefix + "ck.rckpt")
    save_alone(url, 1)
    for record in mpi_job("save", url, 2, aws, tmp_path, RCKPT_JOB_CODEC="zstd"):
        assert record["ok"], record
    keys, uploads = keys_and_uploads(s3_server, s3_prefix)
    assert len(keys) == 1 and not uploads, (keys, uploads)
    expect_step(url, 2)


def wait_fired(proxy: FaultProxy, job_: Job, timeout: float = 120) -> None:
    """Waits until the proxy's rule held a request (the upload is under way)."""
    deadline = time.monotonic() + timeout
    while not any(rule["fired"] for rule in proxy.rules()):
        assert time.monotonic() < deadline, f"the rule never fired\n{job_.log()}"
        assert all(p.poll() is None for p in job_.procs), f"a rank ended\n{job_.log()}"
        time.sleep(0.1)


@pytest.mark.parametrize("victim", [1, 0], ids=["rank1-mid-upload", "rank0-before-complete"])
def test_a_killed_rank_leaves_the_previous_object_and_no_upload(s3_server, s3_prefix, aws,
                                                                 fault_proxy, tmp_path, victim):
    url = s3_server.url(s3_prefix + "ck.rckpt")
    save_alone(url, 1)
    # Rank 1's part (number 2: rank 0's region is part 1) held mid-upload;
    # or, with every region uploaded, rank 0's CompleteMultipartUpload held
    # before it reaches the server.
    match = ({"operation": "UploadPart", "query": "partNumber=2"} if victim == 1
             else {"operation": "CompleteMultipartUpload"})
    fault_proxy.add_rules({"match": match, "times": 1, "action": {"stall_seconds": 120}})
    j = Job("save", url, 2, s3_server.aws_environ(fault_proxy.endpoint), tmp_path)
    wait_fired(fault_proxy, j)
    j.kill(victim)
    records = j.wait()
    assert records[victim] is None, records
    survivor = records[1 - victim]
    assert survivor is not None and not survivor["ok"], f"{records}\n{j.log()}"
    assert survivor["error"][0] == "IoError", survivor
    keys, uploads = keys_and_uploads(s3_server, s3_prefix)
    assert len(keys) == 1 and not uploads, (keys, uploads)
    expect_step(url, 1)


@pytest.mark.parametrize("launcher", ["gloo", "mpi"])
def test_a_manager_of_ranks_commits_each_step_as_one_object(s3_server, s3_prefix, aws, tmp_path,
                                                            launcher):
    prefix = s3_server.url(s3_prefix + "run")
    records: List[Optional[dict]] = []
    if launcher == "gloo":
        records = Job("manager", prefix, 3, aws, tmp_path).wait()
    else:
        records = list(mpi_job("manager", prefix, 3, aws, tmp_path))
    for r in records:
        assert r and r["ok"], records
        # Each step one object from both ranks, committed by rank 0's pointer; keep=2:
        # rank 0 pruned step 1 once step 3 was committed; every rank agrees.
        assert r["steps"] == [2, 3], r
        # Step 3's object damaged by rank 0: every rank skipped it, with a warning.
        assert r["loaded"] == 2, r
        assert any("skipping" in w and "step-000003.rckpt" in w for w in r["warned"]), r
    keys, uploads = keys_and_uploads(s3_server, s3_prefix)
    assert sorted(k[len(s3_prefix):] for k in keys) == ["run/latest", "run/step-000002.rckpt",
                                                        "run/step-000003.rckpt"], keys
    assert not uploads
