"""Lightning CheckpointIO plug-ins that write .rckpt files.

    import lightning as L
    import rckpt.lightning
    trainer = L.Trainer(plugins=[rckpt.lightning.CheckpointIO()])        # or AsyncCheckpointIO()
    trainer.fit(model, data, ckpt_path="checkpoints/last.ckpt")           # resumes from an .rckpt

Lightning hands its checkpoint dict (state_dict, optimizer_states,
lr_schedulers, loops, callbacks, hyper_parameters, epoch, global_step ...) to
the plug-in; each top-level key becomes a section of the .rckpt file, so
``rckpt.load(path)["state_dict"]`` is what ``torch.load(path)["state_dict"]``
is for Lightning's own files. Every RNG state (rckpt.capture_rng) is saved with
it and restored when Lightning loads the file, which Lightning's own files do
not do. Works with the ``lightning`` package and with ``pytorch_lightning``
(whichever is installed; both when both are). A checkpoint path may be an
object storage URL, ``s3://BUCKET/KEY`` (docs/OBJECT_STORAGE.md). docs/LIGHTNING.md.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from typing import Any, Optional

from . import storage
from ._local_only import refuse_url
from .async_save import AsyncSaver
from .checkpoint import Checkpoint, load, save
from .rng import capture_rng, restore_rng


def _checkpoint_io_bases() -> list[Any]:
    """Lightning's CheckpointIO base classes that are installed: the `lightning` package's
    first, then standalone lightning_fabric's (what pytorch_lightning checks against)."""
    bases = []
    for module in ("lightning.fabric.plugins.io.checkpoint_io",
                   "lightning_fabric.plugins.io.checkpoint_io"):
        try:
            bases.append(importlib.import_module(module).CheckpointIO)
        except ImportError:
            continue
    if not bases:
        raise ImportError("rckpt.lightning needs Lightning: pip install lightning "
                          "(or pytorch-lightning)")
    return bases


_BASES = _checkpoint_io_bases()

# What storage_options may set for one save (rckpt.save's options).
_STORAGE_OPTIONS = ("codec", "level", "chunk_bytes", "threads", "metadata")


def _checkpoint_path(path: Any) -> str:
    """A local path, or an s3:// URL (given as a str); other URLs are refused."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"rckpt.lightning: path must be a str or os.PathLike, not "
                        f"{type(path).__name__}")
    if isinstance(path, str) and storage.is_url(path):
        return path
    refuse_url(path, "rckpt.lightning")
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


class CheckpointIO(_BASES[0]):  # type: ignore[misc,valid-type]
    """Lightning's CheckpointIO over rckpt: ``Trainer(plugins=[rckpt.lightning.CheckpointIO()])``.

    ``codec``, ``level``, ``chunk_bytes`` and ``threads`` are rckpt.save's
    options for every save; ``Trainer.save_checkpoint(path, storage_options={...})``
    overrides them for one save (those keys and ``metadata``; any other key is
    a TypeError). ``rng=True`` saves every RNG state (rckpt.capture_rng: Python,
    NumPy, torch CPU and CUDA) with each checkpoint and restores it in
    ``load_checkpoint``, so that a resumed run draws the same dropout masks and
    shuffles as one that never stopped; ``rng=False`` leaves the generators
    alone, as Lightning's own files do. ``drop_functions=True`` leaves
    functions in the checkpoint (a callable among ``hyper_parameters``) out
    of the file with a warning instead of refusing the save (rckpt.save's
    option; functions of LR schedulers' states are always kept). The
    checkpoint's directory is created when it does not exist, as Lightning's
    own CheckpointIO does.
    """

    def __init__(self, *, codec: str = "none", level: int = 1, chunk_bytes: int = 4 << 20,
                 threads: int = 0, rng: bool = True, drop_functions: bool = False) -> None:
        super().__init__()
        self.options = {"codec": codec, "level": level, "chunk_bytes": chunk_bytes,
                        "threads": threads, "drop_functions": drop_functions}
        self.rng = rng

    def _save_args(self, checkpoint: Any, path: Any,
                   storage_options: Optional[Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(path, sections, rckpt.save options) of one save; the parent directory is made."""
        if not isinstance(checkpoint, Mapping):
            raise TypeError(f"save_checkpoint: checkpoint must be Lightning's dict, not "
                            f"{type(checkpoint)}")
        options = dict(self.options)
        if storage_options is not None:
            if not isinstance(storage_options, Mapping):
                raise TypeError(f"storage_options must be a dict of rckpt.save options "
                                f"({', '.join(_STORAGE_OPTIONS)}), not {type(storage_options)}")
            unknown = sorted(set(storage_options) - set(_STORAGE_OPTIONS))
            if unknown:
                raise TypeError(f"storage_options: unknown key(s) {unknown}; rckpt.lightning "
                                f"takes {', '.join(_STORAGE_OPTIONS)}")
            options.update(storage_options)
        path = _checkpoint_path(path)
        storage.make_dirs(os.path.dirname(path) or ".")  # (object storage has none)
        if self.rng:
            options["rng"] = capture_rng()
        return path, dict(checkpoint), options

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any,
                        storage_options: Optional[Any] = None) -> None:
        """Writes Lightning's checkpoint dict to ``path`` atomically (rckpt.save): the file
        there is replaced only by a complete one."""
        path, sections, options = self._save_args(checkpoint, path, storage_options)
        save(path, sections, **options)

    def load_checkpoint(self, path: Any, map_location: Any = "cpu",
                        weights_only: Optional[bool] = None) -> dict[str, Any]:
        """Lightning's checkpoint dict from the .rckpt at ``path``; restores the saved RNG
        states (``rng=True``).

        ``map_location`` is torch.load's (a device, a str, a dict origin ->
        target, torch's ``lambda storage, loc: ...``; rckpt.load); the default
        puts every tensor on the CPU, as Lightning's own CheckpointIO does.
        ``weights_only`` is accepted and has nothing to restrict: rckpt files
        hold no code, and loading one never executes any. A missing file raises
        rckpt.NotFoundError (a FileNotFoundError), a damaged one
        rckpt.CorruptionError, both naming the path.
        """
        del weights_only
        ck = load(_checkpoint_path(path), map_location=map_location)
        if isinstance(ck, dict):  # a dict of tensors alone, saved without RNG states
            return ck
        if not isinstance(ck, Checkpoint):
            raise ValueError(f"{os.fspath(path)!r} holds a {type(ck).__name__}, not a Lightning "
                             "checkpoint (a dict of sections written by rckpt.lightning or "
                             "rckpt.save)")
        if self.rng and ck.rng:
            restore_rng(ck.rng)
        return ck.to_dict()

    def remove_checkpoint(self, path: Any) -> None:
        """Removes the checkpoint at ``path`` (a file, or a directory with what it holds;
        in object storage the object); nothing when it does not exist."""
        _remove(_checkpoint_path(path))


def _remove(path: str) -> None:
    # A file, or a directory with what it holds; in object storage the object.
    storage.delete(path, missing_ok=True, recursive=True)


class AsyncCheckpointIO(CheckpointIO):
    """CheckpointIO that writes in the background (rckpt.save_async): training goes on
    while the file is written.

    ``save_checkpoint`` returns once the checkpoint's tensors are copied into
    snapshot buffers (reused from save to save) and its tree and RNG states
    captured; the file is written by the C++ library on its own thread. One
    save is in flight at a time: the next save waits for it, and a save that
    failed raises its error from the next ``save_checkpoint``,
    ``load_checkpoint`` or ``teardown`` (which Lightning calls at the end of
    ``fit``; it waits for the save in flight). ``remove_checkpoint`` while a
    save is in flight waits until that save is durable before removing
    anything (ModelCheckpoint removes the previous best right after starting
    the new save: a crash in between still leaves a complete file), and
    removes nothing when it failed. Options as CheckpointIO's.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._saver = AsyncSaver()
        self._lock = threading.Lock()
        self._in_flight = False
        self._removals: list[str] = []

    def _saved(self) -> None:
        """Runs once the save in flight is durable: the removals asked for meanwhile."""
        with self._lock:
            self._in_flight = False
            removals, self._removals = self._removals, []
        for path in removals:
            _remove(path)

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any,
                        storage_options: Optional[Any] = None) -> None:
        path, sections, options = self._save_args(checkpoint, path, storage_options)
        self._saver.wait()  # the previous save's removals run; its error surfaces here
        with self._lock:
            self._in_flight = True
        try:
            self._saver.save(path, sections, on_success=self._saved, **options)
        except BaseException:
            with self._lock:
                self._in_flight = False
            raise

    def load_checkpoint(self, path: Any, map_location: Any = "cpu",
                        weights_only: Optional[bool] = None) -> dict[str, Any]:
        self._saver.wait()
        return super().load_checkpoint(path, map_location, weights_only)

    def remove_checkpoint(self, path: Any) -> None:
        path = _checkpoint_path(path)
        with self._lock:
            if self._in_flight:
                self._removals.append(path)
                return
        _remove(path)

    def teardown(self) -> None:
        """Waits for the save in flight; raises its error if it failed."""
        self._saver.wait()


for _other in _BASES[1:]:
    _other.register(CheckpointIO)  # pytorch_lightning's Trainer checks against its own base

__all__ = ["AsyncCheckpointIO", "CheckpointIO"]
