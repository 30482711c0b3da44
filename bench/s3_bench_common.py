"""What the S3 benches (s3_bench.py, s3_dcp_bench.py) share: the test server and
the fault proxy in front of it, the children's environment, the proxy's control
API, memory readings and sizes. Standard library only: the children import it
in the peers' venv (bench/peers/s3_peers_venv.sh)."""

import argparse
import contextlib
import json
import mmap
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
S3_TESTS = os.path.join(SOURCE, "tests", "s3")
sys.path.insert(0, S3_TESTS)

from s3_client import S3Client  # noqa: E402  (standard library only)


def parser(doc, timeout_help):
    """An argument parser for a bench whose module docstring is `doc` (its first paragraph
    the description, the rest the epilog), with the options every S3 bench takes."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=doc.split("\n\n", 1)[1])
    p.add_argument("--python", required=True, help="the peers' venv python "
                                                   "(bench/peers/s3_peers_venv.sh prints it)")
    p.add_argument("--pythonpath", help="rckpt's Python package (build/python)")
    p.add_argument("--server-env", help="an s3.env of a running server (default: start one)")
    p.add_argument("--timeout", type=int, default=900, help=timeout_help)
    p.add_argument("--out", help="write the runs and the table as JSON here")
    p.add_argument("--size", default="1G", help="state size (1G)")
    p.add_argument("--warm-gib", type=float, default=None,
                   help="GiB of memory touched once before any way runs (default: all that "
                        "is available but 2 GiB; 0: none): see warm_memory")
    return p


def warm_memory(gib, who):
    """Touches `gib` GiB (None: all of MemAvailable but 2 GiB) of fresh anonymous
    memory, huge pages allowed, and lets it go.

    A VM's host backs guest memory at its first touch: here that cost 2.2 s a GiB
    (6 GiB in 13.4 s, then 0.9 s touched again), and it falls on whichever way first
    meets memory the host does not back. Huge pages come from such memory first (4 KiB
    pages reuse what the last process freed), so without this a way that uses them
    (rckpt's loads and snapshots) pays it and the others do not. It helps only for a
    while where the guest reports free 2 MiB blocks back to the host (docs/PERFORMANCE.md,
    "Object storage").
    The touching is done by a child process, so that no later child's peak RSS
    (wait4's, which counts the parent's memory at the fork) includes it."""
    available = (memory_kib("MemAvailable", "/proc/meminfo") << 10) - (2 << 30)
    wanted = available if gib is None else min(gib * (1 << 30), available)
    size = int(wanted) & ~((2 << 20) - 1)
    if size <= 0:
        return
    t0 = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), "touch", str(size)], check=True)
    print(f"{who}: touched {size / (1 << 30):.1f} GiB of memory first "
          f"({time.perf_counter() - t0:.1f} s; bench/s3_bench_common.py warm_memory)",
          file=sys.stderr)


def memory_kib(field, path="/proc/self/status"):
    """A field of this process's /proc/self/status (VmRSS, VmHWM, ...), or of `path`
    (/proc/meminfo), in KiB; 0 if absent."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units \
        else int(text)


def s3env_from(path):
    """An s3.env (tests/s3/s3_server.sh) as {"endpoint": ..., "access_key": ..., ...}."""
    with open(path) as f:
        pairs = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    return {k[len("RCKPT_TEST_S3_"):].lower(): v for k, v in pairs.items()}


def client(s3env):
    return S3Client(s3env["endpoint"], s3env["access_key"], s3env["secret_key"],
                    s3env["region"])


def child_env(pythonpath, s3env, **extra):
    """The environment of a child reaching `s3env` through the AWS variables only (no
    profile, configuration file or instance metadata), rckpt from `pythonpath`. An https
    endpoint is trusted through its CA bundle: AWS_CA_BUNDLE (boto3, s3fs, rckpt) and
    SSL_CERT_FILE (the AWS CRT under s3torchconnector and OpenSSL's default)."""
    tls = {}
    if s3env["endpoint"].startswith("https://") and s3env.get("ca_bundle"):
        tls = {"AWS_CA_BUNDLE": s3env["ca_bundle"], "SSL_CERT_FILE": s3env["ca_bundle"],
               "REQUESTS_CA_BUNDLE": s3env["ca_bundle"], "CURL_CA_BUNDLE": s3env["ca_bundle"]}
    env = dict(os.environ, **tls, AWS_ENDPOINT_URL=s3env["endpoint"],
               AWS_ACCESS_KEY_ID=s3env["access_key"], AWS_SECRET_ACCESS_KEY=s3env["secret_key"],
               AWS_REGION=s3env["region"], AWS_DEFAULT_REGION=s3env["region"],
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull, **extra)
    env.pop("AWS_SESSION_TOKEN", None)
    env.pop("AWS_PROFILE", None)
    if pythonpath:
        env["PYTHONPATH"] = os.path.abspath(pythonpath)
    return env


def server_script(action, directory, check=True):
    """tests/s3/s3_server.sh start|restart|stop DIRECTORY."""
    subprocess.run(["bash", os.path.join(S3_TESTS, "s3_server.sh"), action, directory],
                   check=check)


def proxy_start(s3env, directory, log):
    """The fault proxy (tests/s3/fault_proxy.py) in front of `s3env`: (process, its
    ready file's JSON: port, control_port)."""
    ready = os.path.join(directory, "proxy.json")
    proc = subprocess.Popen([sys.executable, os.path.join(S3_TESTS, "fault_proxy.py"),
                             "--upstream", s3env["endpoint"], "--ready-file", ready],
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("s3 bench: the fault proxy did not start")
        time.sleep(0.05)
    with open(ready) as f:
        return proc, json.load(f)


def control(info, path, body=None):
    """A call of the proxy's control API: POST with a body, else GET."""
    request = urllib.request.Request(f"http://127.0.0.1:{info['control_port']}{path}",
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.load(r)


def reset_stats(info):
    """Zeroes the proxy's request counts."""
    request = urllib.request.Request(f"http://127.0.0.1:{info['control_port']}/stats",
                                     method="DELETE")
    urllib.request.urlopen(request, timeout=30).read()


class Setup:
    """A bench's work directory, server and proxy (see `started`)."""

    def __init__(self, work, s3env, server_dir, info):
        self.work = work
        self.s3env = s3env  # the server, direct
        self.server_dir = server_dir  # None: a running server was given (--server-env)
        self.info = info  # the proxy's ports
        self.proxied = dict(s3env, endpoint=f"http://127.0.0.1:{info['port']}")
        # The server's TLS port (s3_server.sh's https_endpoint, a certificate of its private
        # CA); None when the server has none.
        self.https = dict(s3env, endpoint=s3env["https_endpoint"]) \
            if s3env.get("https_endpoint") and s3env.get("ca_bundle") else None

    def restart_server(self):
        """Restarts a server this bench started (same ports, keys and data); SeaweedFS's
        memory grows with what is written and a restart gives it back."""
        if self.server_dir:
            server_script("restart", self.server_dir)


@contextlib.contextmanager
def started(server_env, name):
    """A Setup: a temporary work directory, the server of `server_env` (an s3.env) or a
    fresh one in it, and the fault proxy in front; all stopped and removed at the end."""
    work = tempfile.mkdtemp(prefix=f"rckpt-{name}.")
    server_dir, proxy = None, None
    log = open(os.path.join(work, "proxy.log"), "wb")
    try:
        if server_env:
            s3env = s3env_from(server_env)
        else:
            server_dir = os.path.join(work, "server")
            server_script("start", server_dir)
            s3env = s3env_from(os.path.join(server_dir, "s3.env"))
        proxy, info = proxy_start(s3env, work, log)
        yield Setup(work, s3env, server_dir, info)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(30)
        log.close()
        if server_dir:
            server_script("stop", server_dir, check=False)
        subprocess.run(["rm", "-rf", work])


def _touch(size):
    block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(AttributeError, OSError):
        block.madvise(mmap.MADV_HUGEPAGE)
    for offset in range(0, size, 4096):
        block[offset] = 1
    block.close()


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "touch":
    _touch(int(sys.argv[2]))
