"""Where each save entry point writes when the directory is missing, and errors that name the
user's path, never the temporary a save writes first. rckpt.save and save_async refuse a
missing directory as torch.save does; the manager, rckpt.distributed.save, rckpt.dcp.Writer
and rckpt.lightning create it, as DCP's and Lightning's own storage do."""

import os

import pytest
import torch

import rckpt

STATE = {"model": {"w": torch.ones(3)}, "controller": {"epoch": 2}}


def _no_temporary(message):
    assert ".tmp-" not in message, message


def test_save_into_a_missing_directory_is_refused_naming_it_and_creates_nothing(tmp):
    target = tmp / "run" / "step100.rckpt"
    with pytest.raises(rckpt.NotFoundError, match=rf"directory '{tmp / 'run'}' does not exist "
                                                  r"\(create it first\)") as e:
        rckpt.save(target, STATE)
    _no_temporary(str(e.value))
    assert not os.path.exists(tmp / "run")


def test_save_to_a_directory_is_refused_before_writing(tmp):
    with pytest.raises(rckpt.InvalidArgumentError, match=rf"'{tmp}' is a directory: expected a "
                                                         r"file path such as") as e:
        rckpt.save(tmp, STATE)
    _no_temporary(str(e.value))
    assert os.listdir(tmp) == []


def test_save_below_a_file_names_the_path_not_the_temporary(tmp):
    (tmp / "a.rckpt").write_bytes(b"x")
    with pytest.raises(rckpt.Error, match=str(tmp / "a.rckpt" / "b.rckpt")) as e:
        rckpt.save(tmp / "a.rckpt" / "b.rckpt", STATE)
    _no_temporary(str(e.value))


def test_save_async_refuses_a_missing_directory_as_save_does(tmp):
    future = rckpt.save_async(tmp / "run" / "x.rckpt", STATE)
    with pytest.raises(rckpt.NotFoundError, match="does not exist") as e:
        future.result()
    _no_temporary(str(e.value))
    assert not os.path.exists(tmp / "run")


def test_the_manager_creates_its_directory(tmp):
    with rckpt.CheckpointManager(tmp / "a" / "b" / "ckpt") as mgr:
        mgr.save(1, STATE).result()
    assert sorted(os.listdir(tmp / "a" / "b" / "ckpt")) == ["latest", "step-000001.rckpt"]


def test_distributed_save_creates_the_directory(tmp):
    rd = pytest.importorskip("rckpt.distributed", reason="rckpt.distributed is not built here")
    rd.save(rd.LOCAL, tmp / "run" / "x.rckpt", STATE)
    assert torch.equal(rckpt.load(tmp / "run" / "x.rckpt")["model"]["w"], torch.ones(3))


def test_distributed_save_of_an_unstorable_state_creates_no_directory(tmp):
    rd = pytest.importorskip("rckpt.distributed", reason="rckpt.distributed is not built here")
    with pytest.raises(TypeError, match="cannot store"):
        rd.save(rd.LOCAL, tmp / "run" / "x.rckpt", {"model": {"hook": object()}})
    assert not os.path.exists(tmp / "run")


def test_the_dcp_writer_creates_the_directory_as_dcps_filesystemwriter_does(tmp):
    dcp = pytest.importorskip("torch.distributed.checkpoint",
                              reason="this torch has no torch.distributed.checkpoint (torch 2.x)")
    import rckpt.dcp
    state = {"model": {"w": torch.arange(4.0)}}
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "run" / "step100.rckpt"))
    back = {"model": {"w": torch.zeros(4)}}
    dcp.load(back, storage_reader=rckpt.dcp.Reader(tmp / "run" / "step100.rckpt"))
    assert torch.equal(back["model"]["w"], torch.arange(4.0))


def test_the_lightning_plugin_creates_the_directory(tmp):
    pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning)")
    import rckpt.lightning
    rckpt.lightning.CheckpointIO(rng=False).save_checkpoint(
        {"state_dict": {"w": torch.ones(2)}}, tmp / "a" / "last.ckpt")
    assert torch.equal(rckpt.load(tmp / "a" / "last.ckpt")["state_dict"]["w"], torch.ones(2))
