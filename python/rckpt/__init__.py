"""rckpt: relocatable checkpoints for PyTorch training runs.

    import rckpt
    rckpt.save("run/last.rckpt", {"model": model.state_dict(), ...}, rng=rckpt.capture_rng())
    ck = rckpt.load("run/last.rckpt", model_device="auto")   # or "s3://bucket/run/last.rckpt"
    model.load_state_dict(ck["model"]); rckpt.restore_rng(ck.rng)

A compiled extension (rckpt._core) over the rckpt C++ library: the format,
the placement rules and the load engine are the library's. docs/PYTHON.md.
"""

from __future__ import annotations

import torch as _torch  # noqa: F401  (rckpt needs torch; loaded before the extension uses it)

from . import _core, data, s3
from ._convert import ConvertReport, convert
from ._inspect import VerifyReport, inspect, verify
from .async_save import SaveFuture, save_async
from .checkpoint import Checkpoint, load, load_into, save
from .doctor import DoctorReport, doctor
from .errors import (AlreadyExistsError, CorruptionError, DeviceError, DeviceUnavailableError,
                     DroppedValueWarning, Error, InertObjectWarning, InvalidArgumentError,
                     IoError, NotFoundError, OutOfMemoryError, UnsupportedError)
from .manager import CheckpointManager
from .progress import ProgressBar
from .rng import RestoreReport, RngRecord, RngState, capture_rng, restore_rng
from .types import FunctionRef, InertObject

__version__ = _core.version
_core.init_torch()


def cuda_device_count(emulate_devices: int = 0) -> int:
    """CUDA devices rckpt's runtime sees (or N emulated ones). 0 means there is no GPU
    (rckpt.doctor() says why); a GPU rckpt cannot use raises DeviceUnavailableError.
    Loads the CUDA driver (a process that does not call this, or load onto a GPU,
    never does)."""
    from ._args import check_emulate_devices
    return _core.cuda_device_count(check_emulate_devices("rckpt.cuda_device_count",
                                                         emulate_devices))


def device_pool_stats() -> dict[str, int]:
    """What rckpt's CUDA runtime keeps between loads and saves so that none of them pins,
    frees or makes streams (each of which waits for the whole GPU): ``pinned_bytes`` of pinned
    staging (at most ``pinned_cap``, RCKPT_PINNED_POOL_BYTES, default 512 MiB),
    ``device_scratch_bytes``, ``streams`` and ``events`` held now, and how many of each were
    ever made (``pinned_allocations``, ``device_allocations``, ``streams_created``,
    ``events_created``; constant once the pool has grown to what the process's calls need),
    ``unpinned_leases``: calls past the cap, served with ordinary host memory, and ``retired``
    / ``retired_bytes``: memory of calls that could not wait for their copies (a failed event
    record or wait), kept out of reuse until release_device_pool() finds the GPU settled.
    Asking touches no driver."""
    return dict(_core.device_pool_stats())


def release_device_pool() -> None:
    """Frees what rckpt's CUDA runtime keeps between loads and saves (device_pool_stats()):
    each free waits for the GPU's work, so call it where a pause costs nothing (the end of
    training, before handing the GPU's memory to something else). Calls in flight keep what
    they use until they end; later calls build the pool again. Exit releases it too."""
    _core.release_device_pool()


__all__ = [
    "AlreadyExistsError", "Checkpoint", "CheckpointManager", "ConvertReport", "CorruptionError", "DeviceError",
    "DeviceUnavailableError", "DoctorReport", "DroppedValueWarning", "Error", "FunctionRef", "InertObject",
    "InertObjectWarning", "InvalidArgumentError", "IoError", "NotFoundError",
    "OutOfMemoryError", "ProgressBar", "RestoreReport", "RngRecord", "RngState", "SaveFuture",
    "UnsupportedError", "VerifyReport", "capture_rng", "convert", "cuda_device_count", "data",
    "device_pool_stats", "doctor", "inspect", "load", "load_into", "release_device_pool", "restore_rng", "s3",
    "save", "save_async", "verify",
]
