"""rckpt's exceptions: one class per status code of the C++ library.

Every class derives from :class:`Error`; where Python users expect a built-in
exception the class derives from that too, so ``except FileNotFoundError``
and ``except ValueError`` keep working. ``code`` is the status code's name as
the C++ library and the CLI spell it ("Corruption", "NotFound", ...).
"""

from __future__ import annotations


class Error(Exception):
    """Any error reported by rckpt."""

    code: str = "Unknown"


class InvalidArgumentError(Error, ValueError):
    """The caller's options or arguments are wrong (e.g. map_location with model_device)."""

    code = "InvalidArgument"


class NotFoundError(Error, FileNotFoundError):
    """A file, tensor, section or key does not exist."""

    code = "NotFound"


class CorruptionError(Error):
    """The bytes read are not a valid checkpoint."""

    code = "Corruption"


class IoError(Error, OSError):
    """The operating system refused a read or write, or the operation was cancelled."""

    code = "IoError"


class UnsupportedError(Error):
    """A newer format version, or a feature this build lacks."""

    code = "Unsupported"


class DeviceUnavailableError(Error):
    """A placement names a device this machine does not have."""

    code = "DeviceUnavailable"


class DeviceError(Error):
    """A device runtime call failed."""

    code = "DeviceError"


class OutOfMemoryError(Error, MemoryError):
    """An allocation (host, pinned or device) failed."""

    code = "OutOfMemory"


class AlreadyExistsError(Error, FileExistsError):
    """A write that must not replace anything found its path taken (a create-if-absent
    write: rckpt.storage.write(..., if_absent=True), CheckpointManager's steps in object
    storage)."""

    code = "AlreadyExists"


class DroppedValueWarning(UserWarning):
    """A save left values out of the file, as the caller asked (``drop_functions=True``);
    the message names their key paths."""


class InertObjectWarning(UserWarning):
    """A load or conversion of a PyTorch or DCP file kept classes outside the known set as
    inert objects (data, never executed); the message names them. ``strict=True``
    refuses such files instead."""


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotFoundError, CorruptionError, IoError, UnsupportedError,
    DeviceUnavailableError, DeviceError, OutOfMemoryError, AlreadyExistsError)}


def error_class(code: str) -> type[Error]:
    """The exception class of a status code name (used by the extension)."""
    return _BY_CODE.get(code, Error)
