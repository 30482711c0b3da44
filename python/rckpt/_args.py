"""Arguments every save and load takes, as the extensions want them.

One definition each, shared by rckpt.save/load/load_into and
rckpt.distributed.save/load.
"""

import inspect
import os
from collections.abc import Mapping

from .progress import ProgressBar
from .rng import RngState, check_rng_record


def _given(value):
    """``value`` as a message shows what was given: its repr and, for a surprise, its type."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    if value is None or isinstance(value, (bool, int, float)):
        return text
    return f"{text} ({type(value).__name__})"


def check_int(who, name, value, minimum, expected):
    """An int option (not a bool) >= ``minimum``; TypeError / ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{who}: {name} must be {expected}, not {_given(value)}")
    if value < minimum:
        raise ValueError(f"{who}: {name} must be {expected}, not {value}")
    return value


def check_bool(who, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be True or False, not {_given(value)}")
    return value


# The save options every save front end takes, by name, with the Python type
# each is given as. Their defaults, ranges and messages are the library's:
# rckpt._core.SaveOptions is its SaveOptions, and check() its validation.
SAVE_OPTIONS = {"codec": str, "level": int, "chunk_bytes": int, "shuffle": str, "threads": int,
                "replace": bool}


def save_options(who, emulate_devices=0, **values):
    """The ``_core.SaveOptions`` of a save call, checked before anything is converted or
    written: a TypeError naming an option of the wrong type, the library's
    InvalidArgumentError for a value it refuses."""
    from . import _core
    check_emulate_devices(who, emulate_devices)
    options = _core.SaveOptions()
    for name, value in values.items():
        kind = SAVE_OPTIONS[name]
        if (kind is bool) != isinstance(value, bool) or not isinstance(value, kind):
            raise TypeError(f"{who}: {name} must be {_TYPE_NAMES[kind]}, not {_given(value)}")
        setattr(options, name, value)
    options.check()
    return options


_TYPE_NAMES = {str: "a str", int: "an int", bool: "True or False"}


def check_threads(who, threads):
    return check_int(who, "threads", threads, 0, "an int >= 0 (0: all cores)")


def check_emulate_devices(who, n):
    return check_int(who, "emulate_devices", n, 0, "an int >= 0 (0: the real devices)")


def names_arg(who, name, value, what="section names"):
    """``sections=`` / ``skip_sections=`` (``what``: other names): None or a list (any
    iterable) of str."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{who}: {name} must be a list of {what}, not the string "
                        f"{value!r} (write {name}=[{value!r}])")
    try:
        names = list(value)
    except TypeError:
        raise TypeError(f"{who}: {name} must be a list of {what}, not "
                        f"{_given(value)}") from None
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{who}: {name} must hold {what} (str), not {_given(n)}")
    return names


def str_map_arg(who, name, value, what):
    """None or a mapping of non-empty str -> non-empty str (``what`` says what maps to what)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{who}: {name} must be a dict {what}, not {_given(value)}")
    import torch
    out = {}
    for k, v in value.items():
        k, v = (str(x) if isinstance(x, torch.device) else x for x in (k, v))
        if not isinstance(k, str) or not isinstance(v, str) or not k or not v:
            raise TypeError(f"{who}: {name} must be a dict {what} (non-empty str), not "
                            f"{_given(k)}: {_given(v)}")
        out[k] = v
    return out


def metadata_arg(who, metadata):
    """``metadata=``: None or a mapping, stored as str -> str."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"{who}: metadata must be a dict of str -> str (values are stored as "
                        f"str()), not {_given(metadata)}")
    return {str(k): str(v) for k, v in metadata.items()}


def path_arg(who, name, value):
    """A path argument (str, bytes or os.PathLike) as a str."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{who}: {name} must be a path (str, bytes or os.PathLike), not "
                        f"{_given(value)}")
    return os.fsdecode(os.fspath(value))


def progress_callback(progress, label):
    """``progress=``: True draws a bar, False/None nothing, a callable(done, total) is called."""
    if progress is True:
        return ProgressBar(label)
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise TypeError(f"progress must be True, False, None or a callable(done, total), "
                        f"not {_given(progress)}")
    return progress


def device_str(d, who="rckpt.load", name="model_device"):
    """``model_device=``: None, "auto" or a device (str or torch.device)."""
    import torch
    if d is None or isinstance(d, str):
        return d
    if isinstance(d, torch.device):
        return str(d)
    raise TypeError(f"{who}: {name} must be \"auto\", a device (\"cpu\", \"cuda:1\" or a "
                    f"torch.device) or None, not {_given(d)}")


def rng_records(rng, who="rckpt.save"):
    """``rng=`` (None, an RngState or a mapping name -> record) as the extension's records."""
    if rng is None:
        return []
    if not isinstance(rng, Mapping):
        raise TypeError(f"{who}: rng must be an RngState (rckpt.capture_rng(), ck.rng) or a "
                        f"dict name -> RngRecord, not {_given(rng)}")
    for name, record in rng.items():
        check_rng_record(who, "rng", name, record)
    return (rng if isinstance(rng, RngState) else RngState(rng)).records()


def map_location_arg(m):
    """``map_location=``: None, a device, a dict origin -> device, or a callable.

    rckpt's callable takes one argument (a dict describing the tensor) and
    returns a device or None. torch's form, ``fn(storage, location)``
    returning a storage (``lambda storage, loc: storage`` keeps tensors on
    the CPU, ``lambda storage, loc: storage.cuda(1)`` sends them to
    cuda:1), is accepted too: it is called with an empty CPU storage and
    the tensor's origin, and the device of what it returns is used.
    """
    import torch
    if m is None or isinstance(m, str):
        return m
    if isinstance(m, torch.device):
        return str(m)
    if isinstance(m, dict):
        return {str(k): str(v) for k, v in m.items()}
    if callable(m):
        arity = _required_positional(m)
        if arity is None or arity == 1:
            return m
        if arity == 2:
            return _TorchStyleMapLocation(m)
        raise TypeError(
            f"map_location callable {m!r} takes {arity} required arguments; rckpt calls "
            "fn(info) (info: a dict with name, section, role, dtype, shape, origin) and "
            "returns a device or None; torch's fn(storage, location) is accepted too")
    raise TypeError(f"map_location must be a device (\"cuda:0\", a torch.device), a dict "
                    f"origin -> device or a callable, not {_given(m)}")


def _required_positional(fn):
    """How many positional arguments ``fn`` needs; None when it cannot be told (builtins)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.default is p.empty and
               p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class _TorchStyleMapLocation:
    """A torch map_location ``fn(storage, location)`` as rckpt's ``fn(info)``."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, info):
        import torch
        storage = torch.UntypedStorage(0)
        r = self.fn(storage, info["origin"])
        if r is None:
            return None
        device = getattr(r, "device", None)
        if device is None:
            raise TypeError(
                f"map_location {self.fn!r} returned {type(r)} for '{info['name']}'; a torch-style "
                "map_location(storage, location) returns a storage (or a tensor) on the target "
                "device, or None")
        return str(device)
