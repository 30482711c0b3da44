"""rckpt.convert: what ``rckpt convert`` does, from Python (docs/CONVERT.md)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Optional

from . import _core, s3 as _s3
from ._args import (check_bool, names_arg, path_arg, progress_callback, save_options,
                    str_map_arg)
from ._files import warn_import
from .errors import DroppedValueWarning

if TYPE_CHECKING:
    from ._typing import Progress
    from .s3 import S3Options

class ConvertReport(NamedTuple):
    """What :func:`convert` did; ``str(report)`` is the line ``rckpt convert`` prints."""

    src: str
    dst: str
    format: str  # the input's: "rckpt", "pytorch", "safetensors" or "dcp"
    tensors: int
    rng_records: int
    bytes: int  # tensor bytes
    seconds: float
    inert_classes: list[str]  # classes kept as inert objects (warned about)
    warnings: list[str]  # the importer's warnings (warned about)
    summary: str
    # What dst does not hold (warned about as DroppedValueWarning, as the CLI's
    # "does not keep" warnings), and what it keeps for rckpt only (the CLI's notes).
    not_kept: list[str]
    notes: list[str]

    def __str__(self) -> str:
        return self.summary


def _format_arg(name: str, value: Optional[str]) -> str:
    """None (by content, then by extension) or a format name, which the library parses."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"rckpt.convert: {name} must be None or a format name ('rckpt', 'pt', "
                        f"'safetensors', 'dcp'), not {value!r}")
    return value


def _set_device_arg(value: object) -> str:
    """``set_device``: a dict origin -> device or a string, as map_location's syntax."""
    if isinstance(value, str):
        return value
    pairs = str_map_arg("rckpt.convert", "set_device", value, "origin device -> device")
    return ",".join(f"{k}={v}" for k, v in pairs.items())


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
            from_format: Optional[str] = None, to_format: Optional[str] = None,
            strict: bool = False, rng_keys: Sequence[str] = (),
            sections: Optional[Mapping[str, str]] = None, drop_objects: bool = False,
            codec: str = "none", level: int = 1, chunk_bytes: int = 4 << 20,
            shuffle: str = "auto", set_device: Optional[Mapping[str, str] | str] = None,
            progress: Optional[Progress] = None,
            s3: Optional[S3Options] = None) -> ConvertReport:
    """Converts ``src`` into ``dst`` as ``rckpt convert SRC DST`` does, with its options.

    Formats: ``.rckpt``; ``.pt .pth .bin .ckpt`` (PyTorch zip); ``.safetensors``;
    and a DCP checkpoint directory as ``src``. ``src`` is recognised by its
    content, then by its extension; ``dst`` by its extension.
    ``from_format`` / ``to_format`` ("rckpt", "pt", "safetensors"; "dcp" for
    ``src``) name them otherwise (--from/--to). ``dst`` is checked before
    ``src`` is read: a directory is InvalidArgumentError, a path in a
    directory that does not exist NotFoundError. It is written atomically:
    a failed conversion leaves a previous file intact.

    ``strict`` (--strict) refuses PyTorch and DCP files holding classes
    outside the known set; otherwise they are kept as inert objects with an
    :class:`rckpt.InertObjectWarning` naming them. ``rng_keys`` (--rng-key)
    marks more uint8 tensors as RNG states; ``sections`` (--section
    KEY=SECTION) puts top-level keys into sections; ``drop_objects``
    (--drop-objects) exports inert objects as None; ``codec``, ``level``,
    ``chunk_bytes`` and ``shuffle`` ("auto", "on", "off") encode an .rckpt
    output; ``set_device`` (--set-device) rewrites recorded origin devices
    (bytes unchanged): a dict ({"cuda:1": "cuda:0"}) or a string in
    map_location's syntax ("cuda:1=cuda:0", or one device for every origin). ``progress`` reports the
    .rckpt output's writing, as rckpt.save's does.

    Either side may be an ``s3://BUCKET/KEY`` URL (an upload, a download,
    or a conversion between formats in object storage; a DCP checkpoint
    ``src`` as a prefix). ``s3`` (an :class:`rckpt.s3.S3Options`) gives the
    endpoint, region and credentials for both; without it they come from
    the environment (docs/OBJECT_STORAGE.md).

    Returns a :class:`ConvertReport` (``str(report)`` is the CLI's summary
    line). Errors are rckpt.Error subclasses, as the CLI's exit codes.
    """
    who = "rckpt.convert"
    fs = _s3.file_system([src, dst], s3, who)
    src_path: str = path_arg(who, "src", src)
    dst_path: str = path_arg(who, "dst", dst)
    source_format = _format_arg("from_format", from_format)
    target_format = _format_arg("to_format", to_format)
    for name, flag in (("strict", strict), ("drop_objects", drop_objects)):
        check_bool(who, name, flag)
    keys = names_arg(who, "rng_keys", rng_keys, "keys")
    section_map = str_map_arg(who, "sections", sections, "top-level key -> section")
    devices = _set_device_arg(set_device)
    options = save_options(who, codec=codec, level=level, chunk_bytes=chunk_bytes,
                           shuffle=shuffle)
    raw = _core.convert(src_path, dst_path, source_format, target_format, strict, keys, section_map,
                        drop_objects, options, devices,
                        progress_callback(progress, "convert"), fs)
    warn_import(who, src_path, raw, stacklevel=3)
    for what in raw["not_kept"]:
        warnings.warn(DroppedValueWarning(f"{who}: {dst_path} does not keep {what}"), stacklevel=2)
    return ConvertReport(src_path, dst_path, raw["format"], raw["tensors"], raw["rng_records"],
                         raw["bytes"], raw["seconds"], list(raw["inert_classes"]),
                         list(raw["warnings"]), raw["summary"], list(raw["not_kept"]),
                         list(raw["notes"]))
