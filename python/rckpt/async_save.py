"""save_async and SaveFuture: saving without stopping training.

``rckpt.save_async(path, state)`` copies the state into snapshot buffers and
returns a :class:`SaveFuture`; the file is written by the C++ library on its
own thread, without the GIL. docs/ASYNC.md.
"""

import atexit
import os
import sys
import threading
import weakref

from . import _core, _state_types, s3 as _s3
from ._args import check_bool, save_options, progress_callback, rng_records
from .checkpoint import Checkpoint, _sections_to_save


class SaveFuture:
    """The outcome of one asynchronous save, as concurrent.futures.Future has it.

    ``result(timeout=None)`` blocks until the file is durable under its
    final name and returns None, or raises the save's error
    (rckpt.IoError naming the path and the cause, ...); ``exception()``
    returns that error instead; ``done()`` says whether the save is over;
    ``add_done_callback(fn)`` calls ``fn(future)`` once it is (from a
    background thread, or at once when it is already over). Ctrl-C while
    ``result()`` waits cancels the save, waits until its temporary is
    removed (the previous file at the path stays intact) and raises
    KeyboardInterrupt, as Ctrl-C in rckpt.save does.
    """

    def __init__(self, path, ticket=None, saver=None, error=None, on_success=None):
        self.path = path
        self._ticket = ticket
        self._saver = saver
        self._lock = threading.Lock()
        self._finished = ticket is None
        self._error = error
        self._on_success = on_success  # runs once, before any callback, on success
        self._callbacks = []
        self._watcher = None
        self.retrieved = False  # whether anyone was handed the outcome

    def __repr__(self):
        state = "pending" if not self.done() else ("failed" if self._error else "done")
        return f"<rckpt.SaveFuture {self.path!r} {state}>"

    def done(self):
        return self._finished or self._ticket.done()

    def _finish(self):
        """Records the outcome and runs the hooks, once, whichever thread gets here first."""
        with self._lock:
            if self._finished:
                return
            try:
                self._ticket.check()
            except BaseException as e:  # noqa: BLE001  (the outcome, handed to the caller)
                self._error = e
            if self._error is None and self._on_success is not None:
                try:
                    self._on_success()
                except BaseException as e:  # noqa: BLE001
                    self._error = e
            self._finished = True
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            self._call(fn)

    def _call(self, fn):
        try:
            fn(self)
        except Exception as e:  # noqa: BLE001  (as concurrent.futures does: log, go on)
            print(f"rckpt: exception in a SaveFuture done callback: {e!r}", file=sys.stderr)

    def _wait(self, timeout):
        """Waits for the save; Ctrl-C cancels it (see the class). Whether it is over."""
        if self._finished:
            return True
        try:
            if timeout is None:
                # Short slices, so that Ctrl-C is seen between them.
                while not self._ticket.wait(0.1):
                    pass
            elif not self._ticket.wait(timeout):
                return False
        except KeyboardInterrupt:
            self._saver.cancel()
            self._ticket.wait(None)
            self._finish()
            raise
        self._finish()
        return True

    def result(self, timeout=None):
        if not self._wait(timeout):
            raise TimeoutError(f"the asynchronous save to {self.path!r} is not done after "
                               f"{timeout} s")
        self.retrieved = True
        if self._error is not None:
            raise self._error
        return None

    def exception(self, timeout=None):
        if not self._wait(timeout):
            raise TimeoutError(f"the asynchronous save to {self.path!r} is not done after "
                               f"{timeout} s")
        self.retrieved = True
        return self._error

    def add_done_callback(self, fn):
        with self._lock:
            if not self._finished:
                self._callbacks.append(fn)
                self._watch()
                return
        self._call(fn)

    def _watch(self):
        """Starts the thread that finishes the future when the save ends (with the lock held)."""
        if self._watcher is None:
            def watch():
                self._ticket.wait(None)
                self._finish()
            self._watcher = threading.Thread(target=watch, name="rckpt-save-watch", daemon=True)
            self._watcher.start()


class AsyncSaver:
    """One save in flight at a time, over a C++ rckpt::AsyncSaver whose snapshot buffers are
    reused from save to save. rckpt.save_async uses a module-level one; each
    CheckpointManager has its own."""

    def __init__(self):
        self._core = _core.AsyncSaver()
        self._lock = threading.Lock()
        self._last = None
        _live_savers.add(self)

    def save(self, path, state, *, rng=None, codec="none", level=1, chunk_bytes=4 << 20,
             threads=0, metadata=None, origin=None, progress=None, emulate_devices=0,
             on_success=None, drop_functions=False, if_absent=False, s3=None):
        check_bool("rckpt.save_async", "if_absent", if_absent)
        options = save_options("rckpt.save_async", emulate_devices, codec=codec, level=level,
                               chunk_bytes=chunk_bytes, threads=threads, replace=not if_absent)
        fs = _s3.file_system([path], s3, "rckpt.save_async")
        records = rng_records(rng, "rckpt.save_async")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike (save_async writes files by "
                            f"path; rckpt.save takes file objects), not {type(path)}")
        path = os.fspath(path)
        if isinstance(state, Checkpoint):
            state = state.state
        sections, metadata = _sections_to_save(state, rng, metadata)
        with self._lock:
            self._raise_unretrieved()
            with _state_types.dropping_functions(drop_functions, "rckpt.save_async", 5):
                ticket = self._core.save(
                    path, sections, records, options, metadata, origin,
                    progress_callback(progress, "save"), emulate_devices, fs=fs)
            self._last = SaveFuture(path, ticket, self._core, on_success=on_success)
            if on_success is not None:
                self._last._watch()
            return self._last

    def _raise_unretrieved(self):
        """Waits for the previous save; raises its error if nobody was handed it."""
        last = self._last
        if last is None:
            return
        last._wait(None)
        if last._error is not None and not last.retrieved:
            last.retrieved = True
            raise last._error

    def wait(self):
        """Waits for the save in flight; raises its error if nobody was handed it yet."""
        with self._lock:
            self._raise_unretrieved()

    def stats(self):
        """The C++ saver's figures: snapshot_bytes, snapshot_capacity, wait_seconds,
        snapshot_seconds, persist_seconds (of the last finished persist), saves."""
        return self._core.stats()

    def _finish_at_exit(self):
        last = self._last
        if last is None:
            return
        try:
            last._wait(None)
        except KeyboardInterrupt:
            return
        if last._error is not None and not last.retrieved:
            print(f"rckpt: the asynchronous save to {last.path!r} failed: {last._error}",
                  file=sys.stderr)


# Every saver's save in flight is finished at interpreter exit.
_live_savers = weakref.WeakSet()


def _finish_all_at_exit():
    for saver in list(_live_savers):
        saver._finish_at_exit()


atexit.register(_finish_all_at_exit)

_saver = None
_saver_lock = threading.Lock()


def _module_saver():
    global _saver
    with _saver_lock:
        if _saver is None:
            _saver = AsyncSaver()
        return _saver


def save_async(path, state, *, rng=None, codec="none", level=1, chunk_bytes=4 << 20, threads=0,
               metadata=None, origin=None, progress=None, emulate_devices=0,
               drop_functions=False, if_absent=False, s3=None):
    """Saves ``state`` to ``path`` in the background; returns a :class:`SaveFuture`.

    ``state`` is what rckpt.save takes (a dict of sections, a Checkpoint, a
    state_dict, a tensor ...); ``path`` a path or an ``s3://BUCKET/KEY``
    URL (not a file object). To object storage the call returns after the
    snapshot too, and the multipart upload runs in the background; the
    object appears when it completes. ``s3`` (an :class:`rckpt.s3.S3Options`)
    as for rckpt.save.

    Before it returns, every tensor is copied into snapshot buffers (kept and
    reused by the next call), and the tree, ``rng`` and ``metadata`` are
    captured as values: the caller may change or free its tensors at once
    (an optimizer step, ``add_``, ``del``), and the file holds the state at
    the call. CUDA tensors are copied on a side stream ordered after torch's
    current stream, which waits for the copies: change them on that stream
    at once, free them at once whatever stream they were allocated on (each
    is recorded on the current stream with ``record_stream``), but order a
    write on another stream after the save yourself. Writing (encode,
    checksums, write, fsync, rename) then runs in
    C++ without the GIL, with rckpt.save's guarantees: the file at ``path``
    is replaced only by a complete one. The options are rckpt.save's
    (``if_absent`` included);
    ``progress`` is called from the saving thread (and takes the GIL there).

    One save is in flight at a time: a call first waits for the previous
    one and, if that one failed and nobody called its ``result()`` /
    ``exception()``, raises its error instead of starting. At interpreter
    exit a save in flight is finished; a failure nobody saw is printed to
    stderr. docs/ASYNC.md.
    """
    return _module_saver().save(path, state, rng=rng, codec=codec, level=level,
                                chunk_bytes=chunk_bytes, threads=threads, metadata=metadata,
                                origin=origin, progress=progress,
                                emulate_devices=emulate_devices,
                                drop_functions=drop_functions, if_absent=if_absent, s3=s3)


def wait_async():
    """Waits for the save_async in flight; raises its error if nobody was handed it yet."""
    if _saver is not None:
        _saver.wait()
