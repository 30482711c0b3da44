"""Small files in object storage and on disk alike: the library's file systems from Python.

What the package writes itself (the manager's "latest" pointer and its pruning,
the plug-ins' small files) goes through the same file systems as checkpoints:
``s3://BUCKET/KEY`` URLs go to S3 (configured from the environment and the AWS
files, docs/OBJECT_STORAGE.md, or, given ``s3=rckpt.s3.S3Options(...)``, from
those options, as rckpt.save takes them), anything else to the local file
system. So
code written with these calls works on a disk and in a bucket unchanged::

    from rckpt import storage
    storage.write("s3://ckpts/run/latest", b"1200\\n")          # atomic replace
    storage.write("s3://ckpts/run/step-1200.meta", b"...", if_absent=True)
    storage.read("s3://ckpts/run/latest")                       # b"1200\\n"
    [f.path for f in storage.list_files("s3://ckpts/run/")]
    storage.read("s3://ckpts/run/latest",
                 s3=S3Options(endpoint="http://10.0.0.5:9000", ...))

Every write is atomic: the whole content appears at once (a local temporary
synced and renamed over the path; an S3 object put or completed whole), or
nothing does. ``if_absent=True`` never replaces: AlreadyExistsError when the
path exists (locally a rename that does not replace; in S3 ``If-None-Match:
*``, which AWS and SeaweedFS honour and some servers ignore, replacing then).

Every function takes ``s3=``: None (the environment's configuration) or an
rckpt.s3.S3Options, as rckpt.save does.

Errors are rckpt's: NotFoundError for a missing file, IoError, ...
Meant for small objects (read and write hold the whole content in memory);
checkpoints go through rckpt.save and rckpt.load.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Union

from . import _core
from . import s3 as _s3

PathLike = Union[str, "os.PathLike[str]"]


class FileInfo(NamedTuple):
    """One file of :func:`list_files`."""

    path: str
    size: int
    modified_unix_ms: int  # 0 where unknown


class IncompleteWrite(NamedTuple):
    """A write begun and never finished: a local temporary of a killed save, an S3
    multipart upload never completed or aborted (invisible, but stored and billed)."""

    path: str  # the path the write would have made
    id: str  # the temporary's path; the S3 upload id
    started_unix_ms: int  # 0 where unknown
    writer_alive: bool  # local only: the writing process still runs here


def _path(path: PathLike, what: str = "path") -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"rckpt.storage: {what} must be a str or os.PathLike, not {type(path)}")
    return os.fsdecode(os.fspath(path))


def _fs(paths: Sequence[str], s3: Optional[_s3.S3Options], who: str) -> Any:
    return _s3.file_system(paths, s3, f"rckpt.storage.{who}")


def is_url(path: PathLike) -> bool:
    """Whether ``path`` is an object storage URL (``s3://...``) rather than a local path
    (:func:`rckpt.s3.is_url`: InvalidArgumentError for ``S3://...``)."""
    return _s3.is_url(_path(path))


def join(directory: PathLike, name: str) -> str:
    """``name`` under ``directory``: os.path.join for paths, one '/' between for URLs."""
    d = _path(directory, "directory")
    if is_url(d):
        return d + name if d.endswith("/") else f"{d}/{name}"
    return os.path.join(d, name)


def exists(path: PathLike, *, s3: Optional[_s3.S3Options] = None) -> bool:
    """Whether a file (or, in S3, an object or a non-empty prefix) exists at ``path``."""
    p = _path(path)
    return bool(_core.storage_exists(p, _fs([p], s3, "exists")))


def list_files(prefix: PathLike, *, s3: Optional[_s3.S3Options] = None) -> List[FileInfo]:
    """The files whose paths start with ``prefix``, sorted by path (a directory's files and
    its subdirectories', when ``prefix`` ends in '/'). Nothing there gives []."""
    p = _path(prefix, "prefix")
    return [FileInfo(*f) for f in _core.storage_list(p, _fs([p], s3, "list_files"))]


def read(path: PathLike, *, s3: Optional[_s3.S3Options] = None) -> bytes:
    """The whole content of ``path`` (NotFoundError when it does not exist)."""
    p = _path(path)
    return bytes(_core.storage_read(p, _fs([p], s3, "read")))


def write(path: PathLike, data: bytes, *, if_absent: bool = False,
          s3: Optional[_s3.S3Options] = None) -> None:
    """Writes ``data`` as ``path``, atomically, replacing what was there; with
    ``if_absent=True`` never replacing (AlreadyExistsError, nothing written). A missing
    local parent directory is NotFoundError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"rckpt.storage.write: data must be bytes, not {type(data)}")
    p = _path(path)
    _core.storage_write(p, bytes(data), bool(if_absent), _fs([p], s3, "write"))


def delete(path: PathLike, *, missing_ok: bool = False, recursive: bool = False,
           s3: Optional[_s3.S3Options] = None) -> None:
    """Removes the file at ``path``; NotFoundError when there is none, unless
    ``missing_ok``. (S3 answers a delete of a missing key with success.) With
    ``recursive=True`` a directory at ``path`` goes too, with everything in it (object
    storage has no directories: the object at ``path`` alone)."""
    from .errors import NotFoundError
    p = _path(path)
    fs = _fs([p], s3, "delete")
    try:
        if recursive:
            _core.storage_remove_all(p, fs)
        else:
            _core.storage_remove(p, fs)
    except NotFoundError:
        if not missing_ok:
            raise


def make_dirs(path: PathLike, *, s3: Optional[_s3.S3Options] = None) -> None:
    """Creates the directory ``path`` and its missing parents (nothing when it is one
    already; InvalidArgumentError when a file is there or on the way). Object storage has
    no directories: nothing to do there."""
    p = _path(path)
    if is_url(p):
        return
    _core.storage_create_dir(p, _fs([p], s3, "make_dirs"))


def rename(src: PathLike, dst: PathLike, *, replace: bool = True,
           s3: Optional[_s3.S3Options] = None) -> None:
    """Renames ``src`` to ``dst`` atomically and durably (the directory synced); with
    ``replace=False`` AlreadyExistsError when ``dst`` exists. Local file systems only:
    object storage has no rename (UnsupportedError); write the object there instead."""
    s, d = _path(src, "src"), _path(dst, "dst")
    _core.storage_rename(s, d, bool(replace), _fs([s, d], s3, "rename"))


def list_incomplete(prefix: PathLike, *,
                    s3: Optional[_s3.S3Options] = None) -> List[IncompleteWrite]:
    """The incomplete writes under ``prefix`` (what ``rckpt incomplete`` lists)."""
    p = _path(prefix, "prefix")
    fs = _fs([p], s3, "list_incomplete")
    return [IncompleteWrite(*w) for w in _core.storage_list_incomplete(p, fs)]


def abort_incomplete(write: IncompleteWrite, *, s3: Optional[_s3.S3Options] = None) -> None:
    """Discards an incomplete write: removes the temporary, aborts the upload.
    InvalidArgumentError when its writer still runs on this machine; NotFoundError when
    it is gone already."""
    _core.storage_abort_incomplete(write.path, write.id,
                                   _fs([write.path], s3, "abort_incomplete"))


def abort_stale(prefix: PathLike, only: Optional[Callable[[str], bool]] = None, *,
                s3: Optional[_s3.S3Options] = None) -> List[IncompleteWrite]:
    """Aborts the incomplete writes under ``prefix`` that no live process of this machine
    is writing (in S3: every upload under it, since S3 does not say who writes) and whose
    path ``only`` accepts (None: all), and returns them."""
    from .errors import NotFoundError
    aborted = []
    for w in list_incomplete(prefix, s3=s3):
        if w.writer_alive or (only is not None and not only(w.path)):
            continue
        try:
            abort_incomplete(w, s3=s3)
        except NotFoundError:
            continue  # another cleaner won
        aborted.append(w)
    return aborted
