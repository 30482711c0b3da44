"""Types of the arguments rckpt's functions take, for their annotations.

Imported under ``typing.TYPE_CHECKING`` only: type checkers read it, ``import
rckpt`` does not run it.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Protocol, Union

import torch

# A path as the library takes one (rckpt.save(path, ...)).
StrPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


class ReadableFile(Protocol):
    """A file object a load reads from (open(p, "rb"), io.BytesIO, ...)."""

    def read(self, size: int = ..., /) -> bytes: ...


class WritableFile(Protocol):
    """A file object a save writes to (open(p, "wb"), io.BytesIO, ...)."""

    def write(self, data: bytes, /) -> object: ...


# Where a save writes / a load reads: a path or a file object.
SaveTarget = Union[StrPath, WritableFile]
LoadSource = Union[StrPath, ReadableFile]

# A device: "cpu", "cuda:1", torch.device("cuda", 1).
Device = Union[str, torch.device]

# map_location=: a device, a dict origin -> device, rckpt's callable(info) -> device
# or None, or torch's callable(storage, location) -> storage.
MapLocation = Union[Device, Dict[str, str], Dict[str, torch.device], Dict[str, Device],
                    Callable[..., Any]]

# progress=: True draws a bar; a callable(done, total) returning False cancels.
Progress = Union[bool, Callable[[int, int], object]]

# origin=: a device for every model-role tensor, or section -> device.
Origin = Union[Device, Dict[str, str], Dict[str, torch.device], Dict[str, Device]]
