"""save, load and load_into: the Python face of rckpt's C++ library."""

import os
from collections.abc import Mapping

from . import _core
from .progress import ProgressBar
from .rng import RngRecord, RngState


class Checkpoint(Mapping):
    """What ``load`` returns: the saved state, by section, plus what the file records.

    ``ck["model"]`` is the model section's state as it was saved (dicts,
    lists, tensors, ...). Besides the mapping:

    - ``rng``: the RNG records (an RngState for restore_rng), always on the host;
    - ``placement``: tensor name -> device it was restored to ("cpu",
      "cuda:1"). A tensor placed on an emulated device (``emulate_devices``)
      comes back as a CPU torch tensor; its placement still says "cuda:N";
    - ``origin``: tensor name -> device recorded when it was saved;
    - ``tensors``: tensor name -> tensor (file order), ``sections`` (name ->
      role), ``metadata`` (str -> str) and ``stats`` (bytes read and
      restored, seconds).
    """

    def __init__(self, raw, keep_sections):
        state = raw["state"]
        if isinstance(state, dict) and keep_sections is not None:
            if "rckpt.world_size" in raw["metadata"] and isinstance(state.get("common"), dict):
                # A collective save (rckpt.distributed): {"common": sections, "ranks": [...]}.
                state = {**state, "common": {k: v for k, v in state["common"].items()
                                             if keep_sections(k)}}
            else:
                state = {k: v for k, v in state.items() if keep_sections(k)}
        self.state = state
        self.tensors = raw["tensors"]
        self.placement = raw["placement"]
        self.origin = raw["origin"]
        self.sections = raw["sections"]
        self.metadata = raw["metadata"]
        self.stats = raw["stats"]
        self.rng = RngState((name, RngRecord(kind, origin, data))
                            for name, kind, origin, data in raw["rng"])

    def __getitem__(self, key):
        return self.state[key]

    def __iter__(self):
        return iter(self.state)

    def __len__(self):
        return len(self.state)

    def __repr__(self):
        return (f"<rckpt.Checkpoint sections={list(self.state)} tensors={len(self.tensors)} "
                f"rng={list(self.rng)}>")


def _progress(progress, label):
    if progress is True:
        return ProgressBar(label)
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise TypeError("progress must be True, False, None or a callable(done, total)")
    return progress


def _device_str(d):
    return None if d is None else str(d)


def _normalise_map_location(m):
    """None, a device string, a dict of device strings, or a callable."""
    import torch
    if m is None or isinstance(m, str):
        return m
    if isinstance(m, torch.device):
        return str(m)
    if isinstance(m, dict):
        return {str(k): str(v) for k, v in m.items()}
    if callable(m):
        return m
    raise TypeError(f"map_location must be a device, a dict or a callable, not {type(m)}")


def _cuda_sync(tensors):
    """Waits for torch's pending work on the CUDA devices the tensors are on."""
    import torch
    for index in sorted({t.device.index or 0 for t in tensors if t.is_cuda}):
        torch.cuda.synchronize(index)


def save(path, state, *, rng=None, codec="none", level=1, chunk_bytes=4 << 20, threads=0,
         metadata=None, origin=None, progress=None, emulate_devices=0):
    """Saves ``state`` (a dict of sections) to ``path`` atomically.

    The file at ``path`` is replaced only when the new one is complete; on
    any error, or a cancel (Ctrl-C, a progress callback returning False),
    the previous file stays intact. The GIL is released while the file is
    written. Tensors may be on the CPU or on CUDA devices; their device is
    recorded as their origin. ``origin`` overrides that record for CPU
    tensors: a device string applies to every model-role tensor (a model
    trained on cuda:1 and moved to the CPU before saving), a dict
    section -> device to every tensor of those sections.

    Raises TypeError naming the key path of a value that cannot be stored
    (before anything is written) and rckpt.Error subclasses for the rest.
    """
    records = _rng_records(rng)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path)}")
    import torch
    if torch.cuda.is_available():
        _cuda_sync(_walk_tensors(state))
    _core.save(os.fspath(path), state, records, codec, level, chunk_bytes, threads,
               {str(k): str(v) for k, v in (metadata or {}).items()}, origin,
               _progress(progress, "save"), emulate_devices)


def _rng_records(rng):
    """save's rng argument (None, an RngState or a mapping name -> record) as records."""
    if isinstance(rng, RngState) or rng is None:
        return rng.records() if rng else []
    return RngState(rng).records()


def _walk_tensors(obj, shard_type=None):
    """The tensors of a state tree (with shard_type: the blocks of its shards too)."""
    import torch
    stack, out = [obj], []
    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            out.append(o)
        elif shard_type is not None and isinstance(o, shard_type):
            out.append(o.block)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    return out


def load(path, *, map_location=None, model_device=None, sections=None, skip_sections=None,
         verify=True, map_file=True, threads=0, progress=None, emulate_devices=0):
    """Loads a checkpoint; returns a :class:`Checkpoint`.

    Placement follows rckpt's rules (docs/PYTHON.md): nothing given puts
    every tensor back on its origin device; ``map_location`` (a device, a
    dict origin -> target, or a callable(info) -> device or None) maps model-
    and data-role tensors; ``model_device`` ("auto" or a device) moves the
    model side there and everything else to the host. Both together raise
    InvalidArgumentError before the file is opened. RNG records and host-role
    tensors always load to the host. ``sections`` / ``skip_sections`` choose
    what is read at all. ``emulate_devices=N`` loads onto N host-emulated
    CUDA devices (for trying placements without GPUs).

    Host tensors are handed over without a copy: each torch tensor owns the
    buffer the engine decoded into or, with ``map_file=True`` (the default),
    raw tensors point into a private copy-on-write mapping of the file.
    Writing to them copies the touched pages; the file never changes. Do not
    truncate or rewrite the file in place (``cp``, ``torch.save`` over the
    same path) while such tensors live; rckpt's own saves replace files by
    rename and are safe. ``map_file=False`` gives a copying load that owns
    all its memory.
    """
    keep = None
    if sections is not None:
        chosen = set(sections)
        keep = chosen.__contains__
    elif skip_sections is not None:
        skipped = set(skip_sections)
        keep = lambda k: k not in skipped  # noqa: E731
    raw = _core.load(os.fspath(path), _normalise_map_location(map_location),
                     _device_str(model_device), list(sections or []),
                     list(skip_sections or []), verify, map_file, threads,
                     _progress(progress, "load"), emulate_devices)
    return Checkpoint(raw, keep)


def load_into(path, state, *, strict=True, verify=True, threads=0, progress=None,
              emulate_devices=0):
    """Restores tensors of ``path`` into the existing tensors of ``state``.

    ``state`` is a dict of sections as given to save (e.g.
    ``{"model": model.state_dict()}``); each tensor is restored in place,
    on the device it is on (CPU or CUDA), as load_state_dict copies into
    parameters. Only the sections named are read. Every name, dtype and
    shape is checked before the first byte is written: InvalidArgumentError
    lists every missing, unexpected (``strict=True``: a tensor of those
    sections without a target) and mismatched tensor.
    """
    import torch
    targets = []
    seen = {}

    def walk(obj, path):
        if isinstance(obj, torch.Tensor):
            if id(obj) in seen:
                return
            seen[id(obj)] = True
            targets.append((".".join(path), obj))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, path + [str(k)])
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, path + [str(i)])

    if not isinstance(state, dict):
        raise TypeError(f"load_into's state must be a dict of sections, not {type(state)}")
    for section, value in state.items():
        walk(value, [section])
    if torch.cuda.is_available():
        _cuda_sync([t for _, t in targets])
    with torch.no_grad():
        _core.load_into(os.fspath(path), targets, [str(s) for s in state], strict, verify,
                        threads, _progress(progress, "load_into"), emulate_devices)
