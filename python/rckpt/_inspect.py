"""rckpt.inspect and rckpt.verify: ``rckpt inspect`` and ``rckpt verify`` from Python."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from . import _core, s3 as _s3
from ._args import path_arg, progress_callback

if TYPE_CHECKING:
    from ._typing import Progress
    from .s3 import S3Options


class VerifyReport(NamedTuple):
    """What :func:`verify` checked of a sound file (``rckpt verify``'s line)."""

    path: str
    tensors: int
    chunks: int
    stored_bytes: int
    raw_bytes: int
    rng_records: int
    seconds: float

    def __str__(self) -> str:
        return (f"{self.path}: OK ({self.tensors} tensors, {self.chunks} chunks, "
                f"{self.rng_records} RNG records, {_core.human_bytes(self.stored_bytes)} stored, "
                f"{_core.human_bytes(self.raw_bytes)} raw; every checksum matches; "
                f"{self.seconds:.2f} s)")


def inspect(path: str | os.PathLike[str], *, s3: Optional[S3Options] = None) -> dict[str, Any]:
    """What a checkpoint holds, without reading tensor bytes, as ``rckpt
    inspect --json`` reports it: a dict with ``path``, ``format`` ("rckpt",
    "pytorch", "safetensors"), ``format_version``, ``writer``,
    ``created_unix_ms``, ``file_size``, ``metadata``, ``sections`` (name,
    role), ``tensors`` (name, section, role, dtype, shape, device, nbytes,
    stored_nbytes, codec, chunks, shards), ``rng`` (name, kind, device,
    nbytes), ``warnings`` and ``tree``: the state tree as Python values with
    each tensor as its entry of ``tensors`` (RNG references as None). A
    PyTorch or safetensors file is shown as the checkpoint ``rckpt.convert``
    would make of it (it is read whole; stored sizes equal raw sizes).

    ``path`` may be an ``s3://BUCKET/KEY`` URL (an .rckpt object costs a
    ranged GET or two); ``s3`` as for rckpt.load. Errors as rckpt.load's.
    """
    who = "rckpt.inspect"
    text = path_arg(who, "path", path)
    fs = _s3.file_system([path], s3, who)
    report: dict[str, Any] = _core.inspect(text, fs)
    return report


def verify(path: str | os.PathLike[str], *, progress: Optional[Progress] = None,
           s3: Optional[S3Options] = None) -> VerifyReport:
    """Checks an .rckpt file's structure and every chunk's checksum and
    decodability, as ``rckpt verify`` does. Returns a :class:`VerifyReport`
    when the whole file is sound; raises CorruptionError naming the tensor,
    chunk and offset of the first problem otherwise. A file of another format
    is an UnsupportedError saying what it is. ``progress`` as rckpt.load's;
    ``path`` may be an ``s3://`` URL (every chunk by parallel ranged GETs),
    ``s3`` as for rckpt.load.
    """
    who = "rckpt.verify"
    text = path_arg(who, "path", path)
    fs = _s3.file_system([path], s3, who)
    raw = _core.verify(text, progress_callback(progress, "verify"), fs)
    return VerifyReport(text, raw["tensors"], raw["chunks"], raw["stored_bytes"],
                        raw["raw_bytes"], raw["rng_records"], raw["seconds"])
