"""The refusal of a URL by the entry points that write only to file systems.

The entry points that create directories and files with os.* calls would,
given ``s3://ckpts/run``, make a local folder named ``s3:``. Each calls
:func:`refuse_url` on a path it cannot take: every entry point that takes
s3:// (rckpt.distributed and rckpt.dcp through the library's S3 file system;
CheckpointManager and rckpt.lightning through rckpt.storage) refuses URLs of
other schemes and s3:// URLs that pathlib collapsed.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .errors import InvalidArgumentError
from .s3 import COLLAPSED_S3

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def refuse_url(path: Any, who: str, what: str = "path") -> None:
    """Raises InvalidArgumentError when ``path`` is a URL (``s3://...``, ``gs://...``),
    naming ``who`` (the entry point), ``what`` (its argument) and the path. Anything
    else, a wrong type included, is left to the caller's own checks."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    text = os.fsdecode(os.fspath(path))
    match = _URL.match(text)
    scheme = match.group(1).lower() if match else None
    note = ""
    if scheme is None and isinstance(path, os.PathLike) and COLLAPSED_S3.match(text):
        scheme, note = "s3", " (an s3:// URL whose '//' pathlib collapsed: give URLs as str)"
    if scheme == "s3":
        raise InvalidArgumentError(
            f"{who}: {what} {text!r}{note} is in object storage, which {who} does not support "
            f"yet; give a local or shared file system path")
    if scheme is not None:
        raise InvalidArgumentError(
            f"{who}: {what} {text!r} is a {scheme}:// URL; {who} works with file system "
            f"paths only: give a local or shared file system path")
