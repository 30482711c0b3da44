"""save, load and load_into: the Python face of rckpt's C++ library."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from . import _core, _files, _state_types, s3 as _s3
from ._args import (check_bool, check_emulate_devices, save_options, check_threads,
                    device_str, map_location_arg, metadata_arg, names_arg, progress_callback,
                    rng_records)
from .rng import RngRecord, RngState

if TYPE_CHECKING:
    import torch

    from ._typing import Device, LoadSource, MapLocation, Origin, Progress, SaveTarget
    from .s3 import S3Options

# Metadata naming the one section that holds what save was given when that
# was not a dict of sections (a state_dict, a tensor, a list ...).
ROOT_KEY = "rckpt.python.root"

# A collective save's RNG record names (rckpt/distributed.h): "rank<r>/<name>".
_RANK_RNG = re.compile(r"rank(\d+)/(.+)", re.S)


class Checkpoint(MutableMapping[str, Any]):
    """What ``load`` returns for a dict of sections: the saved state, by section, plus what
    the file records.

    ``ck["model"]`` is the model section's state as it was saved (dicts,
    lists, tensors, ...). A Checkpoint is a mapping as a dict is
    (``in``, ``get``, ``keys``/``items``/``values``, ``ck["extra"] = ...``,
    ``del ck["x"]``); ``to_dict()`` gives the sections as a plain dict, and
    ``rckpt.save`` takes a Checkpoint as it takes a dict. Besides the
    mapping, describing what was loaded:

    - ``rng``: the RNG records (an RngState for restore_rng), always on the host;
    - ``placement``: tensor name -> device it was restored to ("cpu",
      "cuda:1"). A tensor placed on an emulated device (``emulate_devices``)
      comes back as a CPU torch tensor; its placement still says "cuda:N";
    - ``origin``: tensor name -> device recorded when it was saved;
    - ``tensors``: tensor name -> tensor (file order), ``sections`` (name ->
      role), ``metadata`` (str -> str) and ``stats`` (bytes read and
      restored, seconds, the pinned staging ring's high-water and capacity,
      the byte-shuffled bytes bound for a device that the device and the host
      un-shuffled, and ``host_unshuffle_reason``: why the host did, "" when
      it did not);
    - for a file that rckpt.distributed.save wrote: ``saved_world_size``,
      ``rank_states`` (every saved rank's ``rank_state``), ``saved_rng``
      (saved rank -> RngState) and ``rank_state`` (the saved rank 0's when
      one rank saved it, else None); ``rng`` is the saved rank 0's records
      when one rank saved it, else empty, as rckpt.distributed.load gives a
      job of one rank. For other files ``saved_world_size`` is None.
    """

    state: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    placement: dict[str, str]
    origin: dict[str, str]
    sections: dict[str, str]
    metadata: dict[str, str]
    stats: dict[str, Any]
    saved_world_size: Optional[int]
    rank_states: list[Any]
    rng: RngState
    saved_rng: dict[int, RngState]
    rank_state: Any

    def __init__(self, raw, file_tree=False):
        self.state = raw["state"]
        self.tensors = raw["tensors"]
        self.placement = raw["placement"]
        self.origin = raw["origin"]
        self.sections = raw["sections"]
        self.metadata = raw["metadata"]
        self.stats = raw["stats"]
        self.saved_world_size = raw.get("world_size")
        self.rank_states = raw.get("rank_states") or []
        records = [(name, RngRecord(kind, origin, data)) for name, kind, origin, data in raw["rng"]]
        self.saved_rng = {}
        if self.saved_world_size is None or file_tree:
            self.rng = RngState(records)
        else:
            by_rank = {}
            for name, record in records:
                m = _RANK_RNG.fullmatch(name)
                if m:
                    by_rank.setdefault(int(m.group(1)), []).append((m.group(2), record))
            self.saved_rng = {r: RngState(rs) for r, rs in sorted(by_rank.items())}
            self.rng = self.saved_rng.get(0, RngState()) if self.saved_world_size == 1 \
                else RngState()
        one_rank = self.saved_world_size == 1 and self.rank_states
        self.rank_state = self.rank_states[0] if one_rank else None

    def __getitem__(self, key: str) -> Any:
        return self.state[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.state[key] = value

    def __delitem__(self, key: str) -> None:
        del self.state[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.state)

    def __len__(self) -> int:
        return len(self.state)

    def to_dict(self) -> dict[str, Any]:
        """The sections as a plain dict (the same section objects, not copies)."""
        return dict(self.state)

    def __repr__(self) -> str:
        nbytes = sum(t.numel() * t.element_size() for t in self.tensors.values())
        world = "" if self.saved_world_size is None else \
            f" saved_world_size={self.saved_world_size}"
        return (f"<rckpt.Checkpoint sections={list(self.state)} tensors={len(self.tensors)} "
                f"({_core.human_bytes(nbytes)}) rng={list(self.rng)}{world}>")


def _sections_to_save(state: Any, rng: Any, metadata: Optional[Mapping[str, object]]
                      ) -> tuple[dict[str, Any], dict[str, object]]:
    """(dict of sections, metadata) for what save was given.

    A dict (or Mapping) with str keys is a dict of sections. A mapping of
    names to tensors (model.state_dict()) without ``rng`` is one section,
    "model"; anything else one section, "object"; ROOT_KEY names that
    section so that load gives the object back as it was.
    """
    import torch
    meta: dict[str, object] = metadata_arg("rckpt.save", metadata)
    if ROOT_KEY in meta:
        raise ValueError(f"metadata key {ROOT_KEY!r} is rckpt's own (it names the section of "
                         "a state that is not a dict of sections)")
    if isinstance(state, torch.nn.Module):
        raise TypeError(
            f"rckpt.save stores state, not modules (a {type(state).__module__}."
            f"{type(state).__qualname__} is code): write rckpt.save(path, model.state_dict()) "
            "and model.load_state_dict(rckpt.load(path))")
    if isinstance(state, Mapping) and all(isinstance(k, str) for k in state):
        flat = len(state) > 0 and all(isinstance(v, torch.Tensor) for v in state.values())
        if not flat or rng:
            return (state if isinstance(state, dict) else dict(state)), meta
        root = "model"
    else:
        if rng:
            raise TypeError(
                f"rng= needs a dict of sections to go with, not {type(state)}: save "
                "{'state': obj} with rng=..., or the object without rng")
        root = "object"
    meta[ROOT_KEY] = root
    return {root: state}, meta


def save(f: SaveTarget, state: Any, *, rng: Optional[Mapping[str, RngRecord]] = None,
         codec: str = "none", level: int = 1, chunk_bytes: int = 4 << 20, threads: int = 0,
         metadata: Optional[Mapping[str, object]] = None, origin: Optional[Origin] = None,
         progress: Optional[Progress] = None, emulate_devices: int = 0,
         drop_functions: bool = False, if_absent: bool = False,
         s3: Optional[S3Options] = None) -> None:
    """Saves ``state`` to ``f`` (a path, an ``s3://BUCKET/KEY`` URL or a file
    object) atomically.

    ``state`` is a dict of sections ({"model": model.state_dict(),
    "optimizer": ...}, or a Checkpoint), or anything torch.save is given
    (``model.state_dict()``, a tensor, a list ...): that is stored as one
    section and ``load`` gives it back as it was. An ``nn.Module`` is
    refused (TypeError saying to save its state_dict()).

    The file at a path is replaced only when the new one is complete; on
    any error, or a cancel (Ctrl-C, a progress callback returning False),
    the previous file stays intact. A file object (anything with
    ``write``) gets the checkpoint once it is complete, through a
    temporary file (docs/PYTHON.md, "Paths and file objects"). The GIL is
    released while the file is written. Tensors may be on the CPU or on
    CUDA devices; their device is recorded as their origin. ``origin``
    overrides that record for CPU tensors: a device string applies to every
    model-role tensor (a model trained on cuda:1 and moved to the CPU before
    saving), a dict section -> device to every tensor of those sections.

    Like torch.save, a path in a directory that does not exist is refused
    (NotFoundError naming the directory); nothing is created.

    An ``s3://`` URL is written as a multipart upload that becomes the object
    only when it completes (a failed save aborts it; the previous object
    stays whole). ``s3`` (an :class:`rckpt.s3.S3Options`) gives the endpoint,
    region and credentials for this call; without it they come from the
    environment and the AWS files (docs/OBJECT_STORAGE.md).

    A function (a lambda, ``torch.sigmoid``, a bound method) can never be
    restored from a file, which holds state, not code: one in ``state`` is
    refused (TypeError naming its key path) unless ``drop_functions=True``,
    which leaves it out of the file (a dict leaves the entry out; a list,
    tuple or set holds None in its place) with a
    :class:`rckpt.DroppedValueWarning` naming the key paths. Functions in an
    LR scheduler's ``state_dict()`` are the scheduler's own and are kept
    (docs/PYTHON.md, "Type mapping").

    ``if_absent=True`` never replaces a file at the path: the save fails with
    rckpt.AlreadyExistsError, writing nothing, when one is there when the new
    one would appear (locally a rename that does not replace; in object
    storage ``If-None-Match: *``, docs/OBJECT_STORAGE.md).

    Raises TypeError naming the key path of a value that cannot be stored
    (before anything is written) and rckpt.Error subclasses for the rest.
    """
    check_bool("rckpt.save", "if_absent", if_absent)
    options = save_options("rckpt.save", emulate_devices, codec=codec, level=level,
                           chunk_bytes=chunk_bytes, threads=threads, replace=not if_absent)
    records = rng_records(rng, "rckpt.save")
    if isinstance(state, Checkpoint):
        state = state.state
    sections, metadata = _sections_to_save(state, rng, metadata)
    progress = progress_callback(progress, "save")
    fs = _s3.file_system([f], s3, "rckpt.save")
    with _state_types.dropping_functions(drop_functions, "rckpt.save"), \
            _files.writable(f) as path:
        _core.save(path, sections, records, options, metadata, origin, progress,
                   emulate_devices, fs=fs)


def load(f: LoadSource, *, map_location: Optional[MapLocation] = None,
         model_device: Optional[Device] = None, sections: Optional[Sequence[str]] = None,
         skip_sections: Optional[Sequence[str]] = None, verify: bool = True,
         map_file: bool = True, threads: int = 0, progress: Optional[Progress] = None,
         emulate_devices: int = 0, file_tree: bool = False, strict: bool = False,
         device_unshuffle: bool = True, s3: Optional[S3Options] = None) -> Any:
    """Loads a checkpoint from ``f`` (a path, an ``s3://BUCKET/KEY`` URL or a
    file object).

    Returns a :class:`Checkpoint` for a dict of sections, and what save
    was given otherwise (a state_dict, a tensor ...), as torch.load does.

    ``f`` may also be a file of another format ``rckpt convert`` reads: a
    torch.save archive (.pt, read by the restricted unpickler, never
    executed), a .safetensors file or a DCP checkpoint directory. It is
    imported into a private .rckpt copy under TMPDIR (removed once loaded)
    and loaded from there with the same options, so that every placement
    and RNG rule below holds for it; the result is what loading the output
    of ``rckpt.convert`` gives. Classes outside the known set are kept as
    inert objects with an :class:`rckpt.InertObjectWarning` naming them;
    ``strict=True`` refuses such a file (UnsupportedError), as
    ``rckpt convert --strict`` does.

    Placement follows rckpt's rules (docs/PYTHON.md): nothing given puts
    every tensor back on its origin device; ``map_location`` (a device, a
    dict origin -> target, a callable(info) -> device or None, or torch's
    callable(storage, location)) maps model- and data-role tensors;
    ``model_device`` ("auto" or a device) moves the model side there and
    everything else to the host. Both together raise InvalidArgumentError
    before the file is opened. RNG records and host-role tensors always load
    to the host. ``sections`` / ``skip_sections`` choose what is read at
    all. ``emulate_devices=N`` loads onto N host-emulated CUDA devices (for
    trying placements without GPUs).

    On CUDA: ``model_device="auto"`` is ``torch.cuda.current_device()``
    (under torchrun, after ``torch.cuda.set_device(local_rank)``, each rank's
    own GPU), cpu only when there is no GPU; torch and rckpt disagreeing
    about the GPUs is a DeviceUnavailableError. The CUDA tensors returned
    are torch's own (its caching allocator, on its current stream: freeing
    them never synchronises the device); the load's copies start after
    torch's pending work on that stream and are complete when it returns.
    torch's current device is the same afterwards. Byte-shuffled zstd chunks
    are un-shuffled on the GPU, or on the host where the shipped kernel does
    not load (``rckpt.doctor()`` says which); ``device_unshuffle=False``
    un-shuffles on the host anyway (to compare the two).

    A file of rckpt.distributed.save loads as the sections its ranks saved,
    with whole tensors (a job of one rank); ``file_tree=True`` gives the
    file's tree as written instead ({"common": ..., "ranks": [...]}, RNG
    records by their names in the file), and the Checkpoint of a
    non-section save.

    Host tensors are handed over without a copy: each torch tensor owns the
    buffer the engine decoded into or, with ``map_file=True`` (the default),
    raw tensors point into a private copy-on-write mapping of the file.
    Writing to them copies the touched pages; the file never changes. Do not
    truncate or rewrite the file in place (``cp``, ``torch.save`` over the
    same path) while such tensors live; rckpt's own saves replace files by
    rename and are safe. ``map_file=False`` gives a copying load that owns
    all its memory.

    An ``s3://`` URL is read by parallel ranged GETs straight into the
    tensors (``map_file`` does not apply), each carrying the first answer's
    ETag, so an object replaced during the load is an error, never a mix;
    every chunk's checksum is checked. ``s3`` (an
    :class:`rckpt.s3.S3Options`) gives the endpoint, region and credentials
    for this call (docs/OBJECT_STORAGE.md).
    """
    placement = map_location_arg(map_location)
    device = device_str(model_device, "rckpt.load")
    sections = names_arg("rckpt.load", "sections", sections)
    skip_sections = names_arg("rckpt.load", "skip_sections", skip_sections)
    for name, flag in (("verify", verify), ("map_file", map_file), ("file_tree", file_tree),
                       ("strict", strict), ("device_unshuffle", device_unshuffle)):
        check_bool("rckpt.load", name, flag)
    check_threads("rckpt.load", threads)
    check_emulate_devices("rckpt.load", emulate_devices)
    progress = progress_callback(progress, "load")
    fs = _s3.file_system([f], s3, "rckpt.load")
    with _files.readable(f) as path:
        raw = _core.load(path, placement, device, sections, skip_sections, verify, map_file,
                         threads, progress, emulate_devices, file_tree, device_unshuffle,
                         strict, fs)
    imported = raw["import"]
    if imported["format"] != "rckpt":
        _files.warn_import("rckpt.load", f"{_files.shown(f)} ({imported['format']})", imported,
                           stacklevel=3)
    ck = Checkpoint(raw, file_tree)
    if file_tree:
        return ck
    root = ck.metadata.get(ROOT_KEY)
    if root is not None and root in ck.state:
        return ck.state[root]
    if ck.state is not None and not isinstance(ck.state, Mapping):
        return ck.state  # a tree that is not a dict: a torch.save of a tensor or a list
    return ck


def load_into(f: LoadSource, state: Union[dict[str, Any], Mapping[str, torch.Tensor]], *,
              strict: bool = True, verify: bool = True, threads: int = 0,
              progress: Optional[Progress] = None, emulate_devices: int = 0,
              s3: Optional[S3Options] = None) -> None:
    """Restores tensors of ``f`` (a path, an ``s3://`` URL or a file object) into the
    existing tensors of ``state``.

    ``state`` is a dict of sections as given to save (e.g.
    ``{"model": model.state_dict()}``); each tensor is restored in place,
    on the device it is on (CPU or CUDA), as load_state_dict copies into
    parameters. Only the sections named are read. Every name, dtype and
    shape is checked before the first byte is written: InvalidArgumentError
    lists every missing, unexpected (``strict=True``: a tensor of those
    sections without a target) and mismatched tensor. From an ``s3://`` URL
    only the chunks of the sections named are fetched; ``s3`` as for load.
    """
    import torch
    for name, flag in (("strict", strict), ("verify", verify)):
        check_bool("rckpt.load_into", name, flag)
    check_threads("rckpt.load_into", threads)
    check_emulate_devices("rckpt.load_into", emulate_devices)
    targets = []
    seen = {}

    def walk(obj, path):
        if isinstance(obj, torch.Tensor):
            if id(obj) in seen:
                return
            seen[id(obj)] = True
            targets.append((".".join(path), obj))
        elif isinstance(obj, dict):
            # str(k) spells str, int, bool and None keys as rckpt::KeyComponent
            # (rckpt/tree.h), which names the tensors a save writes; another key
            # (a tuple, a float) may be spelled otherwise there.
            for k, v in obj.items():
                walk(v, path + [str(k)])
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, path + [str(i)])

    if isinstance(state, Mapping) and state and all(isinstance(t, torch.Tensor)
                                                    for t in state.values()):
        state = {"model": state}  # model.state_dict(), as save stores it
    if not isinstance(state, dict):
        raise TypeError(f"rckpt.load_into: state must be a dict of sections "
                        f"({{'model': model.state_dict()}}) or a state_dict, not "
                        f"{type(state).__name__}")
    for section, value in state.items():
        walk(value, [section])
    progress = progress_callback(progress, "load_into")
    fs = _s3.file_system([f], s3, "rckpt.load_into")
    with torch.no_grad(), _files.readable(f) as path:
        _core.load_into(path, targets, [str(s) for s in state], strict, verify, threads,
                        progress, emulate_devices, fs)
