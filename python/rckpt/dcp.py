"""torch.distributed.checkpoint (DCP) storage in one ``.rckpt`` file.

:class:`Writer` and :class:`Reader` are DCP's ``StorageWriter`` and
``StorageReader``: DCP's own planners decide what each rank saves and
reads (DTensor and sharded state dicts, resharding to another world size,
the ``torch.distributed.checkpoint.state_dict`` helpers), rckpt stores it::

    import torch.distributed.checkpoint as dcp
    import rckpt.dcp

    dcp.save(state_dict, storage_writer=rckpt.dcp.Writer("run/step100.rckpt"))
    future = dcp.async_save(state_dict, storage_writer=rckpt.dcp.Writer("run/step200.rckpt"))
    dcp.load(state_dict, storage_reader=rckpt.dcp.Reader("run/step200.rckpt"))

Instead of a directory of ``.distcp`` files and a pickled ``.metadata``,
every rank of the job writes its part of one self-contained file (as
:func:`rckpt.distributed.save` does): an ordinary rckpt file, which
``rckpt verify`` and ``rckpt inspect`` check and a single-process
:func:`rckpt.load` reads as whole tensors in the state dict's nesting.
Nothing in it is unpickled on load: DCP's metadata is rebuilt from the
file's manifest, and non-tensor values are stored as rckpt values.

The Reader reads any rckpt file, not only the Writer's: ``dcp.load`` of a
file that ``rckpt.save`` or ``rckpt convert`` wrote fills a state dict
whose keys are the file's key paths. docs/DCP.md.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import uuid
from collections.abc import Mapping
from typing import Any, Optional, Union

import torch

try:
    from torch.distributed.checkpoint import (LoadPlan, LoadPlanner, SavePlan, SavePlanner,
                                              StorageReader, StorageWriter)
    from torch.distributed.checkpoint.metadata import (BytesStorageMetadata,
                                                       ChunkStorageMetadata, Metadata,
                                                       MetadataIndex, TensorProperties,
                                                       TensorStorageMetadata)
    from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
    from torch.distributed.checkpoint.staging import BlockingAsyncStager
    from torch.distributed.checkpoint.storage import WriteResult
except ImportError as e:
    raise ImportError(f"rckpt.dcp needs torch.distributed.checkpoint (torch 2.x); this torch "
                      f"{torch.__version__} has none: {e}") from e
from torch.futures import Future

from . import _core
from . import distributed as _rd
from ._args import save_options, map_location_arg
from ._local_only import refuse_url
from .errors import InvalidArgumentError, UnsupportedError

try:
    from torch.distributed.checkpoint.metadata import StorageMeta
except ImportError:  # torch < 2.4
    StorageMeta = None  # type: ignore[assignment,misc]

def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _check_path(path: Union[str, os.PathLike[str], None], who: str) -> str:
    if path is None:
        raise ValueError(f"rckpt.dcp.{who} needs a path: give it one, or a checkpoint_id to "
                         f"dcp.{'save' if who == 'Writer' else 'load'}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"rckpt.dcp.{who}: path must be a str or os.PathLike, not {type(path)}")
    if not _rd._in_object_storage(path):
        refuse_url(path, f"rckpt.dcp.{who}")
    elif os.fspath(path).endswith("/"):
        raise InvalidArgumentError(
            f"rckpt.dcp.{who}: {os.fspath(path)!r} names a prefix, which DCP's own storages "
            f"fill with a file per rank; rckpt.dcp writes and reads one object: give "
            f"s3://BUCKET/KEY, such as {os.fspath(path)}step100.rckpt")
    return os.fspath(path)


def _names_an_rckpt_file(checkpoint_id: Any) -> bool:
    """Whether a checkpoint_id is this storage's: a path ending in .rckpt."""
    return isinstance(checkpoint_id, (str, os.PathLike)) and \
        os.fspath(checkpoint_id).endswith(".rckpt")


def _group_size(group) -> tuple[int, int]:
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


class Writer(StorageWriter, BlockingAsyncStager):
    """Writes a DCP save into one ``.rckpt`` file at ``path``.

    Every rank of the job (``process_group``: the group given to
    ``dcp.save``; None, DCP's default, is torch.distributed's default group,
    or one process where torch.distributed is not initialised) writes its
    own chunks into its extent of the file in parallel; the file at
    ``path`` is replaced atomically once every rank succeeded (a failed save
    leaves a previous file intact and every rank raises). Whole tensors
    and non-tensor values are written by the coordinator (DCP treats them
    as replicated); the chunks of DTensors and sharded tensors by the ranks
    that hold them. ``codec`` ("none" or "zstd"), ``level``, ``chunk_bytes``
    and ``threads`` are rckpt.save's (checked here, before DCP plans); the
    directory of ``path`` is created when it does not exist, as
    FileSystemWriter creates its checkpoint directory; ``timeout`` bounds each collective as
    rckpt.distributed.save's does; ``metadata`` is stored with the file.
    Works with ``dcp.save`` and ``dcp.async_save`` (its default, thread
    executor). For ``dcp.async_save`` the Writer stages the state dict into
    host memory (pinned where CUDA is) and, as :func:`rckpt.save_async`
    keeps its snapshot buffers, the process keeps that copy for the next
    async save through any Writer (``cache_staged_state_dict``, the
    default): a later save of a state of the same structure, shapes and
    dtypes only copies into memory already touched. A save staged while
    the previous one is still writing gets a fresh copy of its own, never
    the one being written. ``cache_staged_state_dict=False`` stages into
    fresh memory every time and frees it after the save, as DCP's
    FileSystemWriter does by default; :func:`free_staging` frees the
    kept copy.
    """

    state_dict_cache: Any  # BlockingAsyncStager's attribute; the copy is _STAGING's

    def __init__(self, path: Union[str, os.PathLike[str], None] = None, *,
                 process_group: Any = None, codec: str = "none", level: int = 1,
                 chunk_bytes: int = 4 << 20, threads: int = 0,
                 timeout: float = _rd.DEFAULT_TIMEOUT,
                 metadata: Optional[Mapping[str, object]] = None,
                 cache_staged_state_dict: bool = True) -> None:
        StorageWriter.__init__(self)
        BlockingAsyncStager.__init__(self, cache_staged_state_dict=cache_staged_state_dict)
        save_options("rckpt.dcp.Writer", codec=codec, level=level, chunk_bytes=chunk_bytes,
                     threads=threads)
        self.path = None if path is None else _check_path(path, "Writer")
        self.process_group = process_group
        self.options = {"codec": codec, "level": level, "chunk_bytes": chunk_bytes,
                        "threads": threads, "timeout": timeout}
        self.metadata = dict(metadata or {})
        self.is_coordinator = False
        self.save_id = ""

    def reset(self, checkpoint_id: Union[str, os.PathLike[str], None] = None) -> None:
        if checkpoint_id is not None:
            self.path = _check_path(checkpoint_id, "Writer")
        self.save_id = uuid.uuid4().hex

    def stage(self, state_dict: Any) -> Any:
        if not self.cache_staged_state_dict:
            return BlockingAsyncStager.stage(self, state_dict)
        return _STAGING.stage(state_dict)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike[str]]) -> bool:
        return _names_an_rckpt_file(checkpoint_id)

    def storage_meta(self) -> Any:
        if StorageMeta is None:
            return None
        return StorageMeta(checkpoint_id=self.path, save_id=self.save_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        if kwargs.get("use_collectives") is False and _group_size(self.process_group)[1] > 1:
            raise UnsupportedError("rckpt.dcp.Writer: every rank writes its part of one file "
                                   "together with the others; use_collectives=False is not "
                                   "supported (each rank would need a file of its own)")

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        # The coordinator writes every whole tensor and value (DCP's planners
        # spread the writes of replicated items over the ranks; every rank
        # holds them): so its part of the file's tree names them all, and a
        # single-process load sees the whole state dict. Chunks stay where
        # they are.
        import dataclasses
        kept: list[list[Any]] = [[] for _ in plans]
        whole: dict[Any, Any] = {}
        for r, plan in enumerate(plans):
            for item in plan.items:
                if _is_whole(item):
                    whole.setdefault(_key(item.index), item)
                else:
                    kept[r].append(item)
        kept[0] += whole.values()
        return [dataclasses.replace(p, items=items) for p, items in zip(plans, kept)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future:
        resolved: list[torch.Tensor] = []
        try:
            return self._write(plan, planner, resolved)
        finally:
            # Written or failed: when this save's tensors are the kept
            # staging copy, the copy may take the next save.
            _STAGING.release_if_staged(resolved)

    def _write(self, plan: SavePlan, planner: SavePlanner,
               resolved: list[torch.Tensor]) -> Future:
        path = _check_path(self.path, "Writer")
        rank, world = _group_size(self.process_group)
        mappings = _mappings(planner, plan)
        state: dict[Any, Any] = _Dict()
        results = []
        seen_chunks = set()
        for item in plan.items:
            fqn = item.index.fqn
            where = list(mappings.get(fqn, (fqn,)))
            if item.type == WriteItemType.BYTE_IO:
                value = _lookup(planner, item)
                nbytes = 0
            else:
                data = planner.resolve_data(item)
                if isinstance(data, torch.Tensor):
                    resolved.append(data)
                if not isinstance(data, torch.Tensor):
                    raise TypeError(f"rckpt.dcp.Writer: the planner resolved tensor item "
                                    f"{fqn!r} to a {type(data)}")
                td = item.tensor_data
                data = data.detach()
                if tuple(data.shape) != tuple(td.chunk.sizes):
                    raise InvalidArgumentError(
                        f"rckpt.dcp.Writer: {fqn!r}: the planner resolved a chunk of shape "
                        f"{tuple(data.shape)}, its plan says {tuple(td.chunk.sizes)}")
                if fqn in seen_chunks:
                    raise UnsupportedError(
                        f"rckpt.dcp.Writer: rank {rank} holds several chunks of {fqn!r}; rckpt "
                        f"stores one block of a tensor per rank")
                seen_chunks.add(fqn)
                if _is_whole(item):
                    value = data
                else:
                    value = _rd.Shard(data, tuple(td.chunk.offsets), tuple(td.size))
                nbytes = data.numel() * data.element_size()
            _put(state, where, value, fqn)
            results.append(WriteResult(index=item.index, size_in_bytes=nbytes,
                                       storage_data=None))
        comm: Any = self.process_group if world > 1 else _LOCAL
        # The tree is the state dict, nested by DCP's key paths: the Reader
        # gets every item's fqn and path back by walking it.
        _rd.save(comm, path, _finished(state), metadata=self.metadata,
                 **self.options)  # type: ignore[arg-type]
        return _done(results)

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        # Every rank's part is in the file, which the collective save has
        # already renamed into place: nothing is left to write.
        pass


_LOCAL: Any = _rd.LOCAL


def _signature(obj: Any) -> Any:
    """What a staging copy must match to take ``obj``: structure, and each tensor's kind, shape and dtype."""
    from torch.distributed.tensor import DTensor
    if isinstance(obj, Mapping):
        return ("map", tuple((k, _signature(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return ("seq", type(obj), tuple(_signature(v) for v in obj))
    if isinstance(obj, DTensor):
        if obj.dim() == 0:  # DCP stages a 0-d DTensor as itself: never reused
            return ("other", object())
        local = obj.to_local()
        return ("dtensor", tuple(obj.shape), tuple(local.shape), local.dtype, obj.placements,
                obj.device_mesh)
    if type(obj) in (torch.Tensor, torch.nn.Parameter):
        return ("tensor", tuple(obj.shape), obj.dtype)
    if isinstance(obj, torch.Tensor):  # ShardedTensor and other kinds: never reused
        return ("other", object())
    return ("value",)  # not copied: the staged state holds the caller's value


def _tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors of a staged state dict, depth first."""
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return [obj] if isinstance(obj, torch.Tensor) else []


def _storage(t: torch.Tensor) -> int:
    from torch.distributed.tensor import DTensor
    if isinstance(t, DTensor):
        t = t._local_tensor
    # The start of the tensor's storage: a view of it (what a planner
    # resolves) gives the same.
    return t.data_ptr() - t.storage_offset() * t.element_size()


class _Staging:
    """The host copy of the last state staged for an async save, kept for the next.

    One per process (as rckpt.save_async keeps one set of snapshot
    buffers). A save holds it from its staging until its write_data is
    done; a save staged meanwhile gets fresh memory of its own, so a copy is
    never overwritten while a save still reads it. The hold goes with the
    write_data of the save whose tensors are the copy's (whichever Writer
    runs it), or, for a save that never got there (it failed while
    planning), once nothing but this object refers to the copy's tensors.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.busy = False
        self.signature: Any = None
        self.copy: Any = None
        self.tensors: list[torch.Tensor] = []  # the copy's, each referred to by it and here
        self.storages: set[int] = set()
        self.idle_refs: list[int] = []  # sys.getrefcount of each while no save holds it

    def _refs(self) -> list[int]:
        return [sys.getrefcount(t) for t in self.tensors]

    def _still_held(self) -> bool:
        """Whether anything but this object refers to one of the copy's tensors."""
        return any(now > idle for now, idle in zip(self._refs(), self.idle_refs))

    def stage(self, state_dict: Any) -> Any:
        from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
        # type_check=False: values that rckpt stores but DCP's check does not
        # know (torch.dtype, numpy scalars) are passed on, as DCP's own
        # uncached staging does.
        signature = _signature(state_dict)
        with self.lock:
            if self.busy and not self._still_held():
                self.busy = False  # its save ended without a write_data
            mine = not self.busy
            if mine:
                self.busy = True
                if self.signature != signature:
                    self._drop()  # freed before the new one is made
                cached = self.copy
        if not mine:  # the kept copy is being written: a fresh one, freed after its save
            return _copy_state_dict(state_dict, _create_cpu_state_dict(state_dict),
                                    type_check=False)
        try:
            if cached is None:
                # Pinned where CUDA is, as DCP's own cached staging.
                cached = _create_cpu_state_dict(state_dict, pin_memory=torch.cuda.is_available())
                tensors = _tensors(cached)
                storages = {_storage(t) for t in tensors} - {0}
                if not storages:  # nothing to keep (no tensor bytes): not kept
                    with self.lock:
                        self.busy = False
                    return _copy_state_dict(state_dict, cached, type_check=False)
                with self.lock:
                    self.copy, self.signature = cached, signature
                    self.tensors, self.storages = tensors, storages
                    self.idle_refs = self._refs()
            return _copy_state_dict(state_dict, cached, type_check=False)
        except BaseException:
            with self.lock:
                self.busy = False
            raise

    def release_if_staged(self, resolved: list[torch.Tensor]) -> None:
        with self.lock:
            if self.busy and any(_storage(t) in self.storages for t in resolved):
                self.busy = False

    def _drop(self) -> None:
        self.copy = self.signature = None
        self.tensors, self.storages, self.idle_refs = [], set(), []

    def free(self) -> None:
        with self.lock:
            if not self.busy or not self._still_held():
                self.busy = False
                self._drop()


_STAGING = _Staging()


def free_staging() -> None:
    """Frees the staging copy that async saves through :class:`Writer` keep for the next one.

    A save still writing from it keeps it until it is done.
    """
    _STAGING.free()


def _key(index: MetadataIndex):
    return (index.fqn, tuple(index.offset) if index.offset is not None else None)


def _is_whole(item) -> bool:
    if item.type == WriteItemType.BYTE_IO:
        return True
    td = item.tensor_data
    return all(o == 0 for o in td.chunk.offsets) and tuple(td.chunk.sizes) == tuple(td.size)


def _mappings(planner, plan) -> dict[str, tuple[Any, ...]]:
    mappings = getattr(planner, "mappings", None)
    if not mappings and isinstance(plan.planner_data, Mapping):
        mappings = plan.planner_data
    return dict(mappings or {})


def _lookup(planner, item):
    """The value of a BYTE_IO item as the state dict holds it (not pickled)."""
    lookup = getattr(planner, "lookup_object", None)
    if lookup is None:
        raise UnsupportedError(
            f"rckpt.dcp.Writer stores values, not pickles: the planner {type(planner).__name__} "
            f"has no lookup_object (DefaultSavePlanner and its subclasses do) to give the value "
            f"of {item.index.fqn!r}")
    return lookup(item.index)


class _Dict(dict):
    """A dict _put made for a key path (a value the state holds is never one)."""


class _List(list):
    """A list _put made for a key path; _HOLE where no item has been put yet."""


_HOLE = object()


def _put(state, where, value, fqn):
    """Puts ``value`` at key path ``where`` of ``state``, by DCP's own rule for
    unflattening (torch.distributed.checkpoint._traverse.set_element): below
    the top, a container whose next key is an int is a list, one whose next
    key is a str a dict (DCP's flattening makes every dict key a str, the
    int keys of an optimizer's state included: they stay dict keys)."""
    node = state
    for depth, key in enumerate(where):
        if isinstance(node, _List):
            if key < 0:
                raise InvalidArgumentError(f"rckpt.dcp.Writer: {fqn!r}: key path {where} has "
                                           f"list index {key}; expected one >= 0")
            node.extend([_HOLE] * (key + 1 - len(node)))
            here = node[key]
        else:
            here = node.get(key, _HOLE)
        if depth == len(where) - 1:
            if here is not _HOLE:
                raise InvalidArgumentError(f"rckpt.dcp.Writer: {fqn!r}: key path {where} "
                                           f"holds another item already")
            node[key] = value
            return
        kind = _List if type(where[depth + 1]) is int else _Dict
        if here is _HOLE:
            here = node[key] = kind()
        elif type(here) is not kind:
            made = {_List: "list", _Dict: "dict"}
            raise InvalidArgumentError(
                f"rckpt.dcp.Writer: {fqn!r}: key path {where} uses {where[:depth + 1]} as a "
                f"{made[kind]}, where another item " +
                (f"uses it as a {made[type(here)]}" if type(here) in made
                 else f"stores a {type(here).__name__}"))
        node = here


def _finished(node):
    """The tree _put built as plain dicts and lists: an index of a list that
    no item filled (DCP stores no empty container) is None, as DCP's own
    unflattening and rckpt convert of a DCP directory leave it."""
    if isinstance(node, _Dict):
        return {k: _finished(v) for k, v in node.items()}
    if isinstance(node, _List):
        return [None if v is _HOLE else _finished(v) for v in node]
    return node


class Reader(StorageReader):
    """Reads a DCP load from one rckpt file at ``path``.

    Each rank reads only the chunks holding the elements its state dict
    asks for (DCP's planner reshards: another world size, another
    sharding), straight into the state dict's tensors. DCP's metadata is
    rebuilt from the file's manifest; nothing is unpickled. ``verify``
    checks every chunk it reads against its checksum; ``threads`` as for
    rckpt.load.
    """

    def __init__(self, path: Union[str, os.PathLike[str], None] = None, *,
                 verify: bool = True, threads: int = 0) -> None:
        super().__init__()
        self.path = None if path is None else _check_path(path, "Reader")
        self.verify = verify
        self.threads = threads
        self._values: dict[str, Any] = {}
        self._dtypes: dict[str, torch.dtype] = {}

    def reset(self, checkpoint_id: Union[str, os.PathLike[str], None] = None) -> None:
        if checkpoint_id is not None:
            self.path = _check_path(checkpoint_id, "Reader")
        self._values = {}

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike[str]]) -> bool:
        return _names_an_rckpt_file(checkpoint_id)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        info = _core.describe(_check_path(self.path, "Reader"), _TensorRef)
        tree = info["tree"]
        if "rckpt.world_size" in info["metadata"] and isinstance(tree, dict) and "common" in tree:
            tree = tree["common"]  # a collective file: the state is its common tree
        paths = _paths_of(tree)
        tensor_names = {t["name"] for t in info["tensors"]}
        state_dict_metadata: dict[str, Any] = {}
        for t in info["tensors"]:
            if t["dtype"] is None:
                raise UnsupportedError(f"{self.path}: tensor {t['name']!r} has dtype "
                                       f"{t['dtype_name']}, which this torch lacks")
            blocks = t["blocks"] or [((0,) * len(t["shape"]), tuple(t["shape"]))]
            state_dict_metadata[t["name"]] = TensorStorageMetadata(
                properties=TensorProperties(dtype=t["dtype"]), size=torch.Size(t["shape"]),
                chunks=[ChunkStorageMetadata(offsets=torch.Size(o), sizes=torch.Size(s))
                        for o, s in blocks])
            paths.setdefault(t["name"], (t["name"],))
        values = {}
        for fqn, where in paths.items():
            if fqn in tensor_names:
                continue
            found, value = _get(tree, where)
            if found:
                values[fqn] = value
                state_dict_metadata[fqn] = BytesStorageMetadata()
        self._values = values
        return Metadata(state_dict_metadata=state_dict_metadata,
                        planner_data={fqn: tuple(p) for fqn, p in paths.items()})

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any,
                              **kwargs: Any) -> None:
        # What the file stores each tensor as (the metadata may be another
        # process's: DCP reads it on the coordinator and hands it round).
        self._dtypes = {fqn: m.properties.dtype
                        for fqn, m in metadata.state_dict_metadata.items()
                        if isinstance(m, TensorStorageMetadata)}
        if not self._values and any(isinstance(m, BytesStorageMetadata)
                                    for m in metadata.state_dict_metadata.values()):
            self.read_metadata()  # a Reader given another process's metadata

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        path = _check_path(self.path, "Reader")
        # One read of every block this rank's plan asks for, each straight
        # into the planner's tensor where that is host memory of the stored
        # dtype, contiguous; else into a host tensor copied over afterwards
        # (another device or dtype, a strided view), as DCP's own reader does.
        wants = []
        reads = []  # (item, the planner's tensor, the host tensor read into or None)
        for item in plan.items:
            fqn = item.storage_index.fqn
            if item.type == LoadItemType.BYTE_IO:
                if fqn not in self._values:
                    raise InvalidArgumentError(f"{path}: no value {fqn!r} in the file")
                buf = io.BytesIO()
                torch.save(self._values[fqn], buf)  # values rckpt decoded; re-pickled here
                buf.seek(0)
                planner.load_bytes(item, buf)
                continue
            base = item.storage_index.offset or torch.Size([0] * len(item.lengths))
            offsets = [int(b) + int(o) for b, o in zip(base, item.storage_offsets)]
            sizes = [int(n) for n in item.lengths]
            target = planner.resolve_tensor(item).detach()
            if tuple(target.shape) != tuple(sizes):
                raise InvalidArgumentError(
                    f"{path}: {fqn!r}: the planner's target has shape {tuple(target.shape)}, "
                    f"the block it asks for {tuple(sizes)}")
            stored = self._dtypes.get(fqn, target.dtype)
            direct = target.device.type == "cpu" and target.dtype == stored and \
                target.is_contiguous()
            temp = None if direct else torch.empty(sizes, dtype=stored)
            wants.append((fqn, offsets, sizes, target if direct else temp))
            reads.append((item, target, temp))
        _rd._distributed.load(_rd._distributed.prepare_load(
            _LOCAL, path, wants, map_location_arg("cpu"), None, self.verify, self.threads,
            None, 0))
        for item, target, temp in reads:
            if temp is not None:
                target.copy_(temp)
            planner.commit_tensor(item, target)
        return _done(None)


class _TensorRef:
    """Where the file's tree refers to a tensor (describe() puts one there)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def _paths_of(tree) -> dict[str, tuple[Any, ...]]:
    """fqn -> key path of every item of a file's tree, by DCP's own rule for
    flattening a state dict: a dict is walked; a list is walked when it holds
    a tensor, a dict, or a list that is walked; anything else (a tuple, a
    list of plain values) is one value. The fqn joins the path's keys with
    "." as rckpt names a tensor at that path."""
    out: dict[str, tuple[Any, ...]] = {}

    def walked(node):
        if isinstance(node, dict):
            return True
        if isinstance(node, list):
            return any(isinstance(e, (_TensorRef, dict)) or walked(e) for e in node)
        return False

    def walk(node, where):
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, where + (k,))
        elif isinstance(node, list) and walked(node):
            for i, v in enumerate(node):
                walk(v, where + (i,))
        elif where and not (isinstance(node, dict) and not node):
            out[".".join(str(k) for k in where)] = where
    walk(tree, ())
    return out


def _get(tree, where):
    node = tree
    for k in where:
        if isinstance(node, dict) and k in node:
            node = node[k]
        elif isinstance(node, dict) and str(k) in node:
            node = node[str(k)]
        elif isinstance(node, (list, tuple)) and isinstance(k, int) and 0 <= k < len(node):
            node = node[k]
        else:
            return False, None
    return True, node


__all__ = ["Reader", "Writer"]
