"""Python values of a state tree that the file's tree has no kind of its own for.

The extension maps dicts, lists, tuples, sets, scalars, tensors, torch.Size,
dtypes, devices and OrderedDicts itself. Anything else reaches
:func:`encode`, which gives it a class path and fields (stored as the tree's
object kind, as the PyTorch importer stores pickled objects), or refuses it
with a TypeError naming its key path. Loading calls :func:`decode` for every
object the extension does not rebuild itself.

- NumPy arrays: ``numpy.ndarray`` {"dtype": name, "data": tensor}. The
  tensor has the array's shape and its dtype where torch has one; unsigned
  integers wider than 8 bits, datetimes and timedeltas are stored as the
  signed integers of their width, float128 and complex256 as their bytes
  (a last dimension of the item size).
- NumPy scalars: ``numpy.scalar`` {"dtype": name, "value": typed value}.
- ``collections.Counter`` (MultiStepLR's milestones) {"items": dict} and
  ``collections.deque`` {"items": list, "maxlen": int or None}.
- Functions and bound methods inside an LR scheduler's state (a dict with
  ``base_lrs`` and ``last_epoch``: ``OneCycleLR.anneal_func`` in torch < 2.2,
  ``CyclicLR._scale_fn_ref`` and a custom ``scale_fn`` in torch < 2.0,
  ``SWALR.anneal_func``, the attributes of an ``lr_lambda`` object):
  ``rckpt.function`` {"name": "module.qualname"[, "bound_to": "module.class"]},
  an inert reference. Nothing is ever imported or called for it: a load
  gives back an :class:`rckpt.FunctionRef`, and leaves a dict entry holding
  one out of the dict, so that ``scheduler.load_state_dict`` keeps the
  method the freshly built scheduler has (as torch >= 2.2 does with
  ``_anneal_func_type``). Anywhere else a function could never be restored:
  it is refused (TypeError naming its key path), or left out of the file
  with a DroppedValueWarning naming the key paths when the save was given
  ``drop_functions=True`` (:func:`dropping_functions`).
"""

import contextlib
import contextvars
import re
import warnings

from .errors import DroppedValueWarning
from .types import FunctionRef, InertObject

COUNTER = "collections.Counter"
DEQUE = "collections.deque"
NDARRAY = "numpy.ndarray"
SCALAR = "numpy.scalar"
FUNCTION = "rckpt.function"

# NumPy dtypes torch has, by name: stored as tensors of that dtype.
_TORCH_HAS = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
              "float64", "complex64", "complex128"}
_ARRAY_KINDS = "biufcmM"
_SCALAR_KINDS = "biufcmM"
_DTYPE_NAME = re.compile(r"[a-z]+[0-9]*(\[[0-9]*[a-zA-Z]+\])?")


# What a save does with a function outside an LR scheduler's state: a list
# collects the key paths it leaves out (drop_functions=True); _REFUSE refuses,
# naming drop_functions; None (an entry point without the option) refuses.
_REFUSE = "refuse"
_FUNCTIONS: contextvars.ContextVar = contextvars.ContextVar("rckpt_functions", default=None)


@contextlib.contextmanager
def dropping_functions(drop, who, stacklevel=4):
    """The function rule of one save (``drop_functions=drop``) while its state is converted.

    With ``drop``, a DroppedValueWarning naming every key path left out is
    issued once the body completes (``stacklevel`` counts from the caller of
    the ``with``'s function). ``who`` names the call in the warning. Inside
    a block that drops functions (a CheckpointManager's save calling
    save_async), the outer block's rule and warning hold.
    """
    if not isinstance(drop, bool):
        raise TypeError(f"{who}: drop_functions must be True or False, not {drop!r}")
    if not drop and isinstance(_FUNCTIONS.get(), list):
        yield
        return
    dropped = []
    token = _FUNCTIONS.set(dropped if drop else _REFUSE)
    try:
        yield
    finally:
        _FUNCTIONS.reset(token)
    if dropped:
        warnings.warn(DroppedValueWarning(
            f"{who} left out {len(dropped)} function value{'s' if len(dropped) > 1 else ''} "
            f"(drop_functions=True; a function cannot be restored from a checkpoint): "
            f"{', '.join(dropped)}"), stacklevel=stacklevel)


def encode(obj, path, in_scheduler_state=False):
    """(class path, fields) for ``obj``; None to leave it out (a function, under
    drop_functions=True); TypeError naming ``path`` when it cannot be stored.
    ``in_scheduler_state``: ``obj`` is inside an LR scheduler's state_dict()."""
    import collections
    module = type(obj).__module__
    if type(obj) is collections.Counter:
        return COUNTER, {"items": dict(obj)}
    if type(obj) is collections.deque:
        return DEQUE, {"items": list(obj), "maxlen": obj.maxlen}
    if module == "numpy":
        import numpy as np
        if type(obj) is np.ndarray:
            return NDARRAY, _encode_array(np, obj, path)
        if isinstance(obj, np.generic):
            return SCALAR, _encode_scalar(np, obj, path)
    if module == "weakref" and type(obj).__name__ == "WeakMethod":
        target = obj()
        if target is None:
            raise TypeError(f"{path}: cannot store a weakref.WeakMethod whose object is gone")
        obj = target
    ref = _function_ref(obj)
    if ref is not None:
        if in_scheduler_state:
            return FUNCTION, ref
        rule = _FUNCTIONS.get()
        if isinstance(rule, list):
            rule.append(path)
            return None
        raise TypeError(_function_refusal(obj, ref, path, offered=rule == _REFUSE))
    raise TypeError(_refusal(obj, path))


def _function_refusal(obj, ref, path, offered):
    import types
    kind = "method" if "bound_to" in ref else \
        "lambda" if getattr(obj, "__name__", "") == "<lambda>" else "function"
    name = ref["name"]
    if isinstance(obj, types.BuiltinFunctionType) and getattr(obj, "__module__", None):
        name = f"{obj.__module__}.{obj.__name__}"  # torch.sigmoid, not its C class's path
    what = f"the {kind} {name}"
    if isinstance(obj, types.MethodType):
        what += f" of a {ref['bound_to']}"
    fix = "leave it out of the state, or pass drop_functions=True to leave it out with a " \
        "warning" if offered else "leave it out of the state"
    return (f"{path}: cannot store {what}: a function is code, which rckpt never stores, so it "
            f"could never be restored from the file; {fix}")


def _refusal(obj, path):
    import torch
    cls = type(obj)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(obj, torch.nn.Module):
        return (f"{path}: cannot store a module ({name}); rckpt stores state, not code: save "
                "model.state_dict() and restore with model.load_state_dict(...)")
    if callable(getattr(obj, "state_dict", None)):
        return (f"{path}: cannot store a {name}; save its state, obj.state_dict(), and "
                "restore it with obj.load_state_dict(...)")
    return f"{path}: cannot store {cls}"


def _function_ref(obj):
    import types
    if isinstance(obj, types.MethodType):
        owner = obj.__self__
        owner_cls = owner if isinstance(owner, type) else type(owner)
        return {"name": _qualified(obj.__func__),
                "bound_to": f"{owner_cls.__module__}.{owner_cls.__qualname__}"}
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return {"name": _qualified(obj)}
    return None


def _qualified(fn):
    module = getattr(fn, "__module__", None) or "builtins"
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


def _storage(np, dtype):
    """The numpy dtype an array of ``dtype`` is stored as, and whether as bytes."""
    if dtype.name in _TORCH_HAS:
        return dtype, False
    if dtype.kind in "umM" and dtype.itemsize in (2, 4, 8):
        return np.dtype(f"int{8 * dtype.itemsize}"), False
    return np.dtype("uint8"), True


def _encode_array(np, a, path):
    import torch
    if a.dtype.kind not in _ARRAY_KINDS or a.dtype.fields is not None or a.dtype.subdtype:
        raise TypeError(f"{path}: cannot store a numpy array of dtype {a.dtype} (numeric, bool, "
                        "datetime64 and timedelta64 arrays can be stored)")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    stored, as_bytes = _storage(np, a.dtype)
    if as_bytes:
        data = a.reshape(-1).view(stored).reshape(a.shape + (a.dtype.itemsize,))
    else:
        data = a.view(stored)
    if not data.flags.writeable:
        data = data.copy()  # torch.from_numpy wants a writable array; the save only reads it
    return {"dtype": a.dtype.name, "data": torch.from_numpy(data)}


def _encode_scalar(np, x, path):
    kind, size = x.dtype.kind, x.dtype.itemsize
    if kind == "b":
        value = bool(x)
    elif kind in "iu":
        value = int(x)
    elif kind == "f" and size <= 8:
        value = float(x)
    elif kind == "c" and size <= 16:
        value = (float(x.real), float(x.imag))
    elif kind in "mM":
        value = int(np.array(x).view(np.int64))
    elif kind == "U":
        return {"dtype": "str", "value": str(x)}
    elif kind == "S":
        return {"dtype": "bytes", "value": bytes(x)}
    elif kind in "fc":
        value = x.tobytes()  # float128 / complex256: their bytes, exactly
    else:
        raise TypeError(f"{path}: cannot store a numpy scalar of dtype {x.dtype}")
    return {"dtype": x.dtype.name, "value": value}


def decode(class_path, fields):
    """The object stored as (class_path, fields); an InertObject when rckpt does not rebuild it."""
    import collections
    if class_path == FUNCTION and isinstance(fields, dict) and isinstance(fields.get("name"), str):
        return FunctionRef(fields["name"], fields.get("bound_to"))
    if class_path == COUNTER and isinstance(fields, dict) and set(fields) == {"items"} \
            and isinstance(fields["items"], dict):
        return collections.Counter(fields["items"])
    if class_path == DEQUE and isinstance(fields, dict) and set(fields) == {"items", "maxlen"} \
            and isinstance(fields["items"], list) and \
            (fields["maxlen"] is None or isinstance(fields["maxlen"], int)):
        try:
            return collections.deque(fields["items"], fields["maxlen"])
        except ValueError:  # a negative maxlen
            return InertObject(class_path, fields)
    if class_path in (NDARRAY, SCALAR) and isinstance(fields, dict):
        try:
            import numpy as np
        except ImportError:
            return InertObject(class_path, fields)
        rebuilt = (_decode_array if class_path == NDARRAY else _decode_scalar)(np, fields)
        if rebuilt is not None:
            return rebuilt
    return InertObject(class_path, fields)


def _dtype(np, name, kinds):
    """The numpy dtype called ``name``; None for anything rckpt did not write."""
    if not isinstance(name, str) or not _DTYPE_NAME.fullmatch(name):
        return None
    try:
        dtype = np.dtype(name)
    except TypeError:
        return None
    if dtype.kind not in kinds or dtype.fields is not None or dtype.name != name:
        return None
    return dtype


def _decode_array(np, fields):
    import torch
    dtype = _dtype(np, fields.get("dtype"), _ARRAY_KINDS)
    data = fields.get("data")
    if dtype is None or set(fields) != {"dtype", "data"} or not isinstance(data, torch.Tensor):
        return None
    stored, as_bytes = _storage(np, dtype)
    a = data.detach().cpu().numpy()
    if a.dtype != stored:
        return None
    if as_bytes:
        if a.ndim == 0 or a.shape[-1] != dtype.itemsize:
            return None
        return a.reshape(-1).view(dtype).reshape(a.shape[:-1])
    return a.view(dtype)


def _decode_scalar(np, fields):
    value = fields.get("value")
    if set(fields) != {"dtype", "value"}:
        return None
    if fields["dtype"] in ("str", "bytes"):
        text = fields["dtype"] == "str"
        return (np.str_ if text else np.bytes_)(value) \
            if isinstance(value, str if text else bytes) else None
    dtype = _dtype(np, fields["dtype"], _SCALAR_KINDS)
    if dtype is None:
        return None
    kind = dtype.kind
    try:
        if isinstance(value, bytes) and kind in "fc":
            if len(value) != dtype.itemsize:
                return None
            return np.frombuffer(value, dtype)[0]
        if kind in "mM" and isinstance(value, int):
            return np.array(value, np.int64).view(dtype)[()]
        if kind == "c" and isinstance(value, tuple) and len(value) == 2:
            return dtype.type(complex(*value))
        if ((kind == "b" and isinstance(value, bool)) or
                (kind in "iu" and isinstance(value, int) and not isinstance(value, bool)) or
                (kind == "f" and isinstance(value, float))):
            return dtype.type(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return None
