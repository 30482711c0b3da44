"""Hugging Face Trainer checkpoint folders as one .rckpt, and back (docs/PYTHON.md).

    import rckpt.hf
    rckpt.hf.pack("out/checkpoint-500", "ckpt-500.rckpt")      # the folder -> one file
    rckpt.hf.unpack("ckpt-500.rckpt", "out/checkpoint-500")    # -> the folder again
    trainer.train(resume_from_checkpoint="out/checkpoint-500")

``pack`` converts what it understands and carries everything else as bytes:

- the model's weights (``*.safetensors``, ``pytorch_model*.bin``), the
  optimizer (``optimizer.pt``), the scheduler (``scheduler.pt``), the AMP
  scaler (``scaler.pt``) and every ``rng_state*.pth`` are imported as
  ``rckpt convert`` imports them (RNG states become RNG records, NumPy's as
  ``numpy`` records), each under a top-level key of the tree named after
  the file (``model``, ``optimizer``, ``scheduler``, ``scaler``,
  ``rng_state``, ``rng_state_1``, ...);
- ``trainer_state.json`` becomes a tree under ``trainer_state`` when
  writing it back as Trainer does (``json.dumps(..., indent=2,
  sort_keys=True)``) gives its exact bytes;
- any other file (``training_args.bin``, ``config.json``, tokenizer files,
  subfolders), and a file above whose import fails or holds objects a
  PyTorch export could not write back, is carried verbatim as a uint8
  tensor under ``files`` (``ck["files"]["training_args.bin"]``).

``unpack`` writes each file back: the PyTorch files so that
``torch.load(weights_only=True)`` and Trainer load them (NumPy's RNG state
with the module names of the NumPy that wrote it), the safetensors files
with their metadata, the JSON as Trainer writes it, the rest byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from typing import NamedTuple

from . import _core
from ._args import path_arg, save_options

# How a file name is converted, and the section its tensors go to.
_PYTORCH = re.compile(r"(optimizer|scheduler|scaler)\.pt|rng_state(_\d+)?\.pth|"
                      r"pytorch_model(-\d+-of-\d+)?\.bin")
_WEIGHTS = re.compile(r"(pytorch_)?model([-.].*)?")
_JSON = {"trainer_state.json"}


class PackReport(NamedTuple):
    """What :func:`pack` did: how each file went in, relative path -> "pytorch",
    "safetensors", "tree" (a JSON file) or "bytes" (carried verbatim)."""

    path: str
    files: dict[str, str]
    reasons: dict[str, str]  # files carried as bytes though of a kind pack converts: why
    tensors: int
    bytes: int  # tensor bytes, the files carried verbatim included


class UnpackReport(NamedTuple):
    """What :func:`unpack` wrote: the folder and its files (relative paths)."""

    folder: str
    files: list[str]


def _key(stem: str, taken: set[str]) -> str:
    key = stem.replace(".", "_")
    if key == "files" or key in taken:
        n = 2
        while f"{key}_{n}" in taken:
            n += 1
        key = f"{key}_{n}"
    taken.add(key)
    return key


def _json_tree(path: str):
    """The parsed JSON file when Trainer's way of writing it gives its exact bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    again = json.dumps(value, indent=2, sort_keys=True) + "\n"
    return value if again.encode("utf-8") == raw else None


def pack(folder: str | os.PathLike[str], path: str | os.PathLike[str], *, codec: str = "none",
         level: int = 1, chunk_bytes: int = 4 << 20, threads: int = 0) -> PackReport:
    """Writes every file of the checkpoint folder ``folder`` into the .rckpt ``path``.

    ``codec``, ``level``, ``chunk_bytes`` and ``threads`` are rckpt.save's.
    The file is written atomically. NotFoundError when ``folder`` does not
    exist; InvalidArgumentError when it is not a directory or holds a
    symbolic link to a directory. A symbolic link to a file is carried as the
    file it points to.
    """
    who = "rckpt.hf.pack"
    src = path_arg(who, "folder", folder)
    dst = path_arg(who, "path", path)
    options = save_options(who, codec=codec, level=level, chunk_bytes=chunk_bytes,
                           threads=threads)
    from .errors import InvalidArgumentError, NotFoundError
    if not os.path.exists(src):
        raise NotFoundError(f"{who}: folder '{src}' does not exist")
    if not os.path.isdir(src):
        raise InvalidArgumentError(f"{who}: folder '{src}' is not a directory")
    entries = []
    taken: set[str] = set()
    for root, dirs, names in os.walk(src):
        dirs.sort()
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                raise InvalidArgumentError(
                    f"{who}: '{os.path.join(root, name)}' is a symbolic link to a directory, "
                    f"which pack does not follow; copy what it points to into the folder")
        for name in sorted(names):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, src).replace(os.sep, "/")
            top = "/" not in rel
            stem = name.rsplit(".", 1)[0]
            if top and (_PYTORCH.fullmatch(name) or name.endswith(".safetensors")):
                how = "pytorch" if _PYTORCH.fullmatch(name) else "safetensors"
                key = _key(stem, taken)
                entries.append((rel, how, key, "model" if _WEIGHTS.fullmatch(stem) else key, full))
                continue
            tree = _json_tree(full) if top and name in _JSON else None
            if tree is not None:
                key = _key(stem, taken)
                entries.append((rel, "tree", key, key, tree))
            else:
                entries.append((rel, "bytes", "", "", full))
    raw = _core.pack_folder(dst, entries, options)
    files = {rel: how for rel, how, _ in raw["files"]}
    reasons = {rel: reason for rel, _, reason in raw["files"] if reason}
    return PackReport(dst, files, reasons, raw["tensors"], raw["bytes"])


def unpack(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> UnpackReport:
    """Writes the files :func:`pack` put into ``path`` into the folder ``folder``.

    ``folder`` must not exist or be empty. The files are written into a new
    folder beside it, which then takes its name: a failed unpack leaves no
    partial folder. InvalidArgumentError for an .rckpt pack did not write
    and for a non-empty ``folder``.
    """
    who = "rckpt.hf.unpack"
    src = path_arg(who, "path", path)
    dst = os.path.abspath(path_arg(who, "folder", folder))
    from .errors import InvalidArgumentError
    if os.path.exists(dst) and (not os.path.isdir(dst) or os.listdir(dst)):
        raise InvalidArgumentError(f"{who}: folder '{dst}' exists and is not an empty "
                                   f"directory; unpack into a new one")
    parent = os.path.dirname(dst)
    os.makedirs(parent, exist_ok=True)
    # A new folder beside it (made as any folder is, under the umask).
    work = os.path.join(parent, f"{os.path.basename(dst)}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    os.mkdir(work)
    try:
        for rel, value in _core.unpack_folder(src, work):
            target = os.path.join(work, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
        written = sorted(os.path.relpath(os.path.join(r, n), work).replace(os.sep, "/")
                         for r, _, names in os.walk(work) for n in names)
        if os.path.isdir(dst):
            os.rmdir(dst)
        os.rename(work, dst)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return UnpackReport(dst, written)


__all__ = ["PackReport", "UnpackReport", "pack", "unpack"]
