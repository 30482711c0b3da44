"""rckpt.dcp to s3://: dcp.save, dcp.async_save and dcp.load with an s3://
checkpoint_id write and read ONE object each, whatever the number of ranks
(2 ranks on gloo, started as torchrun would by launch.py; dcp_driver.py's
"s3" scenario), and load resharded: on the saving ranks sharded another way,
and in one process (another world size) as whole tensors. A checkpoint_id DCP would take for a
directory (ending in "/") is refused, naming the object form.
"""

import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from conftest import DCP_DRIVER as DRIVER, dcp_or_skip, run_cli
from s3_env import s3_env_or_skip, s3_prefix, s3_server  # noqa: F401

s3_env_or_skip()
dcp = dcp_or_skip()
import rckpt.dcp  # noqa: E402

import dcp_driver as driver  # noqa: E402

LAUNCH = os.path.join(os.path.dirname(__file__), "launch.py")


def run_driver(ranks, scenario, *args):
    """dcp_driver.py's scenario on ``ranks`` ranks, started as torchrun starts them (launch.py:
    no agent process, whose own import of torch the S3 stage's budget cannot afford): every
    rank's records."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, LAUNCH, str(ranks), DRIVER, scenario, out, *map(str, args)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
        records = []
        for r in range(ranks):
            with open(os.path.join(out, f"{r}.jsonl")) as f:
                records += [json.loads(line) for line in f]
        return records


@pytest.fixture
def aws(s3_server, monkeypatch):
    for k, v in s3_server.aws_environ().items():
        monkeypatch.setenv(k, v)


def test_two_ranks_save_one_object_each_way_that_loads_resharded(s3_server, s3_prefix, aws):
    prefix = s3_server.url(s3_prefix)
    results = run_driver(2, "s3", prefix)
    assert sorted(r["rank"] for r in results if r.get("loaded")) == [0, 1]
    with s3_server.client() as s3:
        keys = [o["key"] if isinstance(o, dict) else o
                for o in s3.list_objects(s3_server.bucket, s3_prefix)]
        assert not s3.list_multipart_uploads(s3_server.bucket, s3_prefix)
    assert sorted(k.rsplit("/", 1)[-1] for k in keys) == ["async.rckpt", "ck.rckpt"], keys
    for name in ("ck.rckpt", "async.rckpt"):
        assert run_cli("verify", prefix + name).returncode == 0
        # Another world size: one process, every tensor whole.
        back = driver.nested(lambda n: torch.zeros_like(driver.global_tensor(n)))
        back["optim"]["param_groups"] = [{"lr": 0.0, "betas": (0.0, 0.0), "params": [""]}]
        back["extra"] = {"epoch": 0, "name": "", "best": 1.0}
        back["layers"][1]["scale"] = 0.0
        dcp.load(back, checkpoint_id=prefix + name, storage_reader=rckpt.dcp.Reader())
        driver.check(back, name)


def test_a_checkpoint_id_that_names_a_prefix_is_refused(s3_server, s3_prefix, aws):
    prefix = s3_server.url(s3_prefix)
    for make in (rckpt.dcp.Writer, rckpt.dcp.Reader):
        with pytest.raises(rckpt.InvalidArgumentError, match="one object") as e:
            make(prefix)
        assert prefix in str(e.value)
    with pytest.raises(Exception, match="one object"):
        dcp.save({"w": torch.ones(2)}, checkpoint_id=prefix, storage_writer=rckpt.dcp.Writer())
