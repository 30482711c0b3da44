"""CheckpointManager: a directory (or an object storage prefix) of step checkpoints, saved
in the background, pruned and resumed from safely.

Layout of the directory::

    step-000100.rckpt      one checkpoint per step (six digits at least, more when
    step-000200.rckpt      the step needs them); a step exists once its file is
    latest                 durable under this name: the rename is the commit
                           marker. "latest" holds the newest committed step
                           (text, for tools), replaced atomically after it.

Crash rules (docs/ASYNC.md): a save in flight or failed is never counted;
pruning runs only after the new checkpoint is durable and never removes it;
``load()`` walks the steps newest-first and skips, with a warning, a file
that is damaged (CorruptionError) or gone, and raises every other error
(I/O, memory, options) with its cause; temporaries left by a crashed process
are removed by the next manager that saves (opening to read takes nothing
over).

In object storage (``s3://BUCKET/PREFIX``) the same names are objects under
the prefix, and the commit marker is the pointer: a step is committed once
its object is complete (CompleteMultipartUpload or PutObject, written with
``If-None-Match: *`` so that two jobs cannot replace each other's step) and
"latest" names it or a newer step. While a manager writes a step, a small
lease object beside it (``step-N.rckpt.lease``) says until when its writer
is alive; the writer refreshes it. Incomplete uploads of the manager's names
and step objects newer than "latest" are leftovers of a killed process: a
manager that saves removes those of a writer whose lease ran out, or, with
no lease, older than ``stale_after`` (docs/OBJECT_STORAGE.md, "The manager
on a prefix").
"""

import json
import os
import pickle
import re
import socket
import threading
import time
import warnings

from . import _state_types, storage
from . import checkpoint as _checkpoint
from .async_save import AsyncSaver, SaveFuture
from ._local_only import refuse_url
from .errors import (AlreadyExistsError, CorruptionError, Error, InvalidArgumentError,
                     NotFoundError)
from .s3 import S3Options

_STEP_FILE = re.compile(r"^step-(\d+)\.rckpt$")
_LATEST = "latest"
_LEASE = ".lease"  # step-N.rckpt.lease: the lease of step N's writer (object storage)
# How long a writer's lease lasts, in seconds; it is renewed every quarter of that
# while the step is written, so a renewal may take three quarters of it (S3's
# retries included) before the lease runs out.
_LEASE_SECONDS = 120.0


def step_file(step):
    """The file name of ``step``'s checkpoint: ``step-000123.rckpt``."""
    return f"step-{step:06d}.rckpt"


def _check_prefix(directory):
    """An s3:// directory without a trailing '/', or InvalidArgumentError."""
    bucket = directory[len("s3://"):].split("/", 1)[0]
    if not bucket:
        raise InvalidArgumentError(f"CheckpointManager: directory {directory!r} names no "
                                   f"bucket: expected s3://BUCKET/PREFIX")
    return directory.rstrip("/")


def _check_step(who, step):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"CheckpointManager.{who}: step must be an int >= 0, got {step!r}")


def _now_ms():
    return int(time.time() * 1000)


class _Lease:
    """The lease of one step's writer: a small object beside the step saying until when
    the writer is alive, written before the step's upload starts and renewed on a thread
    of its own while it runs. A multipart upload's own metadata is fixed when the upload
    starts and ListMultipartUploads does not show it, so a renewable object is the only
    mark a writer can keep fresh that another process can read."""

    def __init__(self, path, s3):
        self.path = path
        self._s3 = s3
        self._seconds = _LEASE_SECONDS
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = None
        self._released = False

    def _write(self):
        now = _now_ms()
        record = {"writer": f"{socket.gethostname()} pid {os.getpid()}",
                  "renewed_unix_ms": now, "expires_unix_ms": now + int(self._seconds * 1000)}
        storage.write(self.path, json.dumps(record).encode() + b"\n", s3=self._s3)

    def take(self):
        """Writes the lease (its error raised: nothing of the step is written then) and
        starts renewing it."""
        self._write()
        self._thread = threading.Thread(target=self._renew, name="rckpt-lease", daemon=True)
        self._thread.start()

    def _renew(self):
        warned = False
        while not self._stop.wait(self._seconds / 4):
            try:
                self._write()
            except Error as e:
                if not warned:
                    warnings.warn(f"rckpt.CheckpointManager: the lease {self.path} was not "
                                  f"renewed (tried again every {self._seconds / 4:g} s): {e}")
                    warned = True

    def release(self):
        """Stops renewing and removes the lease (once; later calls do nothing). A lease
        that cannot be removed runs out by itself."""
        with self._lock:
            if self._released:
                return
            self._released = True
            self._stop.set()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join()
            try:
                storage.delete(self.path, missing_ok=True, s3=self._s3)
            except Error:
                pass


def _lease_expiry(path, s3):
    """The expires_unix_ms of the lease object at ``path``; None when there is none or it
    holds no such record."""
    try:
        return int(json.loads(storage.read(path, s3=s3))["expires_unix_ms"])
    except (NotFoundError, ValueError, KeyError, TypeError):
        return None


def _check_count(name, value, allow_none):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        expected = "an int >= 1 or None" if allow_none else "an int >= 1"
        raise ValueError(f"CheckpointManager: {name} must be {expected}, got {value!r}")


class CheckpointManager:
    """Saves step checkpoints into ``directory``, keeps some, and resumes from the newest
    one that verifies.

    ::

        with rckpt.CheckpointManager("run/ckpt", keep=3, keep_every=1000) as mgr:
            start = 0
            if mgr.latest_step() is not None:
                ck = mgr.load()                # the newest step that verifies
                start = mgr.loaded_step + 1    # which may be older than latest_step()
                ...
            for step in range(start, steps):
                train_step()
                if step % 100 == 0:
                    mgr.save(step, state, rng=rckpt.capture_rng())

    - ``keep``: how many of the newest steps to keep (None: all);
      ``keep_every``: also keep every step divisible by it.
    - ``async_save``: save with rckpt.save_async semantics (the snapshot is
      taken before save() returns, the file written in the background);
      False saves synchronously. The manager has its own saver.
    - ``comm``: a torch.distributed ProcessGroup (``dist.group.WORLD``) or an
      mpi4py communicator: every rank calls every method (collective), saves
      go through rckpt.distributed.save (synchronous), rank 0 prunes and
      writes "latest", and every rank gets the same steps; ``timeout``
      (seconds) bounds each collective, as rckpt.distributed's calls.
    - ``stale_after`` (seconds, default 3600, as ``rckpt incomplete --abort
      --older-than``): what a writer that left no lease (object storage) or no
      live process (a local temporary's) started this long ago is a dead
      writer's, which the next save removes.
    - other keywords are rckpt.save's options (codec, level, chunk_bytes,
      threads, metadata, origin, progress, emulate_devices, drop_functions).

    The directory is created (with its parents) when it does not exist, as
    DCP and Lightning create theirs; a path that is a file is refused
    (NotADirectoryError), since the manager keeps a directory of its own.

    ``directory`` may be an object storage prefix, ``"s3://BUCKET/PREFIX"``
    (a str: pathlib collapses "//"), synchronous or asynchronous alike, or
    with ``comm=`` (every rank's part in one object): each step is an object
    under it and "latest" a small pointer object naming the newest; a step
    counts once both are written. Step objects are written with
    ``If-None-Match: *``: where the server honours it (AWS, SeaweedFS), a
    second job saving the same step fails with rckpt.AlreadyExistsError
    instead of replacing the first one's. Opening the prefix, ``steps()``,
    ``latest_step()`` and ``load()`` only read: an evaluator may open a
    prefix a job is writing. A save first removes what dead writers left:
    incomplete uploads of the manager's names and step objects newer than
    "latest" whose writer's lease ran out, or, without a lease, older than
    ``stale_after`` (``removed_uncommitted`` lists the steps removed).
    ``s3=rckpt.s3.S3Options(...)`` reaches the prefix with those options
    (endpoint, credentials, ...) rather than the environment's configuration:
    the manager's saves, loads, "latest" pointer and pruning all use them (a
    ``load(s3=...)`` overrides them for that load).

    Not thread-safe: one thread calls the manager.
    """

    def __init__(self, directory, *, keep=3, keep_every=None, async_save=True, comm=None,
                 timeout=1800.0, s3=None, stale_after=3600.0, **save_options):
        _check_count("keep", keep, allow_none=True)
        _check_count("keep_every", keep_every, allow_none=True)
        if isinstance(stale_after, bool) or not isinstance(stale_after, (int, float)) or \
                not stale_after >= 0:
            raise ValueError(f"CheckpointManager: stale_after must be a number of seconds >= 0, "
                             f"got {stale_after!r}")
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"CheckpointManager: directory must be a str or os.PathLike, "
                            f"not {type(directory)}")
        self._remote = isinstance(directory, str) and storage.is_url(directory)
        if self._remote:
            directory = _check_prefix(directory)
        else:
            refuse_url(directory, "CheckpointManager", "directory")
        allowed = {"codec", "level", "chunk_bytes", "threads", "metadata", "origin",
                   "progress", "emulate_devices", "drop_functions"}
        unknown = sorted(set(save_options) - allowed)
        if unknown:
            raise TypeError(f"CheckpointManager: unknown save options {unknown}; "
                            f"expected some of {sorted(allowed)}")
        if s3 is not None and not isinstance(s3, S3Options):
            raise TypeError(f"CheckpointManager: s3 must be an rckpt.s3.S3Options or None, not "
                            f"{type(s3).__name__}")
        if s3 is not None and comm is not None:
            raise InvalidArgumentError(
                "CheckpointManager: s3= does not go with comm=: rckpt.distributed reaches "
                "object storage through the environment's configuration (AWS_ENDPOINT_URL, "
                "AWS_PROFILE, ~/.aws, ...), as the AWS CLI does")
        if not isinstance(async_save, bool):
            raise TypeError(f"CheckpointManager: async_save must be True or False, not "
                            f"{async_save!r}")
        self.directory = os.fspath(directory)
        self.keep = keep
        self.keep_every = keep_every
        self._drop_functions = save_options.pop("drop_functions", False)
        if not isinstance(self._drop_functions, bool):
            raise TypeError(f"CheckpointManager: drop_functions must be True or False, not "
                            f"{self._drop_functions!r}")
        self.async_save = async_save and comm is None
        self._comm = None
        if comm is not None:
            from .distributed import _communicator
            self._comm = _communicator(comm, timeout)
        self._s3 = s3
        if s3 is not None:
            save_options["s3"] = s3
        self._options = save_options
        self.stale_after = float(stale_after)
        self._saver = AsyncSaver() if self.async_save else None
        self._pending = None  # (step, SaveFuture, lease or None) of the save in flight
        self._commit_lock = threading.Lock()
        self._closed = False
        self._clean_up_due = True  # until a save's clean-up leaves nothing undecided
        self.loaded_step = None  # the step the last load() / load_into() read
        self.removed_uncommitted = []  # steps this manager's saves removed (object storage)
        if not self._remote:
            self._on_root(self._open_directory)

    # -- collective helpers -------------------------------------------------------------
    def _is_root(self):
        return self._comm is None or self._comm.rank == 0

    def _on_root(self, fn):
        """fn() on rank 0 (or alone); with a communicator every rank gets its result or
        raises the same error."""
        if self._comm is None:
            return fn()
        from .distributed import _agree
        value = _agree(self._comm, lambda: fn() if self._is_root() else None)
        # Rank 0's answer (steps, names) for every rank; the ranks are one job.
        return pickle.loads(self._comm.broadcast(pickle.dumps(value), 0))

    def _open_directory(self):
        try:
            storage.make_dirs(self.directory, s3=self._s3)
        except InvalidArgumentError as e:  # a file is there, or on the way
            if not storage.exists(self.directory, s3=self._s3):
                raise NotADirectoryError(f"CheckpointManager: cannot create directory "
                                         f"{self.directory!r}: {e}") from None
            raise NotADirectoryError(
                f"CheckpointManager: directory {self.directory!r} is a file, not a directory: "
                f"the manager keeps its step-NNNNNN.rckpt files in a directory of its own (give "
                f"one such as {os.path.join(os.path.dirname(self.directory), 'ckpt')!r}); to "
                f"read that file, use rckpt.load({self.directory!r})") from None
        except Error as e:
            raise type(e)(f"CheckpointManager: cannot create directory {self.directory!r}: "
                          f"{e}") from None

    # -- what dead writers left -------------------------------------------------------------
    def _clean_up(self):
        """Removes what dead writers left (before a save, on rank 0); returns whether
        something was left undecided (a writer that may be alive: looked at again at the
        next save) and the uncommitted steps removed."""
        if not self._remote:
            # A local temporary names its writer's process: a dead one's goes.
            storage.abort_stale(self._prefix(), self._own_name, s3=self._s3)
            return False, []
        removed = []
        try:
            return self._clean_up_prefix(removed), removed
        except Error as e:  # housekeeping: the save goes on, the next one looks again
            warnings.warn(f"rckpt.CheckpointManager: what dead writers left under "
                          f"{self._prefix()} was not cleaned up: {e}", stacklevel=4)
            return True, removed

    def _prefix(self):
        return storage.join(self.directory, "")

    def _own_name(self, path):
        """Whether ``path`` (under the directory) is one of the manager's names."""
        name = path[len(self._prefix()):]
        return name == _LATEST or _STEP_FILE.match(name) is not None

    # -- object storage --------------------------------------------------------------------
    def _clean_up_prefix(self, removed):
        """Aborts the incomplete uploads of the manager's names and removes step objects
        newer than the pointer (completed, never committed) whose writer is provably dead
        (_writer_dead), and the leases that protect nothing any more."""
        prefix = self._prefix()
        now = _now_ms()
        objects = {f.path: f for f in storage.list_files(prefix, s3=self._s3)}
        leases = {}

        def dead(path, started_ms):
            if path + _LEASE in objects and path not in leases:
                leases[path] = _lease_expiry(path + _LEASE, self._s3)
            return self._writer_dead(leases.get(path), started_ms, now)

        undecided = set()
        try:
            incomplete = storage.list_incomplete(prefix, s3=self._s3)
        except Error as e:  # a store without ListMultipartUploads: saves work all the same
            warnings.warn(f"rckpt.CheckpointManager: the incomplete uploads under {prefix} "
                          f"were not looked at: {e}", stacklevel=5)
            incomplete = []
        for w in incomplete:
            if not self._own_name(w.path):
                continue
            if not dead(w.path, w.started_unix_ms):
                undecided.add(w.path)
                continue
            try:
                storage.abort_incomplete(w, s3=self._s3)
            except NotFoundError:
                pass  # another cleaner won, or the upload completed meanwhile
        pointer = self._read_pointer()
        for s in self._listed_steps(objects.values()):
            path = self.path(s)
            if pointer is None or s <= pointer:
                continue
            if not dead(path, objects[path].modified_unix_ms):
                undecided.add(path)
                continue
            storage.delete(path, missing_ok=True, s3=self._s3)
            removed.append(s)
        for path in objects:
            if path.endswith(_LEASE) and path[:-len(_LEASE)] not in undecided and \
                    self._own_name(path[:-len(_LEASE)]) and \
                    dead(path[:-len(_LEASE)], objects[path].modified_unix_ms):
                storage.delete(path, missing_ok=True, s3=self._s3)
        return bool(undecided)

    def _writer_dead(self, expires_ms, started_ms, now_ms):
        """Whether the writer of something begun at ``started_ms`` (0: unknown) is
        provably dead: its lease, expiring at ``expires_ms``, ran out, and it began before
        (so it was that writer's); or, with no lease (None), it began ``stale_after``
        ago."""
        if expires_ms is not None:
            if now_ms <= expires_ms:
                return False
            if started_ms == 0 or started_ms <= expires_ms:
                return True
        return started_ms > 0 and now_ms - started_ms >= self.stale_after * 1000

    def _read_pointer(self):
        """The step "latest" names in object storage; None when there is none (or it is
        damaged: the listing then stands in for it, with a warning)."""
        pointer = storage.join(self.directory, _LATEST)
        try:
            text = storage.read(pointer, s3=self._s3)
        except NotFoundError:
            return None
        try:
            step = int(text.decode("ascii").strip())
            if step < 0:
                raise ValueError(step)
        except ValueError:
            warnings.warn(f"rckpt.CheckpointManager: {pointer} does not hold a step number "
                          f"({text[:40]!r}); the listed steps count instead", stacklevel=4)
            return None
        return step

    def _listed_steps(self, listing=None):
        """The step files in the directory (in ``listing``, when given, of
        storage.list_files), committed or not, oldest first."""
        prefix = self._prefix()
        steps = []
        if listing is None:
            listing = storage.list_files(prefix, s3=self._s3)
        for f in listing:
            m = _STEP_FILE.match(f.path[len(prefix):])
            if m:
                steps.append(int(m.group(1)))
        return sorted(steps)

    # -- queries ---------------------------------------------------------------------------
    def path(self, step):
        """The path of ``step``'s checkpoint (whether or not it exists)."""
        return storage.join(self.directory, step_file(step))

    def _scan(self):
        steps = self._listed_steps()
        if self._remote:
            pointer = self._read_pointer()
            if pointer is not None:
                steps = [s for s in steps if s <= pointer]  # newer ones are not committed
        pending = self._pending
        if pending is not None and not pending[1].done():
            steps = [s for s in steps if s != pending[0]]  # renamed, maybe not yet durable
        return sorted(steps)

    def steps(self):
        """The committed steps, oldest first: files durable under their final names. A save
        in flight or failed is never among them."""
        self._check_open()
        return self._on_root(self._scan)

    def latest_step(self):
        """The newest committed step, or None. load() checks that its file verifies."""
        steps = self.steps()
        return steps[-1] if steps else None

    # -- saving ------------------------------------------------------------------------------
    def save(self, step, state, *, rng=None, rank_state=None, common=None):
        """Saves ``state`` (a dict of sections, as rckpt.save takes) as ``step``; returns a
        SaveFuture (already done for synchronous saves).

        Waits for the previous save first and raises its error if nobody was handed it
        (its step was never committed). Once the file is durable: "latest" is updated,
        then old steps are pruned. ``rank_state`` / ``common``: rckpt.distributed.save's
        (with ``comm`` only). ValueError for a negative step or one already committed.
        """
        self._check_open()
        _check_step("save", step)
        if self._comm is None and (rank_state is not None or common is not None):
            raise TypeError("CheckpointManager.save: rank_state and common need a communicator "
                            "(comm=)")
        self._raise_pending()
        if step in self.steps():
            raise ValueError(f"CheckpointManager.save: step {step} is already saved in "
                             f"{self.path(step)!r}")
        if self._clean_up_due:
            self._clean_up_due, removed = self._on_root(self._clean_up)
            self.removed_uncommitted += removed
        path = self.path(step)
        # Rank 0 (or the only process) holds the lease of the step it writes.
        lease = _Lease(path + _LEASE, self._s3) if self._remote and self._is_root() else None
        self._on_root(lambda: lease and lease.take())
        commit = lambda: self._commit(step)  # noqa: E731
        # In object storage a step never replaces another job's (If-None-Match).
        options = dict(self._options, if_absent=True) if self._remote else self._options
        try:
            with _state_types.dropping_functions(self._drop_functions, "CheckpointManager.save"):
                if self.async_save:
                    future = self._saver.save(path, state, rng=rng, on_success=commit, **options)
                    self._pending = (step, future, lease)
                    if lease is not None:
                        future.add_done_callback(lambda _: lease.release())
                    lease = None  # released when the save ends
                    return future
                try:
                    if self._comm is None:
                        _checkpoint.save(path, state, rng=rng, **options)
                    else:
                        from . import distributed
                        distributed.save(self._comm, path, state, rank_state=rank_state,
                                         common=common, rng=rng, **options)
                except AlreadyExistsError as e:
                    raise AlreadyExistsError(
                        f"CheckpointManager.save: step {step} was written to {path!r} by "
                        f"another job meanwhile (one job per directory): {e}") from None
            self._on_root(commit)
        finally:
            if lease is not None:
                lease.release()
        return SaveFuture(path)

    def _raise_pending(self):
        """Waits for the save in flight; raises its error if nobody was handed it."""
        if self._pending is None:
            return
        _, future, lease = self._pending
        future._wait(None)
        self._pending = None
        if lease is not None:
            lease.release()  # (its done callback may still be on its way)
        if future._error is not None and not future.retrieved:
            future.retrieved = True
            raise future._error

    def _commit(self, step):
        """After ``step``'s file is durable: the "latest" record, then pruning. Locally the
        step's rename committed it, and "latest" is a record for tools; in object storage
        "latest" is the commit."""
        with self._commit_lock:
            if self._remote:
                self._write_pointer(step)
            else:
                storage.write(storage.join(self.directory, _LATEST), f"{step}\n".encode(),
                              s3=self._s3)
            self._prune(step)

    def _write_pointer(self, step):
        """The commit of ``step`` in object storage: "latest" names it (or the newer step it
        named already, which stays committed). A pointer that cannot be written leaves the
        step uncommitted: its object is removed, so the step can be saved again."""
        pointer = storage.join(self.directory, _LATEST)
        try:
            current = self._read_pointer()
            storage.write(pointer, f"{max(step, current or 0)}\n".encode(), s3=self._s3)
        except BaseException:
            try:
                storage.delete(self.path(step), missing_ok=True, s3=self._s3)
            except Error:
                pass  # the next manager on the prefix removes it
            raise

    def _prune(self, saved):
        if self.keep is None:
            return
        steps = [s for s in self._scan_all()]
        if self._remote:
            pointer = self._read_pointer()
            steps = [s for s in steps if pointer is None or s <= pointer]
        keep = set(steps[-self.keep:]) | {saved}  # never the one just saved
        if self.keep_every:
            keep |= {s for s in steps if s % self.keep_every == 0}
        for s in steps:
            if s not in keep:
                storage.delete(self.path(s), missing_ok=True, s3=self._s3)

    def _scan_all(self):
        return self._listed_steps()

    def wait(self):
        """Waits for the save in flight; raises its error if nobody was handed it yet."""
        self._raise_pending()

    def close(self):
        """Waits for the save in flight (raising its error as wait() does); the manager
        cannot be used afterwards. Closing twice is fine."""
        if self._closed:
            return
        try:
            self._raise_pending()
        finally:
            self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001  (the exception already raised matters more)
            pass

    def _check_open(self):
        if self._closed:
            raise Error(f"CheckpointManager of {self.directory!r} is closed")

    # -- loading ----------------------------------------------------------------------------
    def _step_saved(self, path):
        """Whether the step file ``path`` exists (every rank gets rank 0's answer). Errors
        are raised: a throttled or refused listing is not "missing"."""
        def look():
            return any(f.path == path for f in storage.list_files(path, s3=self._s3))
        return self._on_root(look)

    def _damaged(self, path, error):
        """Whether ``error``, of loading the step file ``path``, says the step is damaged
        (its bytes are not a valid checkpoint, or the file is gone): the walk then goes on
        to the step before. Any other error (I/O after the retries, memory, an option, an
        expired token) is trouble, not damage: loading an older step would resume from
        the wrong state."""
        if isinstance(error, CorruptionError):
            return True
        return isinstance(error, FileNotFoundError) and not self._step_saved(path)

    def _walk(self, step, load_one):
        """load_one(path) for ``step``, or newest-first over the steps until one loads."""
        self._check_open()
        self._raise_pending()
        if step is not None:
            _check_step("load", step)
            path = self.path(step)
            if not self._step_saved(path):
                raise NotFoundError(f"CheckpointManager: step {step} is not saved in "
                                    f"{self.directory!r} (saved steps: {self._scan_all()})")
            return step, load_one(path)
        steps = self.steps()
        if self._remote:
            pointer = self._read_pointer()
            if pointer is not None and pointer not in steps:
                warnings.warn(f"rckpt.CheckpointManager: skipping step {pointer}, which "
                              f"{storage.join(self.directory, _LATEST)} names: its object "
                              f"{self.path(pointer)} is missing", stacklevel=3)
        for s in reversed(steps):
            path = self.path(s)
            try:
                return s, load_one(path)
            except (Error, OSError) as e:
                if not self._damaged(path, e):
                    raise
                warnings.warn(f"rckpt.CheckpointManager: skipping {path}: {e}", stacklevel=3)
        raise NotFoundError(f"no checkpoint in {self.directory!r} loads and verifies")

    def load(self, step=None, **load_options):
        """Loads ``step`` (None: the newest step that loads and verifies, skipping a
        damaged one (rckpt.CorruptionError: truncated, a checksum that fails) or one whose
        file is gone, with a warning naming the file and the reason; any other error, an
        I/O error after the retries, OutOfMemoryError, a bad option, is raised with its
        cause, never taken for damage). Returns what rckpt.load returns, with the step as
        ``.step`` where it takes attributes (a Checkpoint does) and always as the
        manager's ``loaded_step``: resume from ``loaded_step + 1``, which is older than
        ``latest_step()`` when a damaged step was skipped. Keywords are rckpt.load's
        (with ``comm``: ``wants=`` and rckpt.distributed.load's, and a RankLoad comes
        back)."""
        if self._comm is None:
            load_options.setdefault("verify", True)
            if self._s3 is not None:
                load_options.setdefault("s3", self._s3)
            s, ck = self._walk(step, lambda p: _checkpoint.load(p, **load_options))
        else:
            from . import distributed
            wants = load_options.pop("wants", {})
            s, ck = self._walk(step, lambda p: distributed.load(self._comm, p, wants,
                                                                **load_options))
        self.loaded_step = s
        try:
            ck.step = s
        except AttributeError:  # a root object saved as it was (a dict, ...): see loaded_step
            pass
        return ck

    def load_into(self, state, step=None, **load_options):
        """rckpt.load_into from ``step`` (None: newest-first, as load); returns the step."""
        if self._comm is not None:
            raise Error("CheckpointManager.load_into is not collective; use load(wants=...)")
        if self._s3 is not None:
            load_options.setdefault("s3", self._s3)
        s, _ = self._walk(step, lambda p: _checkpoint.load_into(p, state, **load_options))
        self.loaded_step = s
        return s
