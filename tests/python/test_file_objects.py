"""Paths and file objects, as torch.save and torch.load take them."""

import io
import os
import pathlib

import pytest
import torch

import rckpt
from conftest import assert_same


def _state():
    torch.manual_seed(0)
    return {"model": {"w": torch.randn(64, 32), "b": torch.arange(5)},
            "controller": {"epoch": 3}}


def test_save_to_and_load_from_bytesio(tmp):
    buf = io.BytesIO()
    rckpt.save(buf, _state())
    data = buf.getvalue()
    (tmp / "copy.rckpt").write_bytes(data)
    assert_same(rckpt.load(tmp / "copy.rckpt").to_dict(), _state()), "a whole checkpoint file"
    buf.seek(0)
    assert_same(rckpt.load(buf).to_dict(), _state())
    assert buf.tell() == len(data), "read to its end, as torch.load leaves it"


def test_load_from_bytesio_at_an_offset_reads_from_its_position(tmp):
    rckpt.save(tmp / "a.rckpt", _state())
    buf = io.BytesIO(b"header" + (tmp / "a.rckpt").read_bytes())
    buf.seek(6)
    assert_same(rckpt.load(buf).to_dict(), _state())


def test_load_from_an_open_file_reads_it_in_place(tmp):
    rckpt.save(tmp / "a.rckpt", _state())
    with open(tmp / "a.rckpt", "rb") as f:
        ck = rckpt.load(f)
        assert f.tell() == os.path.getsize(tmp / "a.rckpt")
    assert_same(ck.to_dict(), _state())
    # Mapped in place (no copy): the tensor's memory is the file's mapping, alive after close.
    assert ck["model"]["w"].sum() == _state()["model"]["w"].sum()


def test_save_to_an_open_file(tmp):
    with open(tmp / "a.rckpt", "wb") as f:
        rckpt.save(f, _state())
    assert_same(rckpt.load(tmp / "a.rckpt").to_dict(), _state())


class ReadOnly:
    """Any object with read (and nothing else): a socket, a pipe, a download stream."""

    def __init__(self, data):
        self._io = io.BytesIO(data)

    def read(self, n=-1):
        return self._io.read(n)


class WriteOnly:
    def __init__(self):
        self.chunks = []

    def write(self, b):
        self.chunks.append(bytes(b))
        return len(b)


def test_any_object_with_read_or_write_works(tmp):
    out = WriteOnly()
    rckpt.save(out, _state())
    data = b"".join(out.chunks)
    assert_same(rckpt.load(ReadOnly(data)).to_dict(), _state())


def test_pathlike_and_bytes_paths(tmp):
    rckpt.save(pathlib.Path(tmp) / "p.rckpt", _state())
    assert_same(rckpt.load(os.fsencode(tmp / "p.rckpt")).to_dict(), _state())

    class Custom(os.PathLike):
        def __fspath__(self):
            return str(tmp / "p.rckpt")
    assert_same(rckpt.load(Custom()).to_dict(), _state())


def test_load_into_from_a_file_object(tmp):
    buf = io.BytesIO()
    rckpt.save(buf, _state())
    target = {"model": {"w": torch.zeros(64, 32), "b": torch.zeros(5, dtype=torch.int64)}}
    rckpt.load_into(io.BytesIO(buf.getvalue()), target)
    assert_same(target["model"], _state()["model"])


def test_a_failed_save_writes_nothing_to_the_file_object():
    buf = io.BytesIO(b"previous")
    with pytest.raises(TypeError, match="cannot store"):
        rckpt.save(buf, {"model": {"x": object()}})
    assert buf.getvalue() == b"previous"


def test_errors_name_the_file_object_not_a_temporary_path(tmp):
    with pytest.raises(rckpt.CorruptionError) as e:
        rckpt.load(io.BytesIO(b"not a checkpoint" * 100))
    assert "<BytesIO>" in str(e.value) and "rckpt-load-" not in str(e.value)
    (tmp / "bad.rckpt").write_bytes(b"not a checkpoint" * 100)
    with open(tmp / "bad.rckpt", "rb") as f, pytest.raises(rckpt.CorruptionError) as e:
        rckpt.load(f)
    assert "bad.rckpt" in str(e.value) and "/proc/self/fd" not in str(e.value)


def test_objects_that_are_neither_are_refused():
    with pytest.raises(TypeError, match=r"path must be a path \(str, bytes, os\.PathLike\) or "
                                        r"a file object with write\(\), not <class 'int'>"):
        rckpt.save(3, _state())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"file object with read\(\), not <class 'NoneType'>"):
        rckpt.load(None)  # type: ignore[arg-type]
