"""rckpt.storage on local paths (the s3:// side is in test_s3_manager.py) and saves that
never replace (if_absent)."""

import os
import subprocess
import sys

import pytest
import torch

import rckpt
from rckpt import storage


def test_write_read_list_and_delete(tmp_path):
    d = str(tmp_path)
    storage.write(storage.join(d, "a"), b"one")
    storage.write(storage.join(d, "a"), b"two")
    os.mkdir(tmp_path / "sub")
    storage.write(storage.join(d, "sub/b"), b"")
    assert storage.read(storage.join(d, "a")) == b"two"
    assert [(f.path, f.size) for f in storage.list_files(d + "/")] == [
        (os.path.join(d, "a"), 3), (os.path.join(d, "sub/b"), 0)]
    assert sorted(os.listdir(d)) == ["a", "sub"]  # no temporary left
    storage.delete(storage.join(d, "a"))
    assert not storage.exists(storage.join(d, "a"))
    with pytest.raises(rckpt.NotFoundError):
        storage.delete(storage.join(d, "a"))
    storage.delete(storage.join(d, "a"), missing_ok=True)
    with pytest.raises(rckpt.NotFoundError):
        storage.read(storage.join(d, "a"))
    with pytest.raises(rckpt.NotFoundError):
        storage.write(storage.join(d, "missing/c"), b"x")


def test_directories_are_made_and_removed_through_the_library(tmp_path):
    d = str(tmp_path / "a" / "b")
    storage.make_dirs(d)
    storage.make_dirs(d)  # there already: nothing to do
    storage.write(storage.join(d, "f"), b"x")
    with pytest.raises(rckpt.InvalidArgumentError, match="a file is there"):
        storage.make_dirs(storage.join(d, "f"))
    storage.make_dirs("s3://no-such-bucket/prefix")  # object storage has no directories
    with pytest.raises(rckpt.Error):
        storage.delete(str(tmp_path / "a"))  # a directory, without recursive=True
    storage.delete(str(tmp_path / "a"), recursive=True)
    assert not os.path.exists(tmp_path / "a")
    with pytest.raises(rckpt.NotFoundError):
        storage.delete(str(tmp_path / "a"), recursive=True)
    storage.delete(str(tmp_path / "a"), recursive=True, missing_ok=True)


def test_if_absent_never_replaces(tmp_path):
    path = str(tmp_path / "p")
    storage.write(path, b"first", if_absent=True)
    with pytest.raises(rckpt.AlreadyExistsError, match="already exists") as taken:
        storage.write(path, b"second", if_absent=True)
    assert isinstance(taken.value, FileExistsError)
    assert storage.read(path) == b"first" and os.listdir(tmp_path) == ["p"]
    ck = str(tmp_path / "ck.rckpt")
    rckpt.save(ck, {"m": {"w": torch.ones(3)}}, if_absent=True)
    with pytest.raises(rckpt.AlreadyExistsError, match="ck.rckpt"):
        rckpt.save(ck, {"m": {"w": torch.zeros(3)}}, if_absent=True)
    with pytest.raises(rckpt.AlreadyExistsError, match="ck.rckpt"):
        rckpt.save_async(ck, {"m": {"w": torch.zeros(3)}}, if_absent=True).result()
    assert torch.equal(rckpt.load(ck)["m"]["w"], torch.ones(3))
    assert sorted(os.listdir(tmp_path)) == ["ck.rckpt", "p"]
    with pytest.raises(TypeError, match="if_absent must be True or False"):
        rckpt.save(ck, {"m": {}}, if_absent=1)  # type: ignore[arg-type]


def test_rename_with_and_without_replacing(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    storage.write(a, b"a")
    storage.write(b, b"b")
    with pytest.raises(rckpt.AlreadyExistsError):
        storage.rename(a, b, replace=False)
    assert storage.read(b) == b"b" and storage.exists(a)
    storage.rename(a, b)
    assert storage.read(b) == b"a" and not storage.exists(a)


def test_incomplete_writes_of_dead_processes_are_aborted(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f"ck.rckpt.tmp-{dead}-0123456789abcdef"
    live = tmp_path / f"ck.rckpt.tmp-{os.getpid()}-0123456789abcdef"
    stale.write_bytes(b"x")
    live.write_bytes(b"y")
    found = {w.id: w for w in storage.list_incomplete(str(tmp_path) + "/")}
    assert set(found) == {str(stale), str(live)}
    assert found[str(live)].writer_alive and not found[str(stale)].writer_alive
    assert found[str(stale)].path == str(tmp_path / "ck.rckpt")
    assert [w.id for w in storage.abort_stale(str(tmp_path) + "/")] == [str(stale)]
    assert os.listdir(tmp_path) == [live.name]


def test_urls_and_joins():
    assert storage.is_url("s3://b/k") and not storage.is_url("b/k")
    assert storage.join("s3://b/run", "latest") == "s3://b/run/latest"
    assert storage.join("s3://b/run/", "latest") == "s3://b/run/latest"
    assert storage.join("run", "latest") == os.path.join("run", "latest")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        storage.read(3)  # type: ignore[arg-type]
