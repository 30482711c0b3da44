#!/usr/bin/env python3
"""Writes the NumPy fixtures of tests/convert: NumPy arrays, scalars and
generator states inside torch.save files, as each NumPy major pickles them.

Run from this directory with torch and numpy installed, once per NumPy major:
    /usr/bin/python3 make_numpy_fixtures.py          # Debian's numpy 1.24:
                                                     #   numpy_values_np1.pt
    <venv with numpy 2>/bin/python make_numpy_fixtures.py   # numpy_values_np2.pt
Each run writes the file of its NumPy major and appends the versions to
VERSIONS_numpy.txt. Every value comes from a fixed seed.
"""
import os
import pickle

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def generator_state(bit_generator):
    g = np.random.Generator(bit_generator(1234))
    g.random(3)
    g.integers(0, 1 << 30, dtype=np.uint32)  # leaves a buffered 32-bit half (has_uint32)
    return g.bit_generator.state


def main():
    major = int(np.__version__.split(".")[0])
    np.random.seed(7)
    np.random.standard_normal()  # a cached Gaussian: has_gauss = 1
    legacy = np.random.get_state()
    shared = np.arange(4, dtype=np.float32)
    rs = np.random.RandomState(5)
    rs.standard_normal()
    state = {
        "arrays": {
            "u32": np.arange(624, dtype=np.uint32) * np.uint32(6700417),
            "f64": np.array([[0.5, -1.25, 3.0], [1e-300, np.inf, -0.0]]),
            "i8": np.array([-128, 0, 127], dtype=np.int8),
            "bool": np.array([True, False, True]),
            "f16": np.array([1.5, -2.0, 65504.0], dtype=np.float16),
            "big_i4": np.array([1, -2, 300000], dtype=">i4"),
            "fortran": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
            "zero_d": np.array(2.5, dtype=np.float32),
            "empty": np.zeros((0, 3), dtype=np.float64),
            "dt": np.array(["2024-01-01T00:00:00.000000001", "1970-01-01"], dtype="M8[ns]"),
            "td": np.array([1, 2], dtype="m8[25s]"),
            "ld": np.array([1.0, 1.0 / 3.0], dtype=np.longdouble),
            "c64": np.array([1 + 2j, -0.5j], dtype=np.complex64),
            "big_c128": np.array([3 - 4j], dtype=">c16"),
            "u64": np.array([0, 2**64 - 1], dtype=np.uint64),
            "u16": np.array([65535, 1], dtype=np.uint16),
            "shared_a": shared,
            "shared_b": shared,
        },
        "scalars": {
            "f64": np.float64(0.1),
            "i64": np.int64(-7),
            "u64": np.uint64(2**64 - 1),
            "u8": np.uint8(200),
            "bool": np.bool_(True),
            "f16": np.float16(1.5),
            "f32": np.float32(0.1),
            "c64": np.complex64(1 + 2j),
            "date": np.datetime64("2024-01-01", "D"),
            "str": np.str_("h\u00e9llo"),
            "bytes": np.bytes_(b"ab"),
            "ld": np.longdouble(1) / np.longdouble(3),
        },
        "inert": {
            "text": np.array(["a", "bc"]),
            "objects": np.array([1, "x"], dtype=object),
            "matrix": np.matrix([[1, 2]]),  # a subclass of ndarray
            "records": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
            "dtype": np.dtype("float32"),
        },
        "rng": {
            "numpy": legacy,
            "mt19937": generator_state(np.random.MT19937),
            "pcg64": generator_state(np.random.PCG64),
            "pcg64dxsm": generator_state(np.random.PCG64DXSM),
            "sfc64": generator_state(np.random.SFC64),
            "philox": generator_state(np.random.Philox),
            # RandomState.get_state(legacy=False): a dict with has_gauss, not
            # a bit generator's state; it stays data.
            "legacy_dict": rs.get_state(legacy=False),
        },
    }
    torch.save(state, os.path.join(HERE, f"numpy_values_np{major}.pt"))
    # Pickle protocol 5: arrays through numpy's _frombuffer.
    torch.save({"f32": np.array([1.0, 2.0], dtype=np.float32),
                "fortran": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))},
               os.path.join(HERE, f"numpy_protocol5_np{major}.pt"),
               pickle_protocol=pickle.HIGHEST_PROTOCOL)
    with open(os.path.join(HERE, "VERSIONS_numpy.txt"), "a") as f:
        f.write(f"numpy_values_np{major}.pt: torch {torch.__version__} numpy {np.__version__}\n")


if __name__ == "__main__":
    main()
