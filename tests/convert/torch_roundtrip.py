#!/usr/bin/env python3
"""Round trips of the PyTorch fixtures, checked by the real torch.

usage: torch_roundtrip.py CONVERT_TOOL TESTS_DATA_DIR WORK_DIR
For every fixture in tests/data/pytorch: .pt -> .pt, .pt -> .rckpt -> .pt and
.pt -> .safetensors -> .pt through rckpt, then torch.load(weights_only=True)
of the result (NumPy's globals allowed, as Trainer allows them) must equal
torch.load of the original: same keys in the same
order, dtypes, shapes, values bit for bit, scalars, containers, storage
location tags, tied tensors still one object. Exits 77 (ctest: skipped) when
torch is not importable. Needs: pip install torch numpy
"""
import collections
import contextlib
import math
import inspect
import os
import subprocess
import sys

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable ({e}); pip install torch numpy")
    sys.exit(77)

TOOL, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
PT = os.path.join(DATA, "pytorch")

# fixture -> needs --drop-objects (holds classes torch's weights_only refuses)
FIXTURES = {
    "dtypes.pt": False, "module_state_dict.pth": False, "optimizer_adam.pt": False,
    "nested.pt": False, "views.pt": False, "tied.pt": False, "zero_d_empty.pt": False,
    "rng_states.pt": False, "cuda_tagged.pt": False, "custom_class.pt": True,
    "hf_rng_state.pth": True, "torch1_checkpoint.pt": True,
}
failures = []
CURRENT = [""]


# custom_class.pt pickles mylib.metrics.MetricTracker; torch.load of the
# original needs the class importable.
def _install_mylib():
    import types
    mod = types.ModuleType("mylib.metrics")

    class MetricTracker:
        pass
    MetricTracker.__module__ = "mylib.metrics"
    mod.MetricTracker = MetricTracker
    sys.modules.setdefault("mylib", types.ModuleType("mylib"))
    sys.modules["mylib.metrics"] = mod


_install_mylib()


def load_with_tags(path, weights_only):
    """torch.load on CPU, returning (object, {storage data_ptr: location tag})."""
    tags = {}

    def remember(storage, location):
        if storage.nbytes() > 0:
            tags[storage.data_ptr()] = location
        return storage

    obj = torch.load(path, map_location=remember, weights_only=weights_only)
    return obj, tags


def tag_of(t, tags):
    # untyped_storage() is torch >= 2.0; storage() serves older versions.
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    if storage.nbytes() == 0:
        return None
    return tags.get(storage.data_ptr())


def same(a, b, where, ta, tb, dropped):
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{where}: tensor became {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{where}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        if a.numel() and a.contiguous().reshape(-1).view(torch.uint8).tolist() != \
                b.contiguous().reshape(-1).view(torch.uint8).tolist():
            return f"{where}: values differ"
        if tag_of(a, ta) != tag_of(b, tb) and a.numel():
            return f"{where}: location tag {tag_of(a, ta)} != {tag_of(b, tb)}"
        return None
    if dropped and b is None and type(a).__module__.split(".")[0] not in ("builtins", "torch",
                                                                          "collections"):
        return None  # an inert object written as None under --drop-objects
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return f"{where}: dict became {type(b).__name__}"
        keys_b = list(b.keys())
        if dropped and where == CURRENT[0]:
            # Tensors held only by dropped objects are kept under their own
            # names at the end of the top-level dict.
            keys_b = keys_b[:len(a)]
        if list(a.keys()) != keys_b:
            return f"{where}: keys {list(a.keys())[:5]} != {list(b.keys())[:5]}"
        if getattr(a, "_metadata", None) != getattr(b, "_metadata", None):
            return f"{where}: _metadata differs"
        for k in a:
            r = same(a[k], b[k], f"{where}.{k}", ta, tb, dropped)
            if r:
                return r
        return None
    if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{where}: {type(a).__name__}[{len(a)}] != {type(b).__name__}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = same(x, y, f"{where}.{i}", ta, tb, dropped)
            if r:
                return r
        return None
    if isinstance(a, float):
        if not isinstance(b, float):
            return f"{where}: float became {type(b).__name__}"
        if math.isnan(a) and math.isnan(b):
            return None
        if a != b or math.copysign(1, a) != math.copysign(1, b):
            return f"{where}: {a!r} != {b!r}"
        return None
    if type(a).__module__ == "numpy" and hasattr(a, "dtype"):
        # NumPy arrays and scalars come back with their dtype in the host's
        # byte order, and the same elements.
        import numpy as np
        if type(a) is not type(b) or a.dtype.newbyteorder("=") != b.dtype or \
                np.shape(a) != np.shape(b) or \
                np.ascontiguousarray(a).astype(b.dtype).tobytes() != \
                np.ascontiguousarray(b).tobytes():
            return f"{where}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
        return None
    if isinstance(a, (set, frozenset)):
        return None if isinstance(b, (set, frozenset)) and set(a) == set(b) else \
            f"{where}: {a!r} != {b!r}"
    if type(a) is not type(b) or a != b:
        return f"{where}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    return None


def allowing_numpy():
    """NumPy's globals allowed to torch.load(weights_only=True) under both NumPy majors'
    names, as transformers' Trainer allows them: an export writes the NumPy values and
    generator states a file held as NumPy pickles them."""
    if not hasattr(torch.serialization, "safe_globals"):
        return contextlib.nullcontext()
    import numpy as np
    core = getattr(np, "_core", None) or np.core
    allowed = [np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    for fn in (core.multiarray._reconstruct, core.multiarray.scalar):
        allowed += [(fn, f"{m}.multiarray.{fn.__name__}") for m in ("numpy.core", "numpy._core")]
    return torch.serialization.safe_globals(allowed)


def convert(src, dst, drop):
    cmd = [TOOL, "convert", src, dst] + (["--drop-objects"] if drop else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")


def check(name, drop):
    src = os.path.join(PT, name)
    CURRENT[0] = name
    base = os.path.join(WORK, name.replace("/", "_"))
    try:
        orig, ta = load_with_tags(src, weights_only=False)
    except (AttributeError, RuntimeError, ImportError) as e:
        # Fixtures written by a newer torch (e.g. _rebuild_tensor_v3 dtypes)
        # cannot be read by an older one such as Debian's 1.13.
        skipped.append(f"{name}: this torch ({torch.__version__}) cannot read it: {e}")
        return
    routes = {
        "pt": [base + ".out.pt"],
        "rckpt": [base + ".rckpt", base + ".via_rckpt.pt"],
        "safetensors": [base + ".safetensors", base + ".via_st.pt"],
    }
    if name == "dtypes.pt":
        # safetensors has no complex128: that export must refuse, not drop it.
        del routes["safetensors"]
        r = subprocess.run([TOOL, "convert", src, base + ".safetensors"], capture_output=True,
                           text=True)
        if r.returncode == 0 or "c128" not in r.stderr:
            failures.append(f"{name}: safetensors export of complex128 did not refuse")
    for route, steps in routes.items():
        try:
            prev = src
            for step in steps:
                convert(prev, step, drop)
                prev = step
            # torch < 2.0's weights-only unpickler lacks BINFLOAT (its own
            # optimizer files fail it too): read those back fully there.
            with allowing_numpy():
                back, tb = load_with_tags(prev, weights_only=WEIGHTS_ONLY_OK)
                if HAS_MMAP:
                    torch.load(prev, weights_only=True, mmap=True, map_location="cpu")
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name} via {route}: {e}")
            continue
        r = same(orig, back, name, ta, tb, drop)
        if r:
            failures.append(f"{name} via {route}: {r}")
        if name == "tied.pt" and back["encoder.weight"] is not back["decoder.weight"]:
            failures.append(f"{name} via {route}: tied tensors are two objects")


skipped = []
HAS_MMAP = "mmap" in inspect.signature(torch.load).parameters
WEIGHTS_ONLY_OK = int(torch.__version__.split(".")[0]) >= 2
if not WEIGHTS_ONLY_OK:
    print(f"note: torch {torch.__version__} < 2.0: exports are read back with weights_only=False")
for fixture, drop in FIXTURES.items():
    check(fixture, drop)
for s in skipped:
    print("skipped fixture:", s)

# hippynn's own files (tests/data/hippynn; tests/hippynn/ has the detailed
# checks): loading the originals needs hippynn importable (its classes).
try:
    import hippynn  # noqa: F401
    have_hippynn = True
except ImportError:
    have_hippynn = False
    print("note: hippynn not importable; hippynn fixtures not checked (pip install hippynn)")
if have_hippynn:
    check("../hippynn/best_checkpoint.pt", True)
    check("../hippynn/best_model.pt", False)

# The refusals: hostile pickles and unsupported archives never convert.
for bad, expect in [("hostile_os_system.pt", "os.system"), ("hostile_eval.pt", "eval"),
                    ("hostile_posix_system.pt", "posix"),
                    ("hostile_subprocess.pt", "subprocess"),
                    ("legacy.pt", "legacy"), ("torchscript.pt", "TorchScript")]:
    r = subprocess.run([TOOL, "convert", os.path.join(PT, bad), os.path.join(WORK, bad)],
                       capture_output=True, text=True)
    if r.returncode == 0 or expect not in r.stderr:
        failures.append(f"{bad}: expected a refusal mentioning {expect!r}, got rc="
                        f"{r.returncode} {r.stderr.strip()}")
if os.path.exists("/tmp/rckpt_pwned"):
    failures.append("hostile pickle executed a command")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"OK: {len(FIXTURES)} fixtures x 3 routes round-trip through torch {torch.__version__}")
