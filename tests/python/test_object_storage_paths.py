"""Entry points that work with file systems only refuse an s3:// path (and any
other URL) with the path named, instead of making a local folder named 's3:'."""

import importlib
import os
import pathlib
import shutil

import pytest
import torch

import rckpt
import rckpt.distributed

NOT_YET = "is in object storage, which {} does not support yet; give a local or shared file"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Each test runs in an empty directory, which must stay empty."""
    monkeypatch.chdir(tmp_path)
    yield
    assert os.listdir(tmp_path) == [], "a refused URL left something in the working directory"


def optional(module):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("url", ["s3://", "s3:///run"])
def test_checkpoint_manager_refuses_an_s3_url_without_a_bucket(url):
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=f"directory '{url}' names no bucket: expected s3://BUCKET/PREFIX"):
        rckpt.CheckpointManager(url)


def test_checkpoint_manager_refuses_an_s3_url_that_pathlib_collapsed():
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=r"directory 's3:/ckpts/run' \(an s3:// URL whose '//' pathlib "
                             r"collapsed: give URLs as str\) is in object storage"):
        rckpt.CheckpointManager(pathlib.Path("s3://ckpts/run"))


@pytest.mark.parametrize("url", ["gs://bucket/run", "file:///tmp/run", "HF://org/repo"])
def test_checkpoint_manager_refuses_other_urls(url):
    scheme = url.split(":")[0].lower()
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=f"directory '{url}' is a {scheme}:// URL; CheckpointManager works "
                             "with file system paths only"):
        rckpt.CheckpointManager(url)


def test_a_local_path_that_only_contains_a_scheme_is_a_path():
    manager = rckpt.CheckpointManager("runs/s3://odd", async_save=False)
    manager.save(1, {"w": torch.ones(2)})
    assert os.path.exists(os.path.join("runs", "s3:", "odd", rckpt.manager.step_file(1)))
    manager.close()
    shutil.rmtree("runs")


def test_distributed_save_and_load_refuse_other_urls_and_collapsed_s3_paths():
    # s3:// URLs are objects (test_s3_distributed.py); other schemes, and an
    # s3 URL that pathlib collapsed, are refused before anything is made.
    local = rckpt.distributed.LOCAL
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=r"rckpt.distributed.save: path 'gs://ckpts/x.rckpt' is a gs:// URL"):
        rckpt.distributed.save(local, "gs://ckpts/x.rckpt", {"m": {"w": torch.ones(2)}})
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=r"rckpt.distributed.load: path 's3:/ckpts/x.rckpt' \(an s3:// URL "
                             r"whose '//' pathlib collapsed"):
        rckpt.distributed.load(local, pathlib.Path("s3://ckpts/x.rckpt"), {"m.w": None})


def test_dcp_writer_and_reader_refuse_other_urls():
    dcp = optional("rckpt.dcp")
    for cls in (dcp.Writer, dcp.Reader):
        who = f"rckpt.dcp.{cls.__name__}"
        with pytest.raises(rckpt.InvalidArgumentError,
                           match=f"{who}: path 'gs://ckpts/step1.rckpt' is a gs:// URL"):
            cls("gs://ckpts/step1.rckpt")
        with pytest.raises(rckpt.InvalidArgumentError, match=f"{who}: path 'hf://ckpts/step2"):
            cls().reset("hf://ckpts/step2.rckpt")  # what dcp.save(checkpoint_id=...) calls
        with pytest.raises(rckpt.InvalidArgumentError, match="names a prefix"):
            cls("s3://ckpts/run/")


def test_lightning_plugins_refuse_other_urls():
    lightning = optional("rckpt.lightning")
    state = {"state_dict": {"w": torch.ones(2)}}
    for io in (lightning.CheckpointIO(), lightning.AsyncCheckpointIO()):
        with pytest.raises(rckpt.InvalidArgumentError,
                           match="rckpt.lightning: path 'gs://ckpts/epoch=0.ckpt' is a gs:// "
                                 "URL"):
            io.save_checkpoint(state, "gs://ckpts/epoch=0.ckpt")
        with pytest.raises(rckpt.InvalidArgumentError, match="path 'gs://ckpts/last.ckpt'"):
            io.load_checkpoint("gs://ckpts/last.ckpt")
        with pytest.raises(rckpt.InvalidArgumentError, match="path 's3:/ckpts/old.ckpt'"):
            io.remove_checkpoint(pathlib.Path("s3://ckpts/old.ckpt"))
        if hasattr(io, "teardown"):
            io.teardown()


def test_the_scheme_is_s3_in_lower_case_in_python_and_in_the_library():
    # One rule, the AWS CLI's: "S3://" is refused by both languages, with the
    # same words, and never becomes a local folder "S3:" (the fixture checks).
    from rckpt import _core, s3, storage
    assert s3.is_url("s3://b/k") and storage.is_url("s3://b/k")
    assert not s3.is_url("b/S3://k") and not s3.is_url("s3:/b") and not s3.is_url("S3:")
    expected = ("'S3://b/k.rckpt': an object-storage URL begins with s3:// in lower case "
                "(as the AWS CLI takes it), not 'S3://'")
    with pytest.raises(rckpt.InvalidArgumentError) as from_python:
        s3.is_url("S3://b/k.rckpt")
    assert str(from_python.value) == expected
    with pytest.raises(rckpt.InvalidArgumentError) as from_library:
        _core.storage_read("S3://b/k.rckpt")
    assert str(from_library.value) == expected
    for call in (lambda: rckpt.save("S3://b/k.rckpt", {"w": torch.ones(2)}),
                 lambda: rckpt.load("S3://b/x.rckpt"),
                 lambda: rckpt.CheckpointManager("S3://b/run", async_save=False),
                 lambda: storage.write("S3://b/k.rckpt", b"x")):
        with pytest.raises(rckpt.InvalidArgumentError, match="in lower case"):
            call()


def test_an_endpoints_user_and_password_are_never_shown():
    from rckpt import _core, storage
    from rckpt.s3 import S3Options
    if not _core.s3_supported():
        pytest.skip("built without S3 support")
    options = S3Options(endpoint="https://KEYUSER:PwSeCrEt@s3.example.com:9000",
                        access_key_id="AKID", secret_access_key="SECRET")
    assert "https://***@s3.example.com:9000" in repr(options)
    shown = [repr(options), str(options), options._description()]
    with pytest.raises(rckpt.InvalidArgumentError) as refused:
        rckpt.load("s3://b/k.rckpt", s3=options)
    shown.append(str(refused.value))
    assert "'https://***@s3.example.com:9000'" in str(refused.value)
    with pytest.raises(rckpt.InvalidArgumentError) as asked:
        storage.exists("s3://b/k", s3=S3Options(endpoint="http://u:PwSeCrEt@h:1"))
    shown.append(str(asked.value))
    for text in shown:
        assert "PwSeCrEt" not in text and "KEYUSER" not in text, text
