"""One process's checkpoints in object storage, from Python: every entry point
(rckpt.save, load, load_into, save_async, convert, inspect, verify) on
s3:// URLs of a real S3 server (SeaweedFS, tests/s3/s3_server.sh), with
explicit options (rckpt.s3.S3Options) and from the environment, the
credential hand-over from botocore, and bad inputs with their errors.
Label s3: scripts/test.sh's S3 stage runs it; objects stay under a few MiB."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import torch

import rckpt
from rckpt.s3 import S3Options
from s3_env import (S3Env, fault_proxy, s3_env_or_skip, s3_prefix, s3_server,  # noqa: F401
                    unique_prefix)

s3_env_or_skip()

MiB = 1 << 20


def options(env: S3Env, **changes) -> S3Options:
    """Explicit options for the test server, nothing read from the environment."""
    fields: dict[str, Any] = dict(
        endpoint=env.endpoint, region=env.region, access_key_id=env.access_key,
        secret_access_key=env.secret_key, read_environment=False, retry_base_delay_ms=20,
        retry_max_delay_ms=200, max_attempts=4)
    fields.update(changes)
    return S3Options(**fields)


def state(seed=0, n=3, numel=1000):
    g = torch.Generator().manual_seed(seed)
    return {"model": {f"layer{i}.weight": torch.randn(numel, generator=g) for i in range(n)},
            "optimizer": {"step": seed, "lr": 0.1, "moments": [torch.randn(7, generator=g)]},
            "epoch": seed}


def assert_state(ck, expected):
    for name, t in expected["model"].items():
        assert torch.equal(ck["model"][name], t), name
    assert torch.equal(ck["optimizer"]["moments"][0], expected["optimizer"]["moments"][0])
    assert ck["optimizer"]["step"] == expected["optimizer"]["step"]
    assert ck["epoch"] == expected["epoch"]


@pytest.fixture
def s3(s3_server):
    return options(s3_server)


@pytest.fixture
def url(s3_server, s3_prefix):
    def make(name):
        return s3_server.url(s3_prefix + name)
    return make


def run_python(code, env, timeout=300):
    """Runs ``code`` in a fresh interpreter (its own default file system); its stdout."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def clean_aws_environ(**extra):
    """os.environ without AWS_* variables (the test's own, then ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"})
    env.update(extra)
    return env


# -- every entry point, explicit options -----------------------------------------------------------

def test_save_load_and_load_into_round_trip(s3, url, s3_server, s3_prefix):
    expected = state(1)
    rng = rckpt.capture_rng()
    rckpt.save(url("a b+c=d/ü.rckpt"), expected, rng=rng, s3=s3)
    with s3_server.client() as client:  # one object, under the key as given
        assert list(client.list_objects(s3_server.bucket, s3_prefix)) == \
            [s3_prefix + "a b+c=d/ü.rckpt"]
    ck = rckpt.load(url("a b+c=d/ü.rckpt"), s3=s3)
    assert_state(ck, expected)
    assert list(ck.rng) == list(rng)
    assert ck.stats["bytes_restored"] >= 3 * 1000 * 4 + 7 * 4  # and the RNG records
    # Only the model section's chunks are read.
    part = rckpt.load(url("a b+c=d/ü.rckpt"), sections=["model"], s3=s3)
    assert list(part) == ["model"] and part.stats["bytes_read"] < ck.stats["bytes_read"]
    into = {"model": {k: torch.zeros_like(v) for k, v in expected["model"].items()}}
    rckpt.load_into(url("a b+c=d/ü.rckpt"), into, s3=s3)
    for name, t in expected["model"].items():
        assert torch.equal(into["model"][name], t)


def test_a_state_dict_and_a_tensor_come_back_as_saved(s3, url):
    sd = {"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(4, dtype=torch.float16)}
    rckpt.save(url("sd.rckpt"), sd, s3=s3)
    back = rckpt.load(url("sd.rckpt"), s3=s3)
    assert set(back) == {"w", "b"} and torch.equal(back["w"], sd["w"])
    rckpt.save(url("t.rckpt"), torch.arange(5), s3=s3)
    assert torch.equal(rckpt.load(url("t.rckpt"), s3=s3), torch.arange(5))


def test_a_multipart_save_replaces_the_previous_object_whole(s3_server, url):
    # Parts of 5 MiB: a 12 MiB state is three of them.
    s3 = options(s3_server, part_bytes=5 * MiB)
    first = {"model": {"w": torch.full((3 * MiB,), 1.0)}}
    second = {"model": {"w": torch.full((3 * MiB,), 2.0)}}
    rckpt.save(url("big.rckpt"), first, s3=s3)
    rckpt.save(url("big.rckpt"), second, s3=s3)
    assert torch.equal(rckpt.load(url("big.rckpt"), s3=s3)["model"]["w"], second["model"]["w"])


def test_save_async_returns_a_future_and_the_object_appears_when_it_is_done(s3, url):
    expected = state(2)
    future = rckpt.save_async(url("async.rckpt"), expected, s3=s3)
    expected["model"]["layer0.weight"].add_(1)  # the snapshot was taken: the file has the old
    assert future.result(timeout=120) is None
    back = rckpt.load(url("async.rckpt"), s3=s3)
    assert torch.equal(back["model"]["layer0.weight"] + 1, expected["model"]["layer0.weight"])


def test_inspect_and_verify(s3, url):
    rckpt.save(url("i.rckpt"), state(3), rng=rckpt.capture_rng(), metadata={"run": "r1"},
               codec="zstd", s3=s3)
    report = rckpt.inspect(url("i.rckpt"), s3=s3)
    assert report["path"] == url("i.rckpt") and report["format"] == "rckpt"
    assert report["metadata"]["run"] == "r1"
    names = [t["name"] for t in report["tensors"]]
    assert "model.layer0.weight" in names
    layer0 = report["tensors"][names.index("model.layer0.weight")]
    assert (layer0["dtype"], layer0["shape"], layer0["device"]) == ("f32", [1000], "cpu")
    assert report["tree"]["model"]["layer0.weight"] is layer0
    assert {s["name"] for s in report["sections"]} >= {"model", "optimizer"}
    assert [r["name"] for r in report["rng"]] == list(rckpt.capture_rng())
    checked = rckpt.verify(url("i.rckpt"), s3=s3)
    assert checked.tensors == len(names) and checked.rng_records == len(report["rng"])
    assert checked.raw_bytes == 3 * 1000 * 4 + 7 * 4
    assert str(checked).startswith(url("i.rckpt") + ": OK (")


def test_convert_uploads_downloads_and_changes_format_in_the_bucket(s3, url, tmp_path):
    expected = state(4)
    local = tmp_path / "local.rckpt"
    rckpt.save(local, expected)
    report = rckpt.convert(local, url("up.rckpt"), s3=s3)
    assert report.format == "rckpt" and report.dst == url("up.rckpt")
    rckpt.convert(url("up.rckpt"), url("in-bucket.pt"), s3=s3)  # .rckpt -> .pt, both objects
    rckpt.convert(url("in-bucket.pt"), tmp_path / "down.safetensors", s3=s3,
                  drop_objects=True)
    # torch.load of the .pt object's bytes, as another program would read it.
    pt = tmp_path / "copy.pt"
    rckpt.convert(url("in-bucket.pt"), pt, from_format="pt", s3=s3)
    plain = torch.load(pt)
    assert torch.equal(plain["model"]["layer1.weight"], expected["model"]["layer1.weight"])
    from_pt = rckpt.load(url("in-bucket.pt"), s3=s3)  # imported by ranged GETs, then loaded
    assert_state(from_pt, expected)
    assert rckpt.inspect(url("in-bucket.pt"), s3=s3)["format"] == "pytorch"


def test_verify_says_what_an_object_of_another_format_is(s3, url, tmp_path):
    torch.save({"w": torch.ones(3)}, tmp_path / "x.pt")
    rckpt.convert(tmp_path / "x.pt", url("x.pt"), s3=s3)
    with pytest.raises(rckpt.UnsupportedError, match=r"is a pytorch checkpoint, not an \.rckpt "
                                                     r"file: rckpt\.verify checks"):
        rckpt.verify(url("x.pt"), s3=s3)


def test_equal_options_share_one_file_system(s3_server):
    from rckpt import s3 as s3mod
    a = s3mod.file_system(["s3://b/k"], options(s3_server), "t")
    b = s3mod.file_system(["s3://b/k"], options(s3_server), "t")
    c = s3mod.file_system(["s3://b/k"], options(s3_server, max_requests=4), "t")
    assert a is b and a is not c
    assert "endpoint=" + s3_server.endpoint in repr(a)


# -- the environment, in a process of its own --------------------------------------------------------

def test_calls_without_s3_options_read_the_aws_environment(s3_server, s3_prefix):
    env = clean_aws_environ(**s3_server.aws_environ())
    base = s3_server.url(s3_prefix)
    out = run_python(f"""
        import json, torch, rckpt, rckpt.s3
        url = {base!r} + "env.rckpt"
        rckpt.save(url, {{"model": {{"w": torch.arange(6.0)}}}})
        back = rckpt.load(url)
        rckpt.save_async({base!r} + "env-async.rckpt", back).result()
        print(json.dumps({{"w": back["model"]["w"].tolist(),
                          "verified": rckpt.verify(url).tensors,
                          "inspected": rckpt.inspect({base!r} + "env-async.rckpt")["format"],
                          "source": rckpt.s3.credential_source()}}))
    """, env)
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"w": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "verified": 1, "inspected": "rckpt",
                      "source": "environment"}


# -- credentials from botocore --------------------------------------------------------------------

CREDENTIAL_PROCESS = """\
import datetime, json, sys
counter, key, secret, seconds = sys.argv[1:5]
with open(counter, "a") as f:
    f.write("x")
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=int(seconds))
print(json.dumps({"Version": 1, "AccessKeyId": key, "SecretAccessKey": secret,
                  "SessionToken": "", "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}))
"""


def credential_process_profile(tmp_path, env: S3Env, profile, seconds):
    """An AWS config file whose ``profile`` gets the test server's keys from a
    credential_process (which rckpt's C++ library does not run) that expire
    in ``seconds``; returns (config path, counter path)."""
    script = tmp_path / "creds.py"
    script.write_text(CREDENTIAL_PROCESS)
    counter = tmp_path / f"{profile}.count"
    counter.write_text("")
    config = tmp_path / "config"
    with open(config, "a") as f:
        f.write(f"[profile {profile}]\ncredential_process = {sys.executable} {script} {counter} "
                f"{env.access_key} {env.secret_key} {seconds}\n")
    return config, counter


def botocore_or_skip():
    return pytest.importorskip("botocore", reason="botocore is not installed in this Python: "
                                                  "the hand-over of its credentials is not tested "
                                                  "here (the torch 2 venv has it)")


@pytest.mark.parametrize("seconds,renewed", [(3600, False), (240, True)])
def test_botocore_resolves_a_credential_process_and_hands_it_over(
        s3_server, url, tmp_path, monkeypatch, seconds, renewed):
    botocore_or_skip()
    profile = f"proc-{seconds}-{os.getpid()}-{time.monotonic_ns()}"
    config, counter = credential_process_profile(tmp_path, s3_server, profile, seconds)
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3 = S3Options(endpoint=s3_server.endpoint, region=s3_server.region, profile=profile)
    assert rckpt.s3.credential_source(s3) == "botocore (custom-process)"
    expected = state(5)
    rckpt.save(url("proc.rckpt"), expected, s3=s3)
    assert_state(rckpt.load(url("proc.rckpt"), s3=s3), expected)
    rckpt.verify(url("proc.rckpt"), s3=s3)
    runs = len(counter.read_text())
    if renewed:
        # Within five minutes of expiry: the library asks again, botocore renews them.
        assert runs >= 3
    else:
        # An hour left: asked once for the source, once for the calls, and kept.
        assert runs == 2


def test_without_botocore_an_unresolved_source_says_to_install_it(s3_server, url, tmp_path,
                                                                    monkeypatch):
    profile = f"proc-none-{os.getpid()}-{time.monotonic_ns()}"
    config, counter = credential_process_profile(tmp_path, s3_server, profile, 3600)
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    for module in ("botocore", "botocore.session", "botocore.exceptions"):
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    s3 = S3Options(endpoint=s3_server.endpoint, region=s3_server.region, profile=profile)
    with pytest.raises(rckpt.UnsupportedError) as refused:
        rckpt.load(url("any.rckpt"), s3=s3)
    message = str(refused.value)
    assert message.startswith(f"rckpt.load: profile '{profile}' gets its credentials through "
                              "credential_process")
    assert message.endswith("botocore is not installed in this Python (pip install botocore)")
    assert counter.read_text() == ""  # nothing ran it
    # The library alone says the same, and how to get around it, at the first request.
    with pytest.raises(rckpt.UnsupportedError, match="aws configure export-credentials"):
        rckpt.load(url("any.rckpt"), s3=dataclasses.replace(s3, credentials_from="rckpt"))


def test_calls_without_s3_options_hand_botocores_credentials_over(s3_server, s3_prefix,
                                                                   tmp_path):
    botocore_or_skip()
    config, counter = credential_process_profile(tmp_path, s3_server, "proc", 3600)
    env = clean_aws_environ(AWS_CONFIG_FILE=str(config), AWS_PROFILE="proc",
                            AWS_ENDPOINT_URL=s3_server.endpoint, AWS_REGION=s3_server.region)
    out = run_python(f"""
        import torch, rckpt, rckpt.s3
        url = {s3_server.url(s3_prefix + "default-proc.rckpt")!r}
        rckpt.save(url, torch.ones(3))
        print(rckpt.load(url).tolist(), rckpt.s3.credential_source())
    """, env)
    assert out.strip().splitlines()[-1] == "[1.0, 1.0, 1.0] botocore (custom-process)"
    assert len(counter.read_text()) >= 1


# -- secrets ---------------------------------------------------------------------------------------

def test_secrets_never_appear_in_a_repr_or_a_message(s3_server, url):
    secret = "wrong-" + s3_server.secret_key
    bad = options(s3_server, secret_access_key=secret, session_token="TOKEN-SHOULD-NOT-SHOW",
                  max_attempts=1)
    shown = repr(bad) + str(bad)
    assert "secret_access_key=<hidden>" in shown and "session_token=<hidden>" in shown
    assert secret not in shown and "TOKEN-SHOULD-NOT-SHOW" not in shown
    assert s3_server.access_key in shown  # the key id is no secret
    with pytest.raises(rckpt.IoError) as refused:
        rckpt.save(url("denied.rckpt"), state(), s3=bad)
    message = str(refused.value)
    assert secret not in message and "TOKEN-SHOULD-NOT-SHOW" not in message
    with pytest.raises(TypeError) as typed:
        S3Options(secret_access_key=123456789)  # type: ignore[arg-type]
    assert "123456789" not in str(typed.value)


# -- bad inputs ------------------------------------------------------------------------------------

def test_urls_without_a_key_are_refused_with_the_form_expected(s3):
    for bad in ("s3://", "s3://bucket", "s3://bucket/"):
        with pytest.raises(rckpt.InvalidArgumentError, match="s3://BUCKET/KEY"):
            rckpt.save(bad, state(), s3=s3)
        with pytest.raises(rckpt.InvalidArgumentError, match="s3://BUCKET/KEY"):
            rckpt.load(bad, s3=s3)


def test_missing_key_and_missing_bucket_are_not_found(s3, url, s3_server):
    with pytest.raises(rckpt.NotFoundError, match="does not exist") as missing:
        rckpt.load(url("nothing-here.rckpt"), s3=s3)
    assert url("nothing-here.rckpt") in str(missing.value)
    assert isinstance(missing.value, FileNotFoundError)
    with pytest.raises(rckpt.NotFoundError, match="bucket 'no-such-bucket-rckpt' does not exist"):
        rckpt.inspect("s3://no-such-bucket-rckpt/k.rckpt", s3=s3)
    with pytest.raises(rckpt.NotFoundError):
        rckpt.verify(url("nothing-here.rckpt"), s3=s3)


def test_wrong_secret_and_unknown_key_say_what_is_wrong(s3_server, url):
    wrong = options(s3_server, secret_access_key="not-the-secret", max_attempts=1)
    with pytest.raises(rckpt.IoError, match="refused the signature"):
        rckpt.load(url("x.rckpt"), s3=wrong)
    unknown = options(s3_server, access_key_id="NOSUCHKEY", max_attempts=1)
    with pytest.raises(rckpt.IoError, match="does not know the access key id NOSUCHKEY"):
        rckpt.save(url("x.rckpt"), state(), s3=unknown)


def test_a_refused_connection_fails_fast(s3_server):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening
        start = time.monotonic()
        with pytest.raises(rckpt.IoError, match="cannot connect to " + closed):
            rckpt.load("s3://b/k.rckpt", s3=options(s3_server, endpoint=closed))
        assert time.monotonic() - start < 30  # fast: not the retries' whole budget


def test_bad_options_are_refused_before_any_request(s3_server):
    with pytest.raises(TypeError, match=r"s3 must be an rckpt.s3.S3Options or None, not dict"):
        rckpt.save("s3://b/k.rckpt", state(), s3={"endpoint": "x"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="addressing must be one of"):
        S3Options(addressing="dns")
    with pytest.raises(ValueError, match="access_key_id is given but secret_access_key is not"):
        S3Options(access_key_id="K")
    with pytest.raises(ValueError, match="encryption must be None, 'AES256'"):
        S3Options(encryption="sse")
    with pytest.raises(TypeError, match="max_requests must be an int >= 0"):
        S3Options(max_requests="8")  # type: ignore[arg-type]
    with pytest.raises(rckpt.InvalidArgumentError, match="max_requests is 0: expected 1 to 1024"):
        rckpt.load("s3://b/k.rckpt", s3=options(s3_server, max_requests=0))
    with pytest.raises(rckpt.InvalidArgumentError, match="endpoint"):
        rckpt.load("s3://b/k.rckpt", s3=options(s3_server, endpoint="ftp://host"))
    with pytest.raises(rckpt.InvalidArgumentError, match="pathlib collapsed: give URLs as str"):
        rckpt.save(pathlib.Path("s3://b/k.rckpt"), state())
    with pytest.raises(rckpt.InvalidArgumentError, match="read_environment is false"):
        rckpt.load("s3://b/k.rckpt", s3=S3Options(endpoint=s3_server.endpoint,
                                                   read_environment=False,
                                                   credentials_from="rckpt"))


def test_a_failed_save_aborts_its_upload_and_keeps_the_previous_object(s3_server, s3_prefix,
                                                                       fault_proxy, url):
    through = options(s3_server, endpoint=fault_proxy.endpoint, part_bytes=5 * MiB,
                      max_attempts=2)
    rckpt.save(url("kept.rckpt"), state(6), s3=through)
    fault_proxy.add_rules({"match": {"operation": "UploadPart"}, "times": -1,
                           "action": {"status": 500}})
    with pytest.raises(rckpt.IoError, match=r"UploadPart .*HTTP 500"):
        rckpt.save(url("kept.rckpt"), {"model": {"w": torch.ones(3 * MiB)}}, s3=through)
    fault_proxy.clear_rules()
    assert_state(rckpt.load(url("kept.rckpt"), s3=through), state(6))
    with s3_server.client() as client:
        assert client.list_multipart_uploads(s3_server.bucket, s3_prefix) == []
