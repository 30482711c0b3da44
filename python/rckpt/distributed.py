"""Sharded checkpoints of multi-process jobs, from Python.

Every rank of a job calls :func:`save` with its part of the state; the
ranks write one ``.rckpt`` file in parallel, each its own blocks. A job of
any size then calls :func:`load`, every rank asking for the blocks it wants.
The ranks talk through a torch.distributed process group (a job launched
with ``torchrun``; NCCL or gloo) or an mpi4py communicator (``mpirun``)::

    import torch.distributed as dist
    import rckpt.distributed as rd

    dist.init_process_group("gloo")            # torchrun sets the rendezvous
    rank, world = dist.get_rank(), dist.get_world_size()
    rd.save(None, "run/last.rckpt",             # None: the default process group
            {"model": {"fc1.weight": rd.Shard(my_rows, (row0, 0), (4096, 1024)),
                       "embed.weight": embedding},            # replicated
             "controller": {"epoch": 7}},                      # rank 0's is kept
            rank_state={"cursor": cursor}, rng=rckpt.capture_rng())
    back = rd.load(None, "run/last.rckpt",
                   {"model.fc1.weight": rd.part((4096, 1024), rank, world),
                    "model.embed.weight": None})               # None: the whole tensor
    dist.destroy_process_group()               # before exiting: docs/DISTRIBUTED.md

The calls are collective: every rank calls them, with the same path, and
every rank raises the same exception when any rank fails; a rank that never
comes (it crashed, or failed before the call) makes the others raise
IoError after ``timeout`` instead of hanging. The C++ library
(rckpt/distributed.h) does the work; docs/DISTRIBUTED.md, "From Python".
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

from . import _distributed
from ._local_only import refuse_url
from ._args import (check_bool, device_str, map_location_arg, progress_callback, rng_records,
                    save_options)
from .errors import Error, IoError
from .rng import RngRecord, RngState

if TYPE_CHECKING:
    import torch
    import torch.distributed

    from ._typing import Device, MapLocation, Origin, Progress

    #: What the collective calls take: a torch.distributed ProcessGroup, an
    #: mpi4py communicator, or None (torch.distributed's default group).
    Comm = Any

_distributed.init_torch()

#: Collectives wait this long for every rank (seconds) unless told otherwise:
#: torch.distributed's own default for gloo.
DEFAULT_TIMEOUT = 1800.0


def _seconds(timeout: Union[float, datetime.timedelta]) -> float:
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"timeout must be a positive number of seconds or a timedelta, "
                         f"not {timeout!r}")
    return float(seconds)


#: How long a collective on a CPU group waits for gloo to let go of its
#: tensors (_TorchComm._run); 0 once a wait ran out.
_release_wait_seconds = 5.0


class _TorchComm:
    """The collectives of a torch.distributed process group, on byte strings.

    Each collective is launched asynchronously and waited for at most the
    timeout (gloo honours it; with NCCL the group's own watchdog applies).
    Tensors travel on the group's device: CUDA for an NCCL group, else CPU.
    """

    def __init__(self, group, seconds):
        import torch
        import torch.distributed as dist
        self._dist, self._torch = dist, torch
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.seconds = seconds
        self.error = None  # the first collective's failure: later ones are not tried
        backend = str(dist.get_backend(group)).lower()
        cuda = backend == "nccl" or (backend.startswith("cuda:nccl") and "cpu:" not in backend)
        self.device = (torch.device("cuda", torch.cuda.current_device()) if cuda
                       else torch.device("cpu"))

    def _wait(self, work, what):
        if self.error is not None:
            raise self.error
        t0 = time.monotonic()
        try:
            work.wait(timeout=datetime.timedelta(seconds=self.seconds))
        except Exception as e:  # noqa: BLE001  (gloo raises RuntimeError; any is a failure)
            waited = time.monotonic() - t0
            if waited >= self.seconds * 0.99:
                message = (f"rank {self.rank}: {what} timed out after {self.seconds:g} s waiting "
                           f"for the other ranks of the process group (a rank failed, exited or "
                           f"is stuck): {e}")
            else:
                message = f"rank {self.rank}: {what} failed: {e}"
            self.error = IoError(message)
            raise self.error from e

    def _run(self, what, tensors, start, read):
        """Runs one collective on ``tensors`` and returns ``read(tensors)``.

        ``start(tensors)`` launches the collective (async_op=True) and returns
        its work. On a CPU group (gloo) the call returns only once gloo's
        worker thread has let go of the tensors too: the worker drops a
        finished work a moment after ``wait`` returns, and were that moment
        to fall into the interpreter's shutdown, its release of a tensor
        whose Python object is gone would take the GIL there and abort the
        process ("terminate called without an active exception"). Hence the
        weakrefs: a tensor's callback runs when its last holder lets go.
        """
        global _release_wait_seconds
        self._wait(start(tensors), what)
        result = read(tensors)
        if self.device.type != "cpu" or _release_wait_seconds <= 0:
            tensors.clear()
            return result
        released = threading.Semaphore(0)
        refs = [weakref.ref(t, lambda _: released.release()) for t in tensors]
        tensors.clear()
        deadline = time.monotonic() + _release_wait_seconds
        for _ in refs:
            if not released.acquire(timeout=max(deadline - time.monotonic(), 0)):
                # This torch keeps a finished work's tensors (or its worker is
                # starved for long): waiting again would only slow every call.
                _release_wait_seconds = 0
                break
        return result

    def _sizes(self, n, what):
        torch = self._torch
        t = [torch.tensor([n], dtype=torch.int64, device=self.device)]
        t += [torch.zeros(1, dtype=torch.int64, device=self.device) for _ in range(self.size)]
        return self._run(what, t, lambda t: self._dist.all_gather(t[1:], t[0], group=self.group,
                                                                  async_op=True),
                         lambda t: [int(s.item()) for s in t[1:]])

    def _tensor(self, data, length):
        torch = self._torch
        buf = torch.zeros(max(length, 1), dtype=torch.uint8, device=self.device)
        if data:
            buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return buf

    def allgather(self, data):
        sizes = self._sizes(len(data), "allgather")
        longest = max(sizes)
        t = [self._tensor(data, longest)] + [self._tensor(b"", longest) for _ in range(self.size)]
        return self._run("allgather", t, lambda t: self._dist.all_gather(
            t[1:], t[0], group=self.group, async_op=True),
            lambda t: [o[:n].cpu().numpy().tobytes() for o, n in zip(t[1:], sizes)])

    def broadcast(self, data, root):
        torch, dist = self._torch, self._dist
        src = dist.get_global_rank(self.group, root) if hasattr(dist, "get_global_rank") else root
        n = self._run("broadcast",
                      [torch.tensor([len(data) if self.rank == root else 0], dtype=torch.int64,
                                    device=self.device)],
                      lambda t: dist.broadcast(t[0], src, group=self.group, async_op=True),
                      lambda t: int(t[0].item()))
        return self._run("broadcast", [self._tensor(data if self.rank == root else b"", n)],
                         lambda t: dist.broadcast(t[0], src, group=self.group, async_op=True),
                         lambda t: t[0][:n].cpu().numpy().tobytes())

    def barrier(self):
        self._sizes(0, "barrier")

    def exchange(self, sends):
        dist = self._dist
        incoming, out = _exchange_start(self, sends)

        def peer(r):
            return dist.get_global_rank(self.group, r) if hasattr(dist, "get_global_rank") else r
        tensors, ops, at = [], [], {}
        for dst, data in sorted(sends.items()):
            if dst != self.rank and len(data):
                tensors.append(self._tensor(data, len(data)))
                ops.append(dist.P2POp(dist.isend, tensors[-1], peer(dst), self.group))
        for src, n in sorted(incoming.items()):
            if n:
                at[src] = len(tensors)
                tensors.append(self._tensor(b"", n))
                ops.append(dist.P2POp(dist.irecv, tensors[-1], peer(src), self.group))
        if ops:
            out.update(self._run("exchange", tensors,
                                 lambda t: _AllWorks(dist.batch_isend_irecv(ops)),
                                 lambda t: {src: t[i][:incoming[src]].cpu().numpy().tobytes()
                                            for src, i in at.items()}))
            ops.clear()
        return out


class _MpiComm:
    """The collectives of an mpi4py communicator, on byte strings.

    Each collective waits at most the timeout for every rank to enter it (a
    non-blocking barrier, polled) before it runs; MPI cannot cancel the
    barrier left pending after a timeout: abort the job then.
    """

    def __init__(self, comm, seconds):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.seconds = seconds
        self.error = None

    def _arrive(self, what):
        if self.error is not None:
            raise self.error
        request = self.comm.Ibarrier()
        deadline = time.monotonic() + self.seconds
        pause = 2e-5
        while not request.Test():
            if time.monotonic() >= deadline:
                self.error = IoError(
                    f"rank {self.rank}: {what} timed out after {self.seconds:g} s waiting for "
                    f"the other ranks (a rank failed, exited or is stuck; abort the MPI job)")
                raise self.error
            time.sleep(pause)
            pause = min(pause * 2, 5e-3)

    def allgather(self, data):
        self._arrive("allgather")
        return self.comm.allgather(bytes(data))

    def broadcast(self, data, root):
        self._arrive("broadcast")
        return self.comm.bcast(bytes(data) if self.rank == root else None, root=root)

    def barrier(self):
        self._arrive("barrier")

    def exchange(self, sends):
        incoming, out = _exchange_start(self, sends)
        outgoing = [(dst, bytes(data)) for dst, data in sorted(sends.items())
                    if dst != self.rank and len(data)]  # alive until Waitall
        buffers = {src: bytearray(n) for src, n in incoming.items() if n}
        requests = [self.comm.Isend(data, dest=dst, tag=_EXCHANGE_TAG) for dst, data in outgoing]
        requests += [self.comm.Irecv(buf, source=src, tag=_EXCHANGE_TAG)
                     for src, buf in sorted(buffers.items())]
        if requests:
            from mpi4py import MPI
            MPI.Request.Waitall(requests)
        out.update({src: bytes(buf) for src, buf in buffers.items()})
        return out


class _LocalComm:
    """A job of one process: collectives with nobody else (rckpt.dcp without a group)."""

    rank, size, error = 0, 1, None

    def allgather(self, data):
        return [bytes(data)]

    def broadcast(self, data, root):
        return bytes(data)

    def barrier(self):
        pass

    def exchange(self, sends):
        if set(sends) - {0}:
            raise ValueError(f"a job of one process has only rank 0, not {sorted(sends)}")
        return {0: bytes(sends[0])} if 0 in sends else {}


LOCAL: Any = _LocalComm()

# exchange(sends) on each of the classes above: a sparse all-to-all. Rank r
# sends ``sends[d]`` (bytes, maybe empty) to each rank d and gets back, from
# each rank s whose sends named r, what s sent. Every rank calls it, also with
# nothing to send; who sends how much to whom is agreed by one allgather, then
# the bytes go point to point, each pair once (the redundancy of the local
# tier, rckpt.redundancy: a copy to one partner, parity segments to a few).
_EXCHANGE_TAG = 0x72636B  # "rck": apart from the tags a job's own messages use


class _AllWorks:
    """The works of batch_isend_irecv as one: waited for in turn, within the one timeout."""

    def __init__(self, works):
        self.works = works

    def wait(self, timeout):
        deadline = time.monotonic() + timeout.total_seconds()
        for work in self.works:
            work.wait(timeout=datetime.timedelta(seconds=max(deadline - time.monotonic(), 0.001)))
        return True


def _exchange_start(comm, sends):
    """Checks ``sends``, agrees the sizes; (what comes here from whom, what this rank keeps)."""
    for dst, data in sends.items():
        if isinstance(dst, bool) or not isinstance(dst, int) or not 0 <= dst < comm.size:
            raise ValueError(f"exchange: rank {dst!r} is not a rank of this job of {comm.size}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"exchange: what goes to rank {dst} must be bytes, not {type(data)}")
    mine = json.dumps(sorted((dst, len(data)) for dst, data in sends.items())).encode()
    incoming = {}
    for src, listed in enumerate(comm.allgather(mine)):
        for dst, n in json.loads(listed):
            if dst == comm.rank and src != comm.rank:
                incoming[src] = n
    out = {src: b"" for src, n in incoming.items() if n == 0}
    if comm.rank in sends:
        out[comm.rank] = bytes(sends[comm.rank])
    return incoming, out


def _communicator(comm, timeout):
    """The collectives of ``comm``: a ProcessGroup, an mpi4py communicator, or None."""
    seconds = _seconds(timeout)
    if isinstance(comm, (_TorchComm, _MpiComm, _LocalComm)):
        return comm
    if type(comm).__module__ == "mpi4py.MPI":
        return _MpiComm(comm, seconds)
    import torch.distributed as dist
    if comm is None:
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("comm=None means torch.distributed's default process group, but "
                             "torch.distributed is not initialised: call "
                             "torch.distributed.init_process_group() first (torchrun sets its "
                             "environment), or pass an mpi4py communicator")
        return _TorchComm(dist.group.WORLD, seconds)
    if dist.is_available() and isinstance(comm, dist.ProcessGroup):
        return _TorchComm(comm, seconds)
    raise TypeError(f"comm must be a torch.distributed ProcessGroup, an mpi4py communicator or "
                    f"None (the default process group), not {type(comm)}")


class Block(NamedTuple):
    """Elements [offsets[d], offsets[d] + sizes[d]) of each dimension d of a tensor."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]


def part(shape: Sequence[int], rank: int, world: int, dim: int = 0) -> Block:
    """Part ``rank`` of ``world`` equal parts of dimension ``dim`` of ``shape``, as a Block.

    When the dimension does not divide, the first parts are one larger (as
    torch.tensor_split splits). Row sharding is ``dim=0``, column sharding
    ``dim=1``; a flat shard is a part of a 1-D shape.
    """
    shape = tuple(int(s) for s in shape)
    if not 0 <= dim < len(shape):
        raise ValueError(f"dim {dim} is not a dimension of shape {shape}")
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in [0, {world})")
    base, extra = divmod(shape[dim], world)
    offsets = [0] * len(shape)
    sizes = list(shape)
    offsets[dim] = rank * base + min(rank, extra)
    sizes[dim] = base + (1 if rank < extra else 0)
    return Block(tuple(offsets), tuple(sizes))


class Shard:
    """This rank's block of a tensor whose blocks are spread over the ranks.

    ``block`` is a torch tensor (CPU or CUDA) holding elements
    [offsets[d], offsets[d] + block.shape[d]) of a tensor of shape ``shape``.
    In the state given to :func:`save` a Shard stands where the whole tensor
    would: every rank puts its Shard at the same key path, which names the
    whole tensor, with the same shape and dtype; the blocks of all ranks
    together tile the shape (the save checks it).
    """

    __slots__ = ("block", "offsets", "shape")

    block: torch.Tensor
    offsets: tuple[int, ...]
    shape: tuple[int, ...]

    def __init__(self, block: torch.Tensor, offsets: Sequence[int], shape: Sequence[int]) -> None:
        import torch
        if not isinstance(block, torch.Tensor):
            raise TypeError(f"a Shard's block must be a torch.Tensor, not {type(block)}")
        self.block = block
        self.offsets = tuple(int(o) for o in offsets)
        self.shape = tuple(int(s) for s in shape)
        if len(self.offsets) != block.dim() or len(self.shape) != block.dim():
            raise ValueError(f"a Shard of a {block.dim()}-d block needs {block.dim()} offsets "
                             f"and a {block.dim()}-d shape, got offsets {self.offsets} and "
                             f"shape {self.shape}")

    @classmethod
    def split(cls, tensor: torch.Tensor, rank: int, world: int, dim: int = 0) -> Shard:
        """Part ``rank`` of ``world`` of a whole ``tensor`` along ``dim`` (a view, no copy)."""
        b = part(tensor.shape, rank, world, dim)
        return cls(tensor.narrow(dim, b.offsets[dim], b.sizes[dim]), b.offsets, tensor.shape)

    def __repr__(self) -> str:
        return (f"Shard({self.block.dtype} block {tuple(self.block.shape)} at {self.offsets} "
                f"of {self.shape})")


_NAMES_RANK = re.compile(r"\brank \d+: ")


def _agree(comm, fn):
    """Runs fn() on every rank of ``comm``; returns its result when it succeeded everywhere.

    Otherwise every rank raises the same exception: its own where every
    rank raised the same (errors of the library's collective calls), else
    the lowest failing rank's class and message, prefixed "rank <r>: "
    unless it names a rank already, chained from the rank's own exception
    where it had one. Collective: each rank learns the others' outcome
    before any goes on, so no rank is left waiting in a collective for one
    that failed. When a collective itself failed (a rank is gone) there is
    nobody to agree with: the failure is raised as it is.
    """
    try:
        result, err = fn(), None
    except BaseException as e:  # Ctrl-C too: the other ranks must not wait forever
        result, err = None, e
    if comm.error is not None:
        raise comm.error from (err if err is not comm.error else None)
    mine = None if err is None else [type(err).__module__, type(err).__qualname__, str(err)]
    outcomes = [json.loads(o) for o in comm.allgather(json.dumps(mine).encode())]
    failed = [(r, o) for r, o in enumerate(outcomes) if o is not None]
    if not failed:
        return result
    if all(o == mine for o in outcomes):
        raise err  # the same error everywhere (the library's collective calls agree on one)
    rank, (module, qualname, message) = failed[0]
    if not _NAMES_RANK.search(message):
        message = f"rank {rank}: {message}"
    raise _exception(module, qualname, message) from err


def _exception(module, qualname, message):
    """An exception of the class named, with ``message``; rckpt.Error where it cannot be made."""
    try:
        cls = importlib.import_module(module)
        for attr in qualname.split("."):
            cls = getattr(cls, attr)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls(message)
    except Exception:  # noqa: BLE001  (a class that cannot be rebuilt: fall through)
        pass
    return Error(f"{qualname}: {message}")


def save(comm: Comm, path: Union[str, os.PathLike[str]], state: dict[str, Any], *,
         rank_state: Any = None, common: Optional[dict[str, Any]] = None,
         rng: Optional[Mapping[str, RngRecord]] = None, codec: str = "none", level: int = 1,
         chunk_bytes: int = 4 << 20, threads: int = 0,
         metadata: Optional[Mapping[str, object]] = None, origin: Optional[Origin] = None,
         progress: Optional[Progress] = None, emulate_devices: int = 0,
         if_absent: bool = False,
         timeout: Union[float, datetime.timedelta] = DEFAULT_TIMEOUT) -> None:
    """Saves the state of every rank of ``comm`` into one file at ``path``, atomically.

    ``comm``: a torch.distributed ProcessGroup (``dist.group.WORLD``, a
    subgroup), None for torch.distributed's default group, or an mpi4py
    communicator. Collective: every rank calls it with the same path, which
    every rank must see (one node or a shared file system); each rank writes
    its own extent of the file. What each rank gives:

    - ``state``: a dict of sections, as rckpt.save takes. A :class:`Shard`
      is this rank's block of the tensor its key path names; a plain tensor
      is whole: a replicated one is written once, by the lowest rank that
      has a tensor at that key path. Rank 0's state, its tensors as
      references to the whole tensors, is the file's common state;
      non-tensor values of the other ranks' states are not saved.
    - ``common``: more sections of the common state (read on rank 0 only;
      a section in both is ValueError).
    - ``rank_state``: this rank's own tree (data-loader cursor), without
      tensors; saved as ``ranks[r]``.
    - ``rng``: this rank's RNG records (rckpt.capture_rng()), saved as
      ``rank<r>/<name>``.
    - ``metadata``: rank 0's is the file's (plus ``rckpt.world_size``).

    An ``s3://BUCKET/KEY`` path (a str) is ONE object written by one
    multipart upload that every rank uploads its parts of; rank 0 completes
    it once every rank's parts are in, and any rank's failure aborts it, the
    previous object staying (docs/DISTRIBUTED.md, "To object storage").
    Credentials and endpoint come from the AWS environment.

    ``codec``, ``level``, ``chunk_bytes``, ``threads``, ``origin`` and
    ``emulate_devices`` are rckpt.save's; ``progress`` sees this rank's
    bytes. The directory of ``path`` is created when it does not exist, as
    DCP's ``dcp.save`` creates its checkpoint directory (rckpt.save, like
    torch.save, refuses instead). ``if_absent=True`` never replaces a file:
    rckpt.AlreadyExistsError on every rank, nothing written, when one is at
    ``path`` at the commit (locally a rename that does not replace; in S3
    ``If-None-Match: *``), as rckpt.save's. The file at ``path`` is replaced
    only when every rank succeeded;
    otherwise every rank raises the same exception (TypeError naming the key
    path of a value that cannot be stored; InvalidArgumentError for blocks
    that overlap, leave a gap or disagree on shape, dtype or section;
    IoError ...), and a previous file at ``path`` is intact. A collective
    that waits longer than ``timeout`` (seconds or a timedelta) for the
    other ranks raises IoError naming this rank.
    """
    if not _in_object_storage(path):
        refuse_url(path, "rckpt.distributed.save")
    comm = _communicator(comm, timeout)
    rank = comm.rank

    def prepare():
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path)}")
        if not isinstance(state, dict):
            raise TypeError(f"the state to save must be a dict of sections, not {type(state)}")
        check_bool("rckpt.distributed.save", "if_absent", if_absent)
        full = state
        if common is not None and rank == 0:
            if not isinstance(common, dict):
                raise TypeError(f"common must be a dict of sections, not {type(common)}")
            both = [k for k in common if k in state]
            if both:
                raise ValueError(f"sections {both} are both in the state and in common")
            full = {**state, **common}
        options = save_options("rckpt.distributed.save", emulate_devices, codec=codec,
                               level=level, chunk_bytes=chunk_bytes, threads=threads,
                               replace=not if_absent)
        plan = _distributed.prepare_save(
            comm, os.fspath(path), full, Shard, rank_state, rng_records(rng), options,
            {str(k): str(v) for k, v in (metadata or {}).items()}, origin,
            progress_callback(progress, f"save (rank {rank})"), emulate_devices)
        if not _in_object_storage(path):
            _make_parent(os.fspath(path))  # once the state is known to be storable
        return plan

    plan = _agree(comm, prepare)
    try:
        _distributed.save(plan)
    except BaseException as e:
        # The library's save fails on every rank alike (a progress callback
        # that raises cancels it); the ranks agree on which exception to
        # raise: the callback's own, say, on one rank. A save that succeeded
        # everywhere needs no more collectives. (A load cannot skip this: a
        # map_location callable that raises on one rank lets the library's
        # load go on.)
        _agree(comm, lambda: _raise(e))


def _in_object_storage(path: Any) -> bool:
    """Whether ``path`` is an ``s3://`` URL: one object, written by one multipart upload."""
    return isinstance(path, str) and path.startswith("s3://")


def _make_parent(path: str) -> None:
    """Creates the directory of ``path`` (every rank; the first one wins), naming it on error."""
    directory = os.path.dirname(path)
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise type(e)(e.errno, f"cannot create the directory {directory!r} of {path!r}: "
                               f"{e.strerror}") from None


def _raise(e: BaseException) -> None:
    raise e


class RankLoad(Mapping[str, Any]):
    """What :func:`load` returns on each rank.

    ``back["optimizer"]`` is a section of the common state (rank 0's state
    at the save, plus ``common``), each tensor replaced by this rank's block
    of it, or None where this rank did not ask for that tensor. Besides:

    - ``blocks``: tensor name -> this rank's block (torch tensors, in the
      order asked), ``placement`` (name -> device the block went to) and
      ``origin`` (name -> device the tensor was saved from);
    - ``rank_states``: every saved rank's ``rank_state``, by saved rank;
      ``rank_state``: this rank's, when the job has the saved world size
      (else None);
    - ``rng``: this rank's RNG records (an RngState for rckpt.restore_rng)
      when the job has the saved world size, else empty; ``saved_rng``:
      saved rank -> RngState, always;
    - ``saved_world_size``, ``bytes_read`` (tensor bytes this rank read)
      and ``bytes_needed`` (raw bytes of its blocks).
    """

    common: dict[str, Any]
    blocks: dict[str, torch.Tensor]
    placement: dict[str, str]
    origin: dict[str, str]
    rank_states: list[Any]
    saved_world_size: int
    rank_state: Any
    rng: RngState
    saved_rng: dict[int, RngState]
    bytes_read: int
    bytes_needed: int

    def __init__(self, raw, rank, world_size):
        self.common = raw["common"] if raw["common"] is not None else {}
        self.blocks = raw["blocks"]
        self.placement = raw["placement"]
        self.origin = raw["origin"]
        self.rank_states = raw["rank_states"]
        self.saved_world_size = raw["saved_world_size"]
        same_world = self.saved_world_size == world_size and rank < len(self.rank_states)
        self.rank_state = self.rank_states[rank] if same_world else None
        self.rng = _rng_state(raw["rng"])
        self.saved_rng = {r: _rng_state(records) for r, records in raw["saved_rng"].items()}
        self.bytes_read = raw["bytes_read"]
        self.bytes_needed = raw["bytes_needed"]

    def __getitem__(self, key: str) -> Any:
        return self.common[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.common)

    def __len__(self) -> int:
        return len(self.common)

    def __repr__(self) -> str:
        return (f"<rckpt.distributed.RankLoad sections={list(self.common)} "
                f"blocks={list(self.blocks)} saved_world_size={self.saved_world_size}>")


def _rng_state(records):
    return RngState((name, RngRecord(kind, origin, data)) for name, kind, origin, data in records)


def load(comm: Comm, path: Union[str, os.PathLike[str]],
         wants: Mapping[str, Union[Block, tuple[Sequence[int], Sequence[int]], None]], *,
         map_location: Optional[MapLocation] = None, model_device: Optional[Device] = None,
         verify: bool = True, threads: int = 0, progress: Optional[Progress] = None,
         emulate_devices: int = 0,
         timeout: Union[float, datetime.timedelta] = DEFAULT_TIMEOUT) -> RankLoad:
    """Reads the blocks this rank wants from ``path``; returns a :class:`RankLoad`.

    Collective: every rank of ``comm`` (as :func:`save` takes it) calls it
    with the same path, a job of any size. An ``s3://`` URL is read by
    ranged GETs of the chunks this rank needs.
    ``wants`` maps tensor names (as rckpt.load names them in
    ``Checkpoint.tensors``: the key path, ``"model.fc1.weight"``) to the
    block this rank wants, ``(offsets, sizes)`` or a :class:`Block` (see
    :func:`part`), or None for the whole tensor. Only the chunks holding
    those elements are read. Blocks are placed by rckpt.load's rules
    (``map_location`` / ``model_device``, each rank its own device); RNG
    records stay on the host. Any file rckpt reads works (an unsharded
    tensor is one block).

    Every rank raises the same exception when any rank fails:
    NotFoundError (no such file or tensor), InvalidArgumentError (a block
    outside its tensor), CorruptionError, UnsupportedError, ...; IoError
    when a collective waited longer than ``timeout``.
    """
    if not _in_object_storage(path):
        refuse_url(path, "rckpt.distributed.load")
    comm = _communicator(comm, timeout)
    rank, world_size = comm.rank, comm.size

    def prepare():
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path)}")
        if not isinstance(wants, Mapping):
            raise TypeError(f"wants must be a dict name -> block or None, not {type(wants)}")
        items = []
        for name, want in wants.items():
            if want is None:
                items.append((str(name), None, None))
                continue
            if not (isinstance(want, (tuple, list)) and len(want) == 2 and
                    all(isinstance(v, (tuple, list)) for v in want)):
                raise TypeError(f"wants[{name!r}]: a block is (offsets, sizes) or None, "
                                f"not {want!r}")
            items.append((str(name), [int(o) for o in want[0]], [int(s) for s in want[1]]))
        return _distributed.prepare_load(
            comm, os.fspath(path), items, map_location_arg(map_location),
            device_str(model_device), verify, threads,
            progress_callback(progress, f"load (rank {rank})"), emulate_devices)

    plan = _agree(comm, prepare)
    return _agree(comm, lambda: RankLoad(_distributed.load(plan), rank, world_size))


__all__ = ["DEFAULT_TIMEOUT", "Block", "RankLoad", "Shard", "load", "part", "save"]
