#!/usr/bin/env python3
"""Round trips checked by the real safetensors library.

usage: safetensors_roundtrip.py CONVERT_TOOL TESTS_DATA_DIR WORK_DIR
1. Each safetensors fixture: .safetensors -> .safetensors, -> .rckpt ->
   .safetensors and -> .pt -> .safetensors; safetensors.safe_open of the result
   must give the same names, dtypes, shapes and bytes, and keep the original
   __metadata__ entries (exactly, with no rckpt.* key, for a plain model file).
2. Each PyTorch fixture exported to .safetensors must load with safetensors
   and hold exactly the tensors torch.load finds (RNG states as U8 tensors).
Exits 77 (ctest: skipped) when torch or safetensors is not importable.
Needs: pip install torch safetensors numpy
"""
import os
import subprocess
import sys

try:
    import torch
    from safetensors import safe_open
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch/safetensors not importable ({e}); pip install torch safetensors numpy")
    sys.exit(77)

TOOL, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
failures = []


def convert(src, dst, *flags):
    r = subprocess.run([TOOL, "convert", src, dst, *flags], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"convert {src} -> {dst}: {r.stderr.strip()}")


def read(path):
    with safe_open(path, framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata() or {}


def same_tensors(a, b, where):
    if sorted(a) != sorted(b):
        return f"{where}: names {sorted(a)} != {sorted(b)}"
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{where}.{k}: {x.dtype}{tuple(x.shape)} != {y.dtype}{tuple(y.shape)}"
        if x.numel() and x.contiguous().reshape(-1).view(torch.uint8).tolist() != \
                y.contiguous().reshape(-1).view(torch.uint8).tolist():
            return f"{where}.{k}: bytes differ"
    return None


ST = os.path.join(DATA, "safetensors")
for name in sorted(os.listdir(ST)):
    if not name.endswith(".safetensors"):
        continue
    src = os.path.join(ST, name)
    try:
        orig, meta = read(src)
    except (AttributeError, TypeError) as e:
        # e.g. float8 tensors with a torch older than 2.1 (Debian's 1.13).
        print(f"skipped fixture {name}: this torch ({torch.__version__}) cannot hold it: {e}")
        continue
    base = os.path.join(WORK, name)
    for route, steps in {"st": [base + ".out.safetensors"],
                         "rckpt": [base + ".rckpt", base + ".via_rckpt.safetensors"],
                         "pt": [base + ".pt", base + ".via_pt.safetensors"]}.items():
        try:
            prev = src
            for s in steps:
                convert(prev, s)
                prev = s
            back, meta_back = read(prev)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name} via {route}: {e}")
            continue
        r = same_tensors(orig, back, name)
        if r:
            failures.append(f"{name} via {route}: {r}")
        if route != "pt":  # a .pt file has no place for __metadata__
            for k, v in meta.items():
                if meta_back.get(k) != v:
                    failures.append(f"{name} via {route}: metadata {k!r} lost")
        if not any(k.startswith("rckpt.") for k in meta_back):
            # A plain model file: nothing derivable is added, so the
            # original __metadata__ comes back exactly.
            if route != "pt" and meta_back != meta:
                failures.append(f"{name} via {route}: metadata {meta_back!r} != {meta!r}")
        elif "rckpt.tree" not in meta_back:
            failures.append(f"{name} via {route}: rckpt keys without rckpt.tree in __metadata__")

# A plain model file written by the library itself: its __metadata__ must come
# back exactly through rckpt (no rckpt.* key added).
from safetensors.torch import save_file  # noqa: E402

plain = os.path.join(WORK, "plain.safetensors")
save_file({"layer.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
           "layer.bias": torch.ones(3)}, plain, metadata={"format": "pt", "note": "kept"})
convert(plain, plain + ".rckpt")
convert(plain + ".rckpt", plain + ".back.safetensors")
_, plain_meta = read(plain + ".back.safetensors")
if plain_meta != {"format": "pt", "note": "kept"}:
    failures.append(f"plain model file via rckpt: metadata {plain_meta!r}")

PT = os.path.join(DATA, "pytorch")
for name in ["module_state_dict.pth", "optimizer_adam.pt", "nested.pt", "views.pt",
             "tied.pt", "zero_d_empty.pt", "rng_states.pt", "cuda_tagged.pt"]:
    out = os.path.join(WORK, name + ".safetensors")
    try:
        convert(os.path.join(PT, name), out)
        tensors, meta = read(out)
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name} -> safetensors: {e}")
        continue
    obj = torch.load(os.path.join(PT, name), map_location="cpu", weights_only=False)
    found = {}

    def walk(v, path):
        if isinstance(v, torch.Tensor):
            found.setdefault(id(v), (".".join(path), v))
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [str(k)])
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            for i, x in enumerate(v):
                walk(x, path + [str(i)])
    walk(obj, [])
    expect = {n: t for n, t in found.values()}
    r = same_tensors(expect, tensors, name)
    if r:
        failures.append(f"{name} -> safetensors: {r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("OK: safetensors round trips verified by safetensors", end=" ")
import safetensors  # noqa: E402
print(safetensors.__version__)
