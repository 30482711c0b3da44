#!/usr/bin/env python3
"""Writes the PyTorch fixtures of tests/convert (each well under 100 KB).

Run from this directory with torch and numpy installed:
    pip install torch numpy        # any current version; these were made with
    python3 make_fixtures.py       # the versions printed into VERSIONS.txt
The files are committed; rerunning overwrites them (bytes may differ, content
does not: every tensor comes from a fixed seed).
"""
import collections
import io
import os
import random
import struct
import zipfile

import numpy as np
import torch

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def out(name):
    return os.path.join(HERE, name)


def dtype_tensors():
    base = torch.tensor([0.0, 1.5, -2.25, 3.0])
    d = collections.OrderedDict()
    for dt in [torch.float64, torch.float32, torch.float16, torch.bfloat16,
               torch.float8_e4m3fn, torch.float8_e5m2, torch.int8, torch.int16,
               torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64,
               torch.complex128]:
        d[str(dt).replace("torch.", "")] = base.to(dt)
    for dt in [torch.uint16, torch.uint32, torch.uint64]:
        d[str(dt).replace("torch.", "")] = torch.tensor([0, 1, 2, 3], dtype=torch.int64).to(dt)
    d["float32_special"] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
    return d


def main():
    # Every dtype, as a plain dict of tensors (a "bare state dict").
    torch.save(dtype_tensors(), out("dtypes.pt"))

    # nn.Module state_dict: an OrderedDict with _metadata, saved under another
    # top folder name than "archive/" (torch uses the file's basename).
    lin = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    torch.save(lin.state_dict(), out("module_state_dict.pth"))

    # Model + Adam optimizer state after two steps + scalars.
    opt = torch.optim.Adam(lin.parameters(), lr=1e-3, betas=(0.9, 0.999))
    for _ in range(2):
        opt.zero_grad()
        lin(torch.randn(5, 4)).sum().backward()
        opt.step()
    torch.save({"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                "best_loss": 0.125}, out("optimizer_adam.pt"))

    # Nested containers and every scalar kind.
    nested = {
        "list": [1, 2.5, "three", None, True],
        "tuple": (1, (2, 3), []),
        "set": {1, 2, 3},
        "frozenset_like": frozenset(),
        "floats": [float("inf"), float("-inf"), float("nan"), -0.0, 1e300],
        "ints": [0, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**40, -2**62, 2**63 - 1],
        "big_ints": [2**64, -2**70, 2**100, 2**63],
        "unicode": "h\u00e9llo \u4e16\u754c \U0001F600",
        "bytes": b"\x00\x01\xff\x80abc",
        "empty_bytes": b"",
        "bytearray": bytearray(b"\x00\xfe"),
        "complex": 1 + 2j,
        "size": torch.Size([2, 3]),
        "device_cuda1": torch.device("cuda", 1),
        "device_cpu": torch.device("cpu"),
        "dtype": torch.float16,
        "int_keys": {0: "a", 1: "b", -5: "c"},
        "tuple_keys": {(1, 2): "x"},
        "deep": {"a": {"b": {"c": [{"d": torch.arange(3)}]}}},
        "tensor_in_list": [torch.ones(2), torch.zeros(1)],
    }
    torch.save(nested, out("nested.pt"))

    # Views: offsets, strides, non-contiguous, expanded (stride 0), shared storage.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {
        "base": base,
        "row": base[1],
        "col": base[:, 2],
        "transposed": base.t(),
        "slice": base[1:3, 2:5],
        "step": base[:, ::2],
        "expanded": torch.arange(3, dtype=torch.int32).expand(2, 3),
        "narrow_tail": base.view(-1)[20:],
    }
    torch.save(views, out("views.pt"))

    # Tied weights: one tensor object under two keys (the second is a reference).
    w = torch.randn(3, 3)
    torch.save(collections.OrderedDict([("encoder.weight", w), ("decoder.weight", w),
                                        ("other", torch.randn(2))]), out("tied.pt"))

    # 0-d and empty tensors.
    torch.save({"scalar": torch.tensor(3.5), "int_scalar": torch.tensor(7),
                "empty": torch.zeros(0, 3), "empty1d": torch.zeros(0, dtype=torch.int64)},
               out("zero_d_empty.pt"))

    # RNG states: torch CPU, CUDA-shaped states (16 bytes: seed 123, offset 40),
    # and the HF-Trainer style file with python and numpy states.
    cuda_state = torch.tensor(list(struct.pack("<QQ", 123, 40)), dtype=torch.uint8)
    torch.save({"model": {"w": torch.ones(2)}, "torch_rng_state": torch.get_rng_state(),
                "cuda_rng_state": cuda_state.clone(),
                "cuda_rng_states": [cuda_state.clone(), cuda_state.clone()],
                "not_rng": torch.zeros(16, dtype=torch.uint8)}, out("rng_states.pt"))
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                "cpu": torch.get_rng_state()}, out("hf_rng_state.pth"))

    # A training-library object (an unknown class, kept as an inert object).
    class MetricTracker:
        pass
    MetricTracker.__module__ = "mylib.metrics"
    MetricTracker.__qualname__ = "MetricTracker"
    import sys, types
    mod = types.ModuleType("mylib.metrics")
    mod.MetricTracker = MetricTracker
    sys.modules["mylib"] = types.ModuleType("mylib")
    sys.modules["mylib.metrics"] = mod
    mt = MetricTracker()
    mt.best_metric = 0.5
    mt.history = [1.0, 0.5]
    mt.best_weights = torch.ones(2)
    torch.save({"model": {"w": torch.zeros(2)}, "metric_tracker": mt}, out("custom_class.pt"))

    # Storages tagged with CUDA devices (no GPU needed: the tag is rewritten).
    real_tag = torch.serialization.location_tag
    tags = iter(["cuda:1", "cuda:0", "cpu"])
    torch.serialization.location_tag = lambda storage: next(tags)
    try:
        torch.save({"on_cuda1": torch.ones(2), "on_cuda0": torch.zeros(3),
                    "on_cpu": torch.full((2,), 7.0)}, out("cuda_tagged.pt"))
    finally:
        torch.serialization.location_tag = real_tag

    # Legacy (pre-1.6, non-zip) format.
    torch.save({"w": torch.ones(2)}, out("legacy.pt"), _use_new_zipfile_serialization=False)

    # TorchScript archive.
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), out("torchscript.pt"))

    # Hostile pickles: a zip archive whose data.pkl calls os.system / builtins.eval.
    def hostile(name, module, func, arg):
        pkl = (b"\x80\x02c" + module + b"\n" + func + b"\nq\x00X" +
               struct.pack("<I", len(arg)) + arg + b"\x85R.")
        with zipfile.ZipFile(out(name), "w", zipfile.ZIP_STORED) as z:
            z.writestr("archive/data.pkl", pkl)
            z.writestr("archive/byteorder", "little")
            z.writestr("archive/version", "3\n")
    hostile("hostile_os_system.pt", b"os", b"system", b"echo pwned > /tmp/rckpt_pwned")
    hostile("hostile_posix_system.pt", b"posix", b"system", b"echo pwned")
    hostile("hostile_eval.pt", b"__builtin__", b"eval", b"__import__('os').system('echo')")
    hostile("hostile_subprocess.pt", b"subprocess", b"getoutput", b"echo pwned")

    # The same archive re-zipped by Python's zipfile: another top folder name,
    # zip64 extra fields, data descriptors (an unseekable output forces them),
    # no alignment padding. And a deflated copy, which rckpt refuses.
    class Unseekable(io.RawIOBase):
        def __init__(self, f):
            self.f = f

        def writable(self):
            return True

        def write(self, b):
            return self.f.write(b)

    src = zipfile.ZipFile(out("views.pt"))
    with open(out("rezipped_zip64.pt"), "wb") as raw:
        with zipfile.ZipFile(Unseekable(raw), "w", zipfile.ZIP_STORED) as z:
            for info in src.infolist():
                name = "some folder/" + info.filename.split("/", 1)[1]
                with z.open(zipfile.ZipInfo(name), "w", force_zip64=True) as w:
                    w.write(src.read(info.filename))
    with zipfile.ZipFile(out("rezipped_deflate.pt"), "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info.filename))

    with open(out("VERSIONS.txt"), "w") as f:
        f.write(f"torch {torch.__version__}\nnumpy {np.__version__}\n")


if __name__ == "__main__":
    main()
