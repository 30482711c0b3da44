#!/usr/bin/env python3
"""Writes the safetensors fixtures of tests/convert with the real safetensors
library (each well under 100 KB). Run from this directory:
    pip install torch safetensors numpy
    python3 make_fixtures.py
"""
import os

import torch
from safetensors.torch import save_file

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    base = torch.tensor([0.0, 1.5, -2.25, 3.0])
    t = {}
    for dt in [torch.float64, torch.float32, torch.float16, torch.bfloat16,
               torch.float8_e4m3fn, torch.float8_e5m2, torch.int8, torch.int16, torch.int32,
               torch.int64, torch.uint8, torch.bool, torch.complex64]:
        t[str(dt).replace("torch.", "")] = base.to(dt)
    for dt in [torch.uint16, torch.uint32, torch.uint64]:
        t[str(dt).replace("torch.", "")] = torch.tensor([0, 1, 2, 3]).to(dt)
    t["f32_special"] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
    save_file(t, os.path.join(HERE, "dtypes.safetensors"),
              metadata={"format": "pt", "note": "h\u00e9llo"})

    save_file({"scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4),
               "layer.weight": torch.randn(3, 2), "layer.bias": torch.randn(3),
               "torch_rng_state": torch.get_rng_state()},
              os.path.join(HERE, "model.safetensors"))

    with open(os.path.join(HERE, "VERSIONS.txt"), "w") as f:
        import safetensors
        f.write(f"torch {torch.__version__}\nsafetensors {safetensors.__version__}\n")


if __name__ == "__main__":
    main()
