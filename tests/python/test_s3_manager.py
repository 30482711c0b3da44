"""CheckpointManager on an object storage prefix, rckpt.storage and conditional writes,
against the real S3 server (label s3; tests/python/s3_env.py), some through the fault
proxy: the pointer, keep, the fallback past damaged and missing steps and never past
trouble (a SlowDown storm, memory, a bad option), readers that take nothing over, a
writer that removes only what dead writers left (leases, the age bound), two jobs on
one step, and SIGKILL of the manager's process mid-upload and between Complete and
the pointer."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch

from s3_env import S3Env, fault_proxy, s3_env_or_skip, s3_prefix, s3_server  # noqa: F401

ENV = s3_env_or_skip()
# rckpt's S3 file system is made at the process's first s3:// path, from the
# AWS variables: this process's are the test server's.
os.environ.update(ENV.aws_environ())

import rckpt  # noqa: E402
from rckpt import storage  # noqa: E402
from rckpt.s3 import S3Options  # noqa: E402

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
# Tests that start processes of their own, whose logic owes nothing to torch's version:
# once per S3 stage, on the Debian venv, as test_s3_distributed.py's jobs
# (RCKPT_S3_ALL_VENVS=1 runs them on torch 2 too).
once_per_stage = pytest.mark.skipif(
    int(torch.__version__.split(".")[0]) >= 2 and os.environ.get("RCKPT_S3_ALL_VENVS") != "1",
    reason="runs once per S3 stage, on the Debian venv (RCKPT_S3_ALL_VENVS=1 runs it here too)")


def state(step, n=64):
    return {"model": {"w": torch.full((n,), float(step)), "step": step}}


def honours_if_none_match(s3, key):
    """Whether the server refuses a second PutObject with If-None-Match: *."""
    s3.put_object(ENV.bucket, key, b"first", headers={"If-None-Match": "*"})
    again = s3.request("PUT", ENV.bucket, key, headers={"If-None-Match": "*"}, body=b"second")
    s3.delete_object(ENV.bucket, key)
    return again.status == 412


@pytest.fixture
def conditional(s3_prefix):
    """Skips, saying why, where the server ignores If-None-Match."""
    with ENV.client() as s3:
        if not honours_if_none_match(s3, s3_prefix + "probe"):
            pytest.skip("this S3 server ignores If-None-Match: * (a second conditional "
                        "PutObject replaced the object): create-if-absent is not enforced here")


def keys(prefix):
    with ENV.client() as s3:
        return sorted(k[len(prefix):] for k in s3.list_objects(ENV.bucket, prefix))


def uploads(prefix):
    with ENV.client() as s3:
        return s3.list_multipart_uploads(ENV.bucket, prefix)


def through(proxy, **options):
    """S3Options reaching the server through the fault proxy."""
    return S3Options(endpoint=proxy.endpoint, region=ENV.region, access_key_id=ENV.access_key,
                     secret_access_key=ENV.secret_key, read_environment=False, **options)


def wait_fired(proxy, what, timeout=120):
    """Waits until one of the proxy's rules acted on a request (an upload under way)."""
    deadline = time.monotonic() + timeout
    while not any(rule["fired"] for rule in proxy.rules()):
        assert time.monotonic() < deadline, f"the proxy's rule never fired: {what}"
        time.sleep(0.05)


def wait_lease_out(lease_key):
    """Sleeps until the lease object at lease_key (a key) has run out."""
    with ENV.client() as s3:
        expires = json.loads(s3.get_object(ENV.bucket, lease_key))["expires_unix_ms"]
    time.sleep(max(0.0, expires / 1000 - time.time()) + 0.2)


# -- rckpt.storage ---------------------------------------------------------------------------

def test_storage_reads_writes_lists_and_deletes_objects(s3_prefix):
    base = ENV.url(s3_prefix)
    storage.write(base + "a/x", b"one")
    storage.write(base + "a/x", b"two")  # replaces
    storage.write(base + "b", b"")
    assert storage.read(base + "a/x") == b"two"
    assert storage.exists(base + "a/x") and storage.exists(base + "a")
    assert [(f.path, f.size) for f in storage.list_files(base)] == [(base + "a/x", 3),
                                                                   (base + "b", 0)]
    storage.delete(base + "a/x")
    assert not storage.exists(base + "a/x")
    with pytest.raises(rckpt.NotFoundError, match="does not exist"):
        storage.read(base + "a/x")
    with pytest.raises(rckpt.UnsupportedError, match="object storage has no rename"):
        storage.rename(base + "b", base + "c")


def test_storage_write_if_absent_never_replaces(s3_prefix, conditional):
    small = ENV.url(s3_prefix + "small")
    storage.write(small, b"first", if_absent=True)
    with pytest.raises(rckpt.AlreadyExistsError, match="already exists") as taken:
        storage.write(small, b"second", if_absent=True)
    assert isinstance(taken.value, FileExistsError)
    assert storage.read(small) == b"first"
    # A multipart upload (over one 8 MiB part) is completed with the condition too, and the
    # refused upload is aborted, not left behind.
    big = ENV.url(s3_prefix + "big.rckpt")
    rckpt.save(big, {"m": {"w": torch.ones(9 * MiB // 4)}}, if_absent=True)
    with pytest.raises(rckpt.AlreadyExistsError, match="big.rckpt"):
        rckpt.save(big, {"m": {"w": torch.zeros(9 * MiB // 4)}}, if_absent=True)
    assert torch.equal(rckpt.load(big)["m"]["w"], torch.ones(9 * MiB // 4))
    assert uploads(s3_prefix) == []


def test_storage_aborts_stale_uploads_it_is_asked_to(s3_prefix):
    with ENV.client() as s3:
        s3.create_multipart_upload(ENV.bucket, s3_prefix + "mine")
        s3.create_multipart_upload(ENV.bucket, s3_prefix + "other")
    aborted = storage.abort_stale(ENV.url(s3_prefix), lambda p: p.endswith("/mine"))
    assert [w.path for w in aborted] == [ENV.url(s3_prefix + "mine")]
    assert [k for k, _ in uploads(s3_prefix)] == [s3_prefix + "other"]


# -- the manager on a prefix -----------------------------------------------------------------

# Runs in a process whose AWS variables give the wrong credentials (and nothing that
# would find the right ones): only the script's explicit S3Options reach the server.
EXPLICIT_OPTIONS = textwrap.dedent("""
    import sys
    import torch
    import rckpt
    from rckpt import storage
    from rckpt.s3 import S3Options
    endpoint, region, key, secret, base = sys.argv[1:]
    s3 = S3Options(endpoint=endpoint, region=region, access_key_id=key,
                   secret_access_key=secret, read_environment=False, max_attempts=2)
    {body}
    print("ok")
""")


def run_with_explicit_options(body, base):
    env = dict(os.environ, AWS_ACCESS_KEY_ID="not-the-key", AWS_SECRET_ACCESS_KEY="not-it")
    run = subprocess.run([sys.executable, "-c", EXPLICIT_OPTIONS.format(body=textwrap.dedent(body)),
                          ENV.endpoint, ENV.region, ENV.access_key, ENV.secret_key, base],
                         capture_output=True, text=True, env=env, timeout=240)
    assert run.returncode == 0 and run.stdout.split() == ["ok"], run.stderr


def test_storage_takes_explicit_s3_options(s3_prefix):
    run_with_explicit_options("""
        storage.write(base + "a", b"one", s3=s3)
        storage.write(base + "a", b"two", s3=s3)
        assert storage.read(base + "a", s3=s3) == b"two"
        assert storage.exists(base + "a", s3=s3)
        assert [f.path for f in storage.list_files(base, s3=s3)] == [base + "a"]
        assert storage.list_incomplete(base, s3=s3) == []
        storage.delete(base + "a", s3=s3)
        assert not storage.exists(base + "a", s3=s3)
        try:
            storage.read(base + "b")  # without s3=: the environment's wrong credentials
        except rckpt.Error as e:
            assert not isinstance(e, rckpt.NotFoundError), e
        else:
            raise AssertionError("the environment's credentials were accepted")
    """, ENV.url(s3_prefix))
    assert keys(s3_prefix) == []


def test_manager_takes_explicit_s3_options(s3_prefix):
    run_with_explicit_options("""
        for async_save in (False, True):
            d = base + ("async" if async_save else "sync")
            with rckpt.CheckpointManager(d, keep=1, async_save=async_save, s3=s3) as mgr:
                for step in (1, 2):
                    mgr.save(step, {"model": {"w": torch.full((4,), float(step))}})
                mgr.wait()
                assert mgr.steps() == [2]
                assert mgr.load()["model"]["w"][0] == 2.0 and mgr.loaded_step == 2
                w = {"model": {"w": torch.zeros(4)}}
                assert mgr.load_into(w) == 2 and w["model"]["w"][0] == 2.0
            assert rckpt.CheckpointManager(d, s3=s3).steps() == [2]
    """, ENV.url(s3_prefix))
    for mode in ("sync", "async"):
        assert keys(f"{s3_prefix}{mode}/") == ["latest", "step-000002.rckpt"]
    with pytest.raises(TypeError, match="s3 must be an rckpt.s3.S3Options"):
        rckpt.CheckpointManager(ENV.url(s3_prefix + "x"), s3={"endpoint": ENV.endpoint})


@pytest.mark.parametrize("async_save", [False, True])
def test_manager_keeps_steps_as_objects_with_a_pointer(s3_prefix, async_save):
    directory = ENV.url(s3_prefix + "run")
    with rckpt.CheckpointManager(directory + "/", keep=2, async_save=async_save) as mgr:
        assert mgr.directory == directory and mgr.steps() == []
        for step in (10, 20, 30):
            mgr.save(step, state(step))
            mgr.wait()
        assert mgr.steps() == [20, 30]
        assert storage.read(directory + "/latest") == b"30\n"
        ck = mgr.load()
        assert (mgr.loaded_step, ck.step) == (30, 30)
        assert torch.equal(ck["model"]["w"], state(30)["model"]["w"])
        with pytest.raises(ValueError, match="step 30 is already saved"):
            mgr.save(30, state(30))
    assert keys(s3_prefix) == ["run/latest", "run/step-000020.rckpt", "run/step-000030.rckpt"]
    assert uploads(s3_prefix) == []
    # Another manager (a resumed job) sees the same steps and loads a chosen one.
    again = rckpt.CheckpointManager(directory, async_save=False)
    assert again.latest_step() == 30
    assert again.load(20)["model"]["step"] == 20
    with pytest.raises(rckpt.NotFoundError, match="step 10 is not saved"):
        again.load(10)


def test_load_falls_back_past_damaged_and_missing_steps(s3_prefix):
    directory = ENV.url(s3_prefix + "run")
    mgr = rckpt.CheckpointManager(directory, keep=None, async_save=False)
    for step in (1, 2, 3):
        mgr.save(step, state(step, n=4096))
    with ENV.client() as s3:
        # Step 3's object truncated, step 2's damaged in its data.
        whole = s3.get_object(ENV.bucket, s3_prefix + "run/step-000003.rckpt")
        s3.put_object(ENV.bucket, s3_prefix + "run/step-000003.rckpt", whole[:len(whole) // 2])
        two = bytearray(s3.get_object(ENV.bucket, s3_prefix + "run/step-000002.rckpt"))
        two[4096 + 100] ^= 0xFF
        s3.put_object(ENV.bucket, s3_prefix + "run/step-000002.rckpt", bytes(two))
    with pytest.warns(UserWarning) as caught:
        ck = mgr.load()
    assert ck.step == 1 and torch.equal(ck["model"]["w"], state(1, n=4096)["model"]["w"])
    skipped = [str(w.message) for w in caught]
    assert any("step-000003.rckpt" in m for m in skipped), skipped
    assert any("step-000002.rckpt" in m for m in skipped), skipped
    # The pointer naming a step whose object is gone: the newest one there loads.
    with ENV.client() as s3:
        s3.put_object(ENV.bucket, s3_prefix + "run/latest", b"4\n")
    with pytest.warns(UserWarning) as caught:
        assert mgr.load().step == 1
    assert re.search(r"skipping step 4, which .*latest names: its object .*step-000004.rckpt "
                     r"is missing", str(caught[0].message)), [str(w.message) for w in caught]
    # A pointer that holds no step number: the listed steps stand in for it, with a warning.
    with ENV.client() as s3:
        s3.put_object(ENV.bucket, s3_prefix + "run/latest", b"\x00garbage")
    with pytest.warns(UserWarning, match=r"latest does not hold a step number"):
        assert mgr.steps() == [1, 2, 3]


def test_load_raises_trouble_and_never_falls_back_past_it(s3_prefix, fault_proxy):
    directory = ENV.url(s3_prefix + "run")
    writer = rckpt.CheckpointManager(directory, keep=None, async_save=False)
    for step in (1, 2):
        writer.save(step, state(step, n=4096))
    mgr = rckpt.CheckpointManager(directory, s3=through(fault_proxy, max_attempts=2))
    # A SlowDown storm on every GET of the newest step: the storm is raised, and step 1 is
    # not loaded in its place (the resume would go on from step 3 with step 1's state).
    fault_proxy.add_rules({"match": {"operation": "GetObject", "path": r"step-000002\.rckpt$"},
                           "times": -1, "action": {"status": 503, "code": "SlowDown"}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a "skipping" warning
        with pytest.raises(rckpt.IoError, match=r"step-000002\.rckpt.*503 SlowDown.*2 tries"):
            mgr.load()
    assert mgr.loaded_step is None
    # Telling whether a step asked for exists: a throttled answer is no "not saved".
    fault_proxy.add_rules([{"match": {"operation": op}, "times": -1,
                            "action": {"status": 503, "code": "SlowDown"}}
                           for op in ("HeadObject", "ListObjectsV2")])
    with pytest.raises(rckpt.IoError, match="503 SlowDown"):
        mgr.load(2)
    fault_proxy.clear_rules()
    # A bad option fails on the newest step as it would on any: raised as it is.
    with pytest.raises(rckpt.InvalidArgumentError, match="unknown section .no-such-section."):
        mgr.load(sections=["no-such-section"])
    assert mgr.loaded_step is None
    ck = mgr.load()
    assert (ck.step, mgr.loaded_step) == (2, 2)


@once_per_stage
def test_load_raises_out_of_memory_rather_than_loading_an_older_step(s3_prefix):
    run = subprocess.run([sys.executable, os.path.join(HERE, "manager_oom_child.py"),
                          ENV.url(s3_prefix + "run")], capture_output=True, text=True,
                         env=dict(os.environ, MALLOC_ARENA_MAX="1"), timeout=240)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["error"] == "OutOfMemoryError" and out["loaded"] is None, (out, run.stderr)
    assert "host memory" in out["message"], out


def test_reading_takes_nothing_over_and_a_writer_removes_only_what_is_stale(s3_prefix):
    directory = ENV.url(s3_prefix + "run")
    rckpt.CheckpointManager(directory, async_save=False).save(1, state(1))
    with ENV.client() as s3:
        s3.create_multipart_upload(ENV.bucket, s3_prefix + "run/step-000002.rckpt")
        s3.create_multipart_upload(ENV.bucket, s3_prefix + "run/latest")
        s3.create_multipart_upload(ENV.bucket, s3_prefix + "run/notes.txt")  # not its own
        s3.create_multipart_upload(ENV.bucket, s3_prefix + "run/sub/step-000002.rckpt")
        # A step completed and never committed (newer than the pointer).
        s3.put_object(ENV.bucket, s3_prefix + "run/step-000005.rckpt", b"leftover")
    everything = sorted(k for k, _ in uploads(s3_prefix))
    assert len(everything) == 4
    # Opening, listing and loading change nothing, whatever is there.
    reader = rckpt.CheckpointManager(directory)
    assert (reader.steps(), reader.latest_step(), reader.load().step) == ([1], 1, 1)
    assert reader.removed_uncommitted == []
    assert sorted(k for k, _ in uploads(s3_prefix)) == everything
    assert keys(s3_prefix + "run/") == ["latest", "step-000001.rckpt", "step-000005.rckpt"]
    # A writer leaves what is younger than stale_after (an hour by default) and has no
    # lease: it may be another writer's at work.
    writer = rckpt.CheckpointManager(directory, async_save=False, keep=None)
    writer.save(3, state(3))
    assert writer.removed_uncommitted == [] and writer.steps() == [1, 3]
    assert sorted(k for k, _ in uploads(s3_prefix)) == everything
    # With stale_after=0 everything of its own names is a dead writer's: the uploads of
    # step-*.rckpt and latest (no others) are aborted, the uncommitted step deleted.
    late = rckpt.CheckpointManager(directory, async_save=False, keep=None, stale_after=0)
    late.save(6, state(6))
    assert late.removed_uncommitted == [5]
    assert sorted(k for k, _ in uploads(s3_prefix)) == [s3_prefix + "run/notes.txt",
                                                        s3_prefix + "run/sub/step-000002.rckpt"]
    assert keys(s3_prefix + "run/") == ["latest", "step-000001.rckpt", "step-000003.rckpt",
                                        "step-000006.rckpt"]
    assert late.steps() == [1, 3, 6]


def test_a_step_whose_complete_answer_was_lost_is_saved_and_kept(s3_prefix, fault_proxy):
    # The first CompleteMultipartUpload reaches the server and its answer is lost; every
    # retry is answered 500 (as Ceph RGW answers for an upload it no longer has); every
    # ETag a HeadObject or PutObject shows is opaque (as GCS's, SSE-KMS's): the upload's
    # marker tells the save that it made the object, and the step is committed.
    directory = ENV.url(s3_prefix + "run")
    fault_proxy.add_rules([
        {"match": {"operation": "CompleteMultipartUpload"}, "times": 1,
         "action": {"reset_after_bytes": 0, "direction": "response"}},
        {"match": {"operation": "CompleteMultipartUpload"}, "times": -1,
         "action": {"status": 500}},
        {"match": {"operation": "HeadObject"}, "times": -1, "action": {"etag": "opaque"}},
        {"match": {"operation": "PutObject"}, "times": -1, "action": {"etag": "opaque"}}])
    mgr = rckpt.CheckpointManager(directory, async_save=False,
                                  s3=through(fault_proxy, max_attempts=3))
    mgr.save(1, state(1, n=3 * MiB))  # 12 MiB: a multipart upload
    assert fault_proxy.stats()["requests"]["CompleteMultipartUpload"] >= 2  # retried
    assert mgr.steps() == [1]
    # Kept: another writer, for which everything is stale, finds it committed.
    other = rckpt.CheckpointManager(directory, async_save=False, stale_after=0)
    other.save(2, state(2))
    assert other.removed_uncommitted == [] and other.steps() == [1, 2]
    assert other.load(1)["model"]["step"] == 1
    assert uploads(s3_prefix) == []


READER = textwrap.dedent("""
    import json, sys, warnings
    import rckpt
    warnings.simplefilter("error")
    mgr = rckpt.CheckpointManager(sys.argv[1])
    steps, latest = mgr.steps(), mgr.latest_step()
    mgr.load()
    print(json.dumps({"steps": steps, "latest": latest, "loaded": mgr.loaded_step}))
""")


@once_per_stage
def test_a_reader_or_writer_never_takes_over_a_save_in_flight(s3_prefix, fault_proxy):
    directory = ENV.url(s3_prefix + "run")
    trainer = rckpt.CheckpointManager(directory, s3=through(fault_proxy))
    trainer.save(1, state(1))
    trainer.wait()
    # Step 2 (12 MiB: a multipart upload) uploads slowly until the test lets it go.
    fault_proxy.add_rules({"match": {"operation": "UploadPart"}, "times": -1,
                           "action": {"throttle_bytes_per_s": 256 << 10}})
    future = trainer.save(2, state(2, n=3 * MiB))
    wait_fired(fault_proxy, "step 2's parts")
    assert [k for k, _ in uploads(s3_prefix)] == [s3_prefix + "run/step-000002.rckpt"]
    # An evaluator opens the prefix in a process of its own and loads the newest step.
    reader = subprocess.run([sys.executable, "-c", READER, directory], capture_output=True,
                            text=True, timeout=240)
    assert reader.returncode == 0, reader.stderr
    assert json.loads(reader.stdout) == {"steps": [1], "latest": 1, "loaded": 1}
    # A writer too, even one for which everything is stale by age: the trainer's lease
    # is alive, so its upload stays.
    other = rckpt.CheckpointManager(directory, async_save=False, stale_after=0)
    other.save(3, state(3))
    assert other.removed_uncommitted == []
    assert [k for k, _ in uploads(s3_prefix)] == [s3_prefix + "run/step-000002.rckpt"]
    fault_proxy.clear_rules()
    future.result()
    trainer.wait()
    assert trainer.steps() == [1, 2, 3]
    assert trainer.load(2)["model"]["step"] == 2
    assert uploads(s3_prefix) == []
    assert keys(s3_prefix + "run/") == ["latest", "step-000001.rckpt", "step-000002.rckpt",
                                        "step-000003.rckpt"]  # no lease left


KILLED_UPLOAD = textwrap.dedent("""
    import sys, time
    import torch
    import rckpt
    from rckpt import manager
    manager._LEASE_SECONDS = 2.0  # a killed writer's lease runs out soon
    mgr = rckpt.CheckpointManager(sys.argv[1], keep=1)
    mgr.save(1, {"model": {"w": torch.zeros(4), "step": 1}})
    mgr.wait()
    mgr.save(2, {"model": {"w": torch.ones(3 << 20), "step": 2}})
    print("saving", flush=True)
    time.sleep(600)  # killed here, mid-upload
""")


@once_per_stage
def test_a_writer_cleans_up_after_a_job_killed_mid_upload(s3_prefix, fault_proxy):
    directory = ENV.url(s3_prefix + "run")
    fault_proxy.add_rules({"match": {"operation": "UploadPart"}, "times": -1,
                           "action": {"throttle_bytes_per_s": 256 << 10}})
    job = subprocess.Popen([sys.executable, "-c", KILLED_UPLOAD, directory],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, **ENV.aws_environ(fault_proxy.endpoint)))
    assert job.stdout is not None and job.stderr is not None
    try:
        assert job.stdout.readline() == "saving\n", job.stderr.read()
        wait_fired(fault_proxy, "step 2's parts")
    finally:
        job.kill()
        job.communicate()
    fault_proxy.clear_rules()
    prefix = s3_prefix + "run/"
    assert [k for k, _ in uploads(prefix)] == [prefix + "step-000002.rckpt"]
    assert keys(prefix) == ["latest", "step-000001.rckpt", "step-000002.rckpt.lease"]
    # A reader after the kill leaves the upload as it is; the next writer, once the
    # killed writer's lease has run out, aborts it (an hour before its age would).
    assert rckpt.CheckpointManager(directory).load().step == 1
    assert [k for k, _ in uploads(prefix)] == [prefix + "step-000002.rckpt"]
    wait_lease_out(prefix + "step-000002.rckpt.lease")
    resumed = rckpt.CheckpointManager(directory, keep=1, async_save=False)
    resumed.save(2, state(2))
    assert uploads(prefix) == []
    assert keys(prefix) == ["latest", "step-000002.rckpt"]
    assert resumed.load().step == 2


def test_two_jobs_cannot_overwrite_the_same_step(s3_prefix, conditional):
    directory = ENV.url(s3_prefix + "run")
    first = rckpt.CheckpointManager(directory, async_save=False)
    second = rckpt.CheckpointManager(directory, async_save=False)
    async_second = rckpt.CheckpointManager(directory, async_save=True)
    first.save(1, state(1))
    with pytest.raises(ValueError, match="step 1 is already saved"):
        second.save(1, state(100))
    # The other job's step 2 is complete but not yet committed when this one saves it.
    with ENV.client() as s3:
        s3.put_object(ENV.bucket, s3_prefix + "run/step-000002.rckpt", b"the other job's")
    with pytest.raises(rckpt.AlreadyExistsError,
                       match="step 2 was written to .* by another job meanwhile"):
        second.save(2, state(2))
    with ENV.client() as s3:
        s3.put_object(ENV.bucket, s3_prefix + "run/step-000003.rckpt", b"the other job's")
    with pytest.raises(rckpt.AlreadyExistsError, match="step-000003.rckpt' already exists"):
        async_second.save(3, state(3)).result()
    with ENV.client() as s3:
        assert s3.get_object(ENV.bucket, s3_prefix + "run/step-000002.rckpt") == \
            b"the other job's"
        assert s3.get_object(ENV.bucket, s3_prefix + "run/step-000003.rckpt") == \
            b"the other job's"
    assert storage.read(directory + "/latest") == b"1\n"
    assert uploads(s3_prefix) == []


KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys
    import torch
    import rckpt
    from rckpt import manager

    directory, async_save = sys.argv[1], sys.argv[2] == "async"
    manager._LEASE_SECONDS = 2.0  # a killed writer's lease runs out soon
    write_pointer = manager.CheckpointManager._write_pointer

    def killed_before_the_pointer(self, step):
        if step == 2:  # step 2's object is complete: the process dies before the pointer
            print("completed", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        write_pointer(self, step)

    manager.CheckpointManager._write_pointer = killed_before_the_pointer
    mgr = rckpt.CheckpointManager(directory, keep=1, async_save=async_save)
    for step in (1, 2):
        mgr.save(step, {"model": {"w": torch.full((3 << 20,), float(step)), "step": step}})
        mgr.wait()
    print("not killed", flush=True)
""")


def test_sigkill_between_complete_and_the_pointer_keeps_the_previous_step(s3_prefix):
    # Sync and async saves, each in a process of its own, run at once (the interpreter's
    # start is most of their time).
    runs = {mode: subprocess.Popen([sys.executable, "-c", KILLED_SAVE,
                                    ENV.url(f"{s3_prefix}{mode}"), mode],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=dict(os.environ))
            for mode in ("sync", "async")}
    for mode, run in runs.items():
        out, err = run.communicate(timeout=240)
        assert run.returncode == -signal.SIGKILL, (mode, err)
        assert out.split() == ["completed"], (mode, out, err)
    for mode in runs:
        prefix, directory = f"{s3_prefix}{mode}/", ENV.url(f"{s3_prefix}{mode}")
        # Step 2's object is complete (12 MiB: a multipart upload), with its writer's
        # lease; step 1 is still committed and pruning never ran; nothing is partial.
        assert keys(prefix) == ["latest", "step-000001.rckpt", "step-000002.rckpt",
                                "step-000002.rckpt.lease"], mode
        assert uploads(prefix) == [], mode
        assert storage.read(directory + "/latest") == b"1\n", mode
        mgr = rckpt.CheckpointManager(directory, keep=1, async_save=False)
        assert mgr.steps() == [1], mode
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ck = mgr.load()
        skipped = [str(w.message) for w in caught if "CheckpointManager" in str(w.message)]
        assert skipped == [], mode  # the previous step loads and verifies at once
        assert ck.step == 1 and ck["model"]["step"] == 1, mode
        assert torch.equal(ck["model"]["w"], torch.full((3 << 20,), 1.0)), mode
        # The resumed job saves step 2 again once the killed writer's lease ran out: the
        # uncommitted step 2 is removed first, nothing stands in its way.
        wait_lease_out(prefix + "step-000002.rckpt.lease")
        mgr.save(2, {"model": {"w": torch.zeros(4), "step": 2}})
        assert mgr.removed_uncommitted == [2], mode
        assert mgr.steps() == [2] and keys(prefix) == ["latest", "step-000002.rckpt"], mode


# -- the Lightning plug-in's paths ------------------------------------------------------------

@pytest.mark.parametrize("plugin", ["CheckpointIO", "AsyncCheckpointIO"])
def test_lightning_plugins_save_load_and_remove_s3_objects(s3_prefix, plugin):
    try:
        import rckpt.lightning as rl
    except ImportError as e:
        pytest.skip(str(e))
    io = getattr(rl, plugin)(rng=False)
    path = ENV.url(s3_prefix + "ckpt/epoch=0-step=10.ckpt")
    io.save_checkpoint({"state_dict": {"w": torch.arange(6.0)}, "global_step": 10}, path)
    io.remove_checkpoint(path + ".missing")  # nothing there: nothing happens
    loaded = io.load_checkpoint(path)
    assert loaded["global_step"] == 10 and torch.equal(loaded["state_dict"]["w"], torch.arange(6.0))
    io.remove_checkpoint(path)
    if hasattr(io, "teardown"):
        io.teardown()
    assert keys(s3_prefix) == [] and uploads(s3_prefix) == []
