"""Errors through Python: exceptions carry the status code, damaged and
hostile files raise cleanly (never crash the interpreter)."""

import os
import random
import subprocess
import sys

import pytest
import torch

import rckpt
from conftest import DATA


def test_missing_file_is_not_found_and_file_not_found_error(tmp):
    with pytest.raises(rckpt.NotFoundError) as e:
        rckpt.load(tmp / "absent.rckpt")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, rckpt.Error)
    assert e.value.code == "NotFound"


@pytest.mark.parametrize("name", sorted(os.listdir(os.path.join(DATA, "golden-errors"))))
def test_golden_error_files_raise_their_code(name):
    expected = {"corruption": rckpt.CorruptionError, "unsupported": rckpt.UnsupportedError}
    cls = expected[name.split(".")[-2]]
    with pytest.raises(cls):
        rckpt.load(os.path.join(DATA, "golden-errors", name), map_location="cpu")


def test_golden_files_load_or_refuse_dtypes_torch_lacks():
    for name in sorted(os.listdir(os.path.join(DATA, "golden"))):
        if not name.endswith(".rckpt"):
            continue
        try:
            ck = rckpt.load(os.path.join(DATA, "golden", name), map_location="cpu")
            assert len(ck.tensors) > 0
        except rckpt.UnsupportedError as e:
            assert "has no torch dtype" in str(e), e


def damaged_copies(src, count, seed=1):
    """Truncations and bit flips of a valid file, deterministic."""
    data = open(src, "rb").read()
    rnd = random.Random(seed)
    for i in range(count):
        b = bytearray(data)
        if i % 3 == 0:
            b = b[:rnd.randrange(len(b))]
        else:
            for _ in range(1 + i % 4):
                pos = rnd.randrange(len(b))
                b[pos] ^= 1 << rnd.randrange(8)
        yield bytes(b)


def test_damaged_files_raise_rckpt_errors_never_crash(tmp):
    state = {"model": {"w": torch.randn(300, 40), "b": torch.arange(10)},
             "controller": {"epoch": 3, "names": ["a", "b"], "nested": {(1, 2): b"x"}}}
    good = tmp / "good.rckpt"
    rckpt.save(good, state, rng=rckpt.capture_rng(), codec="zstd", chunk_bytes=8192)
    outcomes = {"ok": 0}
    for i, blob in enumerate(damaged_copies(good, 300)):
        p = tmp / "bad.rckpt"
        p.write_bytes(blob)
        for kwargs in ({}, {"map_file": True}, {"model_device": "cpu"}):
            try:
                ck = rckpt.load(p, **kwargs)
                outcomes["ok"] += 1  # a flip in padding or unused bytes
                assert set(ck.tensors) == {"model.w", "model.b"}
            except rckpt.Error as e:
                outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1
        try:
            rckpt.load_into(p, {"model": {"w": torch.empty(300, 40), "b": torch.empty(10, dtype=torch.int64)}})
        except rckpt.Error:
            pass
    assert outcomes.get("CorruptionError", 0) > 200, outcomes


def test_load_fuzz_corpus_and_pytorch_files_in_a_child_survive():
    # A crash would kill the interpreter: run the corpus in a child and
    # require a clean exit.
    code = r"""
import os, sys, rckpt
root = sys.argv[1]
n = 0
for sub in ("corpus/load", "golden-errors", "pytorch", "safetensors", "hippynn"):
    d = os.path.join(root, sub)
    if not os.path.isdir(d):
        continue
    for name in sorted(os.listdir(d)):
        try:
            rckpt.load(os.path.join(d, name))
        except rckpt.Error:
            pass
        n += 1
print("files", n)
"""
    r = subprocess.run([sys.executable, "-c", code, DATA], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) > 20
