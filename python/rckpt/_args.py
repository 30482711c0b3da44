"""Arguments every save and load takes, as the extensions want them.

One definition each, shared by rckpt.save/load/load_into and
rckpt.distributed.save/load.
"""

import inspect

from .progress import ProgressBar
from .rng import RngState


def progress_callback(progress, label):
    """``progress=``: True draws a bar, False/None nothing, a callable(done, total) is called."""
    if progress is True:
        return ProgressBar(label)
    if progress is False or progress is None:
        return None
    if not callable(progress):
        raise TypeError(f"progress must be True, False, None or a callable(done, total), "
                        f"not {type(progress)}")
    return progress


def device_str(d):
    """``model_device=``: None, "auto" or a device (str or torch.device)."""
    return None if d is None else str(d)


def rng_records(rng):
    """``rng=`` (None, an RngState or a mapping name -> record) as the extension's records."""
    if isinstance(rng, RngState) or rng is None:
        return rng.records() if rng else []
    return RngState(rng).records()


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
    raise TypeError(f"map_location must be a device, a dict or a callable, not {type(m)}")


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


def cuda_sync(tensors):
    """Waits for torch's pending work on the CUDA devices the tensors are on."""
    import torch
    for index in sorted({t.device.index or 0 for t in tensors if t.is_cuda}):
        torch.cuda.synchronize(index)


def walk_tensors(obj, shard_type=None):
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


def sync_cuda(state, shard_type=None):
    """Waits for torch's pending CUDA work on the devices of the tensors in ``state``."""
    import torch
    if torch.cuda.is_available():
        cuda_sync(walk_tensors(state, shard_type))
