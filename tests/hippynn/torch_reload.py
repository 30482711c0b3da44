#!/usr/bin/env python3
"""hippynn's best_checkpoint.pt through rckpt, read back by the real torch.

usage: torch_reload.py RCKPT_CLI HIPPYNN_DATA_DIR WORK_DIR
Runs `rckpt convert best_checkpoint.pt best.rckpt` then
`rckpt convert best.rckpt best.pt --drop-objects`, loads the result with
torch.load(weights_only=True, map_location="cpu") and compares it with the
original (torch < 2.0, whose weights-only unpickler lacks BINFLOAT, reads it
with weights_only=False): model state dict, controller (scalars, optimizer state and
param_groups, scheduler state), torch_rng_state bytes; the MetricTracker comes
back as None and its best_model tensors as top-level entries named
"metric_tracker.best_model.<key>". Exits 77 (ctest: skipped) when torch is
not importable. Needs: pip install torch (hippynn itself is not needed).
"""
import os
import subprocess
import sys
import types

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable ({e}); pip install torch")
    sys.exit(77)

CLI, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def install_metric_tracker_stub():
    """Lets torch.load unpickle the original without hippynn installed."""
    try:
        import hippynn.experiment.metric_tracker  # noqa: F401
        return
    except Exception:
        pass
    mod = types.ModuleType("hippynn.experiment.metric_tracker")

    class MetricTracker:
        pass
    MetricTracker.__module__ = mod.__name__
    mod.MetricTracker = MetricTracker
    for parent in ("hippynn", "hippynn.experiment"):
        sys.modules.setdefault(parent, types.ModuleType(parent))
    sys.modules[mod.__name__] = mod


def raw(t):
    return t.detach().contiguous().numpy().tobytes()


def same_tensor(a, b):
    return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
            and a.device == b.device and raw(a) == raw(b))


def compare(a, b, path):
    if isinstance(a, torch.Tensor):
        check(same_tensor(a, b), f"{path}: tensor differs ({a.dtype} {tuple(a.shape)} vs "
                                 f"{getattr(b, 'dtype', type(b))} {tuple(getattr(b, 'shape', ()))})")
    elif isinstance(a, dict):
        check(isinstance(b, dict), f"{path}: {type(b).__name__} instead of a dict")
        if isinstance(b, dict):
            check(list(a.keys()) == list(b.keys()), f"{path}: keys {list(b)} != {list(a)}")
            for k in a:
                if k in b:
                    compare(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        check(type(a) is type(b) and len(a) == len(b), f"{path}: {b!r} != {a!r}")
        if type(a) is type(b):
            for i, (x, y) in enumerate(zip(a, b)):
                compare(x, y, f"{path}.{i}")
    else:
        check(type(a) is type(b) and (a == b or (a != a and b != b)), f"{path}: {b!r} != {a!r}")


def run(*args):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: rckpt {' '.join(args)} exited {r.returncode}\n{r.stdout}{r.stderr}")
        sys.exit(1)
    return r.stdout + r.stderr


def main():
    install_metric_tracker_stub()
    src = os.path.join(DATA, "best_checkpoint.pt")
    mid = os.path.join(WORK, "best.rckpt")
    out = os.path.join(WORK, "best.pt")
    for p in (mid, out):
        if os.path.exists(p):
            os.remove(p)
    run("convert", src, mid)
    run("convert", mid, out, "--drop-objects")

    orig = torch.load(src, weights_only=False, map_location="cpu")
    # torch < 2.0's weights-only unpickler lacks BINFLOAT (Debian's 1.13 fails
    # on its own optimizer files too): read the export fully there.
    weights_only = int(torch.__version__.split(".")[0]) >= 2
    if not weights_only:
        print(f"note: torch {torch.__version__} < 2.0: the export is read with weights_only=False")
    back = torch.load(out, weights_only=weights_only, map_location="cpu")
    for key in ("model", "controller", "torch_rng_state"):
        check(key in back, f"missing top-level key {key}")
        if key in back:
            compare(orig[key], back[key], key)
    check(back.get("metric_tracker", "absent") is None, "metric_tracker is not None")
    check(back["torch_rng_state"].numel() == 5056, "torch_rng_state is not 5056 bytes")
    best = orig["metric_tracker"].__dict__["best_model"]
    for k, v in best.items():
        name = f"metric_tracker.best_model.{k}"
        check(name in back, f"missing {name}")
        if name in back:
            compare(v, back[name], name)
    # The reloaded state restores like hippynn's restore_checkpoint does.
    torch.set_rng_state(back["torch_rng_state"])
    check(raw(torch.get_rng_state()) == raw(orig["torch_rng_state"]), "RNG restore differs")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    n = len(orig["model"]) + len(best) + sum(len(s) for s in
                                             orig["controller"]["optimizer"]["state"].values())
    print(f"ok: {n} tensors, the RNG state and the controller equal after .pt -> .rckpt -> .pt")


if __name__ == "__main__":
    main()
