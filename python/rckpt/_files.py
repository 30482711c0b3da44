"""Where a save writes and a load reads: a path, or a file object as torch.save takes.

The library reads and writes files by path (it maps them, reads them on many
threads and replaces them atomically). A file object is bridged:

- load from a regular file opened at its start (``open(p, "rb")``): read in
  place through /proc/self/fd, no copy, mapped as a path is;
- load from any other object with ``read`` (BytesIO, a pipe, a file not at
  its start): what is left from its position is copied into a temporary file
  first, which the load then maps (the copy is the cost);
- save to an object with ``write``: the checkpoint is written to a temporary
  file and then copied into the object (twice the writes). Nothing reaches
  the object when the save fails; the object is not replaced atomically as a
  path is.

Temporary files go to tempfile.gettempdir() (TMPDIR) and are removed at once.
"""

import contextlib
import os
import shutil
import stat
import tempfile
import warnings

from .errors import Error, InertObjectWarning

_COPY_BYTES = 16 << 20


def is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def path_of(f, what="path"):
    """A path argument (str, bytes or os.PathLike) as a str."""
    if not is_path(f):
        raise TypeError(f"{what} must be a str, bytes or os.PathLike, not {type(f)}")
    return os.fsdecode(os.fspath(f))


def _name(f):
    name = getattr(f, "name", None)
    return f"file object {name!r}" if isinstance(name, str) else f"<{type(f).__name__}>"


def shown(f):
    """How messages name ``f``: the path as given, or the file object."""
    return path_of(f) if is_path(f) else _name(f)


@contextlib.contextmanager
def _naming(f, temporary, name=None):
    """Error messages name the file object (or ``name``), not the temporary path it went
    through."""
    try:
        yield
    except Error as e:
        raise type(e)(str(e).replace(temporary, name or _name(f))) from None


def warn_import(who, name, report, stacklevel):
    """The importer's warnings about ``name`` and the classes it kept as inert objects
    (an InertObjectWarning), from ``report``'s "warnings" and "inert_classes"."""
    for w in report["warnings"]:
        warnings.warn(f"{who}: {name}: {w}", stacklevel=stacklevel)
    if report["inert_classes"]:
        warnings.warn(InertObjectWarning(
            f"{who}: {name} holds classes outside the known set, kept as inert objects (data, "
            f"never imported or executed): {', '.join(report['inert_classes'])} (strict=True "
            f"refuses them)"), stacklevel=stacklevel)


def _fileno(f):
    try:
        return f.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


def _in_place_path(f):
    """/proc/self/fd/N for a regular file positioned at its start; else None."""
    fd = _fileno(f)
    if fd is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or f.tell() != 0:
            return None
    except (AttributeError, OSError, ValueError):
        return None
    return f"/proc/self/fd/{fd}"


@contextlib.contextmanager
def readable(f, what="path"):
    """A path the library can read the checkpoint of ``f`` (a path or a file object) from."""
    if is_path(f):
        yield path_of(f, what)
        return
    if not callable(getattr(f, "read", None)):
        raise TypeError(f"{what} must be a path (str, bytes, os.PathLike) or a file object "
                        f"with read(), not {type(f)}")
    in_place = _in_place_path(f)
    if in_place is not None:
        with _naming(f, in_place):
            yield in_place
        f.seek(0, os.SEEK_END)  # read to its end, as torch.load leaves it
        return
    fd, temporary = tempfile.mkstemp(prefix="rckpt-load-", suffix=".rckpt")
    try:
        with os.fdopen(fd, "wb") as out:
            if hasattr(f, "getbuffer"):  # BytesIO: its bytes without another copy in memory
                start = f.tell()
                out.write(f.getbuffer()[start:])
                f.seek(0, os.SEEK_END)
            else:
                shutil.copyfileobj(f, out, _COPY_BYTES)
        with _naming(f, temporary):
            yield temporary
    finally:
        os.unlink(temporary)  # a mapped load keeps its pages; the name goes


@contextlib.contextmanager
def writable(f, what="path"):
    """A path the library can save to; for a file object, copied into it after the save."""
    if is_path(f):
        yield path_of(f, what)
        return
    if not callable(getattr(f, "write", None)):
        raise TypeError(f"{what} must be a path (str, bytes, os.PathLike) or a file object "
                        f"with write(), not {type(f)}")
    directory = tempfile.mkdtemp(prefix="rckpt-save-")
    try:
        temporary = os.path.join(directory, "checkpoint.rckpt")
        with _naming(f, temporary):
            yield temporary
        with open(temporary, "rb") as src:
            shutil.copyfileobj(src, f, _COPY_BYTES)
        flush = getattr(f, "flush", None)
        if callable(flush):
            flush()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
