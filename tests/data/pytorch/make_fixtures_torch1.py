#!/usr/bin/env python3
"""Writes fixtures with an older torch (Debian bookworm's python3-torch, 1.13):
archives without the 'byteorder' record, storages in lexicographic key order,
numpy 1.x module paths. Run from this directory:
    apt-get install python3-torch python3-numpy
    /usr/bin/python3 make_fixtures_torch1.py
"""
import collections
import os

import numpy as np
import torch

torch.manual_seed(0)
np.random.seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    lin = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.Adam(lin.parameters(), lr=1e-3)
    opt.zero_grad()
    lin(torch.randn(5, 4)).sum().backward()
    opt.step()
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    # More than 10 storages, so lexicographic order ('0', '1', '10', '11', '2')
    # differs from numeric order.
    many = collections.OrderedDict((f"t{i}", torch.full((2,), float(i))) for i in range(12))
    torch.save({"model": lin.state_dict(), "optimizer": opt.state_dict(),
                "views": {"base": base, "col": base[:, 1], "t": base.t()},
                "many": many, "tied": [many["t3"], many["t3"]],
                "torch_rng_state": torch.get_rng_state(),
                "numpy": np.random.get_state(), "epoch": 1},
               os.path.join(HERE, "torch1_checkpoint.pt"))
    with open(os.path.join(HERE, "VERSIONS_torch1.txt"), "w") as f:
        f.write(f"torch {torch.__version__}\nnumpy {np.__version__}\n")


if __name__ == "__main__":
    main()
