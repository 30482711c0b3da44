"""Capturing and restoring every random-number generator of a training run.

``capture_rng()`` returns an :class:`RngState`: named records, each with the
rckpt RNG kind, the device its generator belongs to and the state's bytes in
the layout schema/FORMAT.md defines for that kind. ``save(..., rng=...)``
stores them as RNG records, which every load returns on the host under every
placement option (``Checkpoint.rng``); ``restore_rng()`` puts them back.

Record names: ``python.random``, ``numpy.global`` (NumPy's legacy global
RandomState), ``numpy.<name>`` and ``torch.<name>`` (generators the caller
names), ``torch.cpu`` (torch's default CPU generator) and ``torch.cuda.<i>``
(the default generator of CUDA device i). Records imported from other files
keep the key path they were read under (a Trainer ``rng_state.pth`` gives
``python``, ``numpy``, ``cpu`` and ``cuda`` or ``cuda.<i>``; accelerate's
``random_states_<i>.pkl`` ``random_state``, ``numpy_random_seed``,
``torch_manual_seed`` and ``torch_cuda_manual_seed.<i>``), and restore_rng
restores those into the same global generators.
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from . import _core

if TYPE_CHECKING:
    import torch as _torch


class RngRecord(NamedTuple):
    """One generator's state: rckpt RNG kind, the device it belongs to, the state's bytes."""

    kind: str
    origin: str
    data: bytes

    def __repr__(self) -> str:
        # A summary: a CPU generator's state is 5 KB of bytes nobody reads.
        return f"RngRecord(kind={self.kind!r}, origin={self.origin!r}, {len(self.data)} bytes)"


# The kinds restore_rng knows (schema/FORMAT.md).
_KINDS = ("python", "numpy", "torch_cpu", "torch_cuda", "opaque", "mt19937", "mt19937_64")


def check_rng_record(who: str, arg: str, name: Any, record: Any) -> RngRecord:
    """One record of an RngState: a str name -> an RngRecord(kind, origin, data)."""
    if not isinstance(name, str):
        raise TypeError(f"{who}: {arg} names its records with str, not {name!r} "
                        f"({type(name).__name__})")
    if not (isinstance(record, tuple) and len(record) == 3 and isinstance(record[0], str)
            and isinstance(record[1], str) and isinstance(record[2], (bytes, bytearray))):
        shown = repr(record)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(f"{who}: {arg}[{name!r}] must be an RngRecord(kind, origin, data) as "
                        f"rckpt.capture_rng() makes, not {shown} ({type(record).__name__})")
    if record[0] not in _KINDS:
        raise ValueError(f"{who}: {arg}[{name!r}] has kind {record[0]!r}, expected one of "
                         f"{', '.join(_KINDS)}")
    return RngRecord(*record)


# numpy records: a u32 layout tag, then the generator's state, in the layouts
# the library defines (core/rng_layout.h, schema/FORMAT.md section 7), which
# the PyTorch importer and exporter use too. Each field names where NumPy's
# API holds it: an index in get_state()'s tuple (the legacy layout) or a key
# path in a bit generator's .state dict.
_FIELD_FORMATS = {"u32": "I", "u64": "Q", "f64": "d"}
_U128 = (1 << 128) - 1


@functools.lru_cache(maxsize=None)
def _numpy_layouts():
    """tag -> (bit_generator, legacy, size, fields) as the library defines them."""
    return {tag: (name, legacy, size, fields)
            for tag, name, legacy, size, fields in _core.numpy_rng_layouts()}


def _field(state, path, legacy):
    if legacy:
        return state[int(path)]
    for key in path.split("."):
        state = state[key]
    return state


def _encode_numpy(state, legacy):
    """A numpy record from get_state()'s tuple (``legacy``) or a .state dict."""
    layouts = _numpy_layouts()
    if legacy:
        if state[0] != "MT19937":
            raise TypeError(f"numpy's global RandomState uses {state[0]}, not MT19937")
        tag = next(t for t, (_, is_legacy, _, _) in layouts.items() if is_legacy)
    else:
        name = state["bit_generator"]
        tag = next((t for t, (n, is_legacy, _, _) in layouts.items()
                    if n == name and not is_legacy), None)
        if tag is None:
            raise TypeError(f"cannot capture a numpy bit generator of class {name}")
    _, _, size, fields = layouts[tag]
    out = bytearray(size)
    struct.pack_into("<I", out, 0, tag)
    for path, kind, count, offset, _ in fields:
        value = _field(state, path, legacy)
        if kind == "u128":
            out[offset:offset + 16] = (int(value) & _U128).to_bytes(16, "little")
        elif count > 1:
            struct.pack_into(f"<{count}{_FIELD_FORMATS[kind]}", out, offset,
                             *[int(x) for x in value])
        else:
            struct.pack_into("<" + _FIELD_FORMATS[kind], out, offset,
                             float(value) if kind == "f64" else int(value))
    return bytes(out)


def _encode_numpy_bitgen(state):
    return _encode_numpy(state, legacy=False)


def _encode_numpy_legacy(state):
    return _encode_numpy(state, legacy=True)


def _decode_numpy(data):
    """The state a record holds: ('legacy', get_state() tuple) or ('bitgen', .state dict).

    CorruptionError, naming the field, for bytes of no layout."""
    import numpy as np
    _core.validate_numpy_rng(bytes(data))
    name, legacy, _, fields = _numpy_layouts()[struct.unpack_from("<I", data)[0]]
    values = {}
    for path, kind, count, offset, _ in fields:
        if kind == "u128":
            value = int.from_bytes(data[offset:offset + 16], "little")
        elif count > 1:
            value = np.frombuffer(data, dtype="<u4" if kind == "u32" else "<u8", count=count,
                                  offset=offset).astype(np.uint32 if kind == "u32" else np.uint64)
        else:
            value = struct.unpack_from("<" + _FIELD_FORMATS[kind], data, offset)[0]
        values[path] = value
    if legacy:
        return "legacy", (name, *values.values())
    state = {"bit_generator": name}
    for path, value in values.items():
        *parents, key = path.split(".")
        node = state
        for p in parents:
            node = node.setdefault(p, {})
        node[key] = value
    return "bitgen", state


def _numpy_value(data):
    """A numpy record as NumPy's API gives it (get_state()'s tuple, a .state dict), or its
    bytes where NumPy is missing or they are no layout (what a load's tree shows)."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return bytes(data)
    try:
        return _decode_numpy(data)[1]
    except Exception:  # noqa: BLE001  (a damaged record stays bytes; restore_rng says why)
        return bytes(data)


class RngState(dict[str, RngRecord]):
    """Named RNG records (name -> RngRecord), in capture order."""

    def records(self) -> list[tuple[str, str, str, bytes]]:
        return [(name, r.kind, r.origin, bytes(r.data)) for name, r in self.items()]

    def __repr__(self) -> str:
        # One line per record, its size instead of its bytes (print(ck.rng)).
        if not self:
            return "RngState({})"
        rows = ",\n".join(f"  {name!r}: {RngRecord(*r)!r}" for name, r in self.items())
        return "RngState({\n" + rows + "\n})"


def _torch_record(generator_state, device):
    data = generator_state.numpy().tobytes()
    if device == "cpu":
        return RngRecord("torch_cpu", "cpu", data)
    # torch >= 2.1 keeps (seed, offset) in 16 bytes; older CUDA states are
    # other sizes and are kept as opaque bytes of that device.
    return RngRecord("torch_cuda" if len(data) == 16 else "opaque", device, data)


def capture_rng(generators: Optional[Mapping[str, Any]] = None, *, python: bool = True,
                numpy: bool = True, torch: bool = True, cuda: bool = True) -> RngState:
    """Captures the state of every generator a training run draws from.

    Python's ``random``, NumPy's legacy global state, torch's CPU generator
    and the generator of every CUDA device (when torch sees any), plus each
    generator named in ``generators`` (name -> ``numpy.random.Generator``,
    ``numpy.random.RandomState`` or ``torch.Generator``). A library that is
    not installed is skipped; pass ``python=False`` (etc.) to leave one out.
    """
    _check_generators("capture_rng", generators)
    out = RngState()
    if python:
        out["python.random"] = RngRecord("python", "cpu", _core.python_rng_bytes(random.getstate()))
    np = _try_import("numpy") if numpy else None
    if np is not None:
        out["numpy.global"] = RngRecord("numpy", "cpu", _encode_numpy_legacy(np.random.get_state()))
    th = _try_import("torch") if torch else None
    if th is not None:
        out["torch.cpu"] = _torch_record(th.get_rng_state(), "cpu")
        if cuda and th.cuda.is_available():
            for i in range(th.cuda.device_count()):
                out[f"torch.cuda.{i}"] = _torch_record(th.cuda.get_rng_state(i), f"cuda:{i}")
    for name, g in (generators or {}).items():
        out.update(_capture_named(name, g))
    return out


def _capture_named(name, g):
    kind = type(g).__module__ + "." + type(g).__qualname__
    th = _try_import("torch")
    if th is not None and isinstance(g, th.Generator):
        dev = str(g.device)
        if dev == "cuda":
            dev = "cuda:0"
        return {f"torch.{name}": _torch_record(g.get_state(), dev)}
    if hasattr(g, "bit_generator"):  # numpy.random.Generator
        return {f"numpy.{name}": RngRecord("numpy", "cpu",
                                           _encode_numpy_bitgen(g.bit_generator.state))}
    if hasattr(g, "get_state") and hasattr(g, "set_state"):  # numpy.random.RandomState
        return {f"numpy.{name}": RngRecord("numpy", "cpu", _encode_numpy_legacy(g.get_state()))}
    raise TypeError(f"capture_rng: generator '{name}' is a {kind}, not a numpy or torch generator")


def _check_generators(who, generators):
    if generators is not None and not isinstance(generators, Mapping):
        raise TypeError(f"{who}: generators must be a dict name -> generator (a "
                        f"numpy.random.Generator, RandomState or torch.Generator), not "
                        f"{generators!r} ({type(generators).__name__})")


def _try_import(name):
    try:
        return __import__(name)
    except ImportError:
        return None


# The records of the process-wide generators, by the names capture_rng gives them, then those
# they are imported under from a Trainer rng_state.pth (Trainer._save_rng_state's keys) and
# from accelerate's random_states_<i>.pkl (save_accelerator_state's keys). CUDA records are
# named <prefix><i> (get_rng_state_all()'s list) or, Trainer's of one device, "cuda".
_PYTHON_NAMES = ("python.random", "python", "random_state")
_NUMPY_NAMES = ("numpy.global", "numpy", "numpy_random_seed")
_TORCH_CPU_NAMES = ("torch.cpu", "cpu", "torch_manual_seed")
_CUDA_PREFIXES = ("torch.cuda.", "cuda.", "torch_cuda_manual_seed.")


def _is_cuda_record(name, kind, origin):
    if not origin.startswith("cuda:") or kind not in ("torch_cuda", "opaque"):
        return False
    return name == "cuda" or any(name.startswith(p) and name[len(p):].isdigit()
                                 for p in _CUDA_PREFIXES)


class RestoreReport(NamedTuple):
    """What restore_rng did: the names of the records restored and of those skipped."""

    restored: list[str]
    skipped: list[str]


def restore_rng(state: Mapping[str, RngRecord], generators: Optional[Mapping[str, Any]] = None,
                *, device_count: Optional[int] = None,
                cuda_set_state: Optional[Callable[[_torch.Tensor, int], object]] = None
                ) -> RestoreReport:
    """Restores what capture_rng captured; returns RestoreReport(restored, skipped).

    ``generators`` names the generators to restore ``numpy.<name>`` and
    ``torch.<name>`` records into (as given to capture_rng); a named record
    without a generator is skipped. The process-wide generators take the
    records capture_rng makes of them and those a Trainer ``rng_state.pth``
    or accelerate's ``random_states_<i>.pkl`` is imported as: Python's
    ``random`` ``python.random``, ``python`` or ``random_state``; NumPy's
    global RandomState the legacy record ``numpy.global``, ``numpy`` or
    ``numpy_random_seed``; torch's CPU generator ``torch.cpu``, ``cpu`` or
    ``torch_manual_seed``; CUDA device i's generator ``torch.cuda.<i>``,
    ``cuda``/``cuda.<i>`` or ``torch_cuda_manual_seed.<i>`` (by the record's
    origin, cuda:i). Records under other names are skipped.

    CUDA generators (rule for fewer devices): the record of cuda:i restores
    the generator of device i when i < ``device_count`` (default: the devices
    torch sees). A record of a device this machine lacks is skipped, as is
    every CUDA record on a machine without CUDA: there is no generator to set,
    and the run's placement decides which devices are used, not the old
    machine. Devices without a record keep their generator's state.
    ``cuda_set_state(state_tensor, index)`` replaces torch.cuda.set_rng_state.

    Every record is checked before the first generator is touched; a damaged
    record raises CorruptionError and nothing is restored.
    """
    import torch as th
    if not isinstance(state, Mapping):
        raise TypeError(f"restore_rng: rng must be an RngState (ck.rng, rckpt.capture_rng()) "
                        f"or a dict name -> RngRecord, not {state!r} ({type(state).__name__})")
    _check_generators("restore_rng", generators)
    if device_count is not None and (isinstance(device_count, bool) or
                                     not isinstance(device_count, int) or device_count < 0):
        raise TypeError(f"restore_rng: device_count must be an int >= 0 or None (the devices "
                        f"torch sees), not {device_count!r}")
    if cuda_set_state is not None and not callable(cuda_set_state):
        raise TypeError(f"restore_rng: cuda_set_state must be a callable(state, index) or None, "
                        f"not {cuda_set_state!r}")
    records = [(name, check_rng_record("restore_rng", "rng", name, r))
               for name, r in state.items()]
    generators = generators or {}
    actions: list[tuple[str, Callable[..., object]]] = []
    skipped: list[str] = []
    if device_count is None:
        device_count = th.cuda.device_count() if th.cuda.is_available() else 0
    set_cuda = cuda_set_state or (lambda s, i: th.cuda.set_rng_state(s, i))
    for name, r in records:
        kind, origin, data = r
        if kind in ("torch_cpu", "torch_cuda", "python"):
            _core.validate_rng(kind, data)
        t = None
        if kind in ("torch_cpu", "torch_cuda", "opaque") and (
                name.startswith("torch.") or name in _TORCH_CPU_NAMES or
                _is_cuda_record(name, kind, origin)):
            t = th.frombuffer(bytearray(data), dtype=th.uint8)
        if name == "python.random" or (kind == "python" and name in _PYTHON_NAMES):
            st = _core.python_rng_tuple(data)
            actions.append((name, lambda st=st: random.setstate(st)))
        elif kind == "numpy" and name in _NUMPY_NAMES:
            # capture_rng's record, or the one a Trainer rng_state.pth, accelerate's
            # random_states_<i>.pkl or a state dict's "numpy" entry was imported as.
            import numpy as np
            how, st = _decode_numpy(data)
            if how == "legacy":
                actions.append((name, lambda st=st: np.random.set_state(st)))
            else:
                skipped.append(name)
        elif name.startswith("numpy."):
            how, st = _decode_numpy(data)
            g = generators.get(name[len("numpy."):])
            if g is None:
                skipped.append(name)
            elif how == "legacy":
                actions.append((name, lambda g=g, st=st: g.set_state(st)))
            else:
                actions.append((name, lambda g=g, st=st: setattr(g.bit_generator, "state", st)))
        elif name == "torch.cpu" or (kind == "torch_cpu" and name in _TORCH_CPU_NAMES):
            actions.append((name, lambda t=t: th.set_rng_state(t)))
        elif (name.startswith("torch.cuda.") and origin.startswith("cuda:")) or \
                _is_cuda_record(name, kind, origin):
            index = int(origin.split(":")[1])
            if index < device_count:
                actions.append((name, lambda t=t, i=index: set_cuda(t, i)))
            else:
                skipped.append(name)
        elif name.startswith("torch."):
            g = generators.get(name[len("torch."):])
            if g is None or (origin.startswith("cuda") and device_count == 0):
                skipped.append(name)
            else:
                actions.append((name, lambda g=g, t=t: g.set_state(t)))
        else:
            skipped.append(name)
    for _, act in actions:
        act()
    return RestoreReport([n for n, _ in actions], skipped)
