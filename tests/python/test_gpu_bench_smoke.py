"""bench/gpu_bench.py, the GPU proof's measurements, run on the CPU with a few
MiB (--smoke): the script itself works, so the day a GPU is lent nothing in it
is discovered broken. The numbers mean nothing here."""

import json
import os
import subprocess
import sys

from conftest import SOURCE

BENCH = os.path.join(SOURCE, "bench", "gpu_bench.py")


def run(tmp, what):
    table, rows = tmp / f"{what}.md", tmp / f"{what}.json"
    r = subprocess.run([sys.executable, BENCH, what, "--smoke", "--table", str(table),
                        "--json", str(rows), "--dir", str(tmp / what)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return table.read_text(), json.loads(rows.read_text())


def test_load_rows_compare_every_way_with_the_copy_limit(tmp):
    text, rows = run(tmp, "load")
    cases = [row.get("case") for row in rows]
    for case in ("pinned cudaMemcpyAsync (the limit)", "rckpt.load, raw chunks",
                 "rckpt.load, zstd + shuffle, kernel un-shuffle",
                 "rckpt.load, zstd + shuffle, host un-shuffle", "torch.load(map_location)",
                 "verdict"):
        assert case in cases, (case, cases)
    raw = next(r for r in rows if r["case"] == "rckpt.load, raw chunks")
    assert float(raw["vs pinned memcpy"]) > 0
    assert "| rckpt.load, raw chunks |" in text


def test_stall_rows_measure_save_async(tmp):
    text, rows = run(tmp, "stall")
    ours = next(r for r in rows if r["method"] == "rckpt.save_async")
    assert float(ours["stall (ms)"]) >= 0, ours
    assert "| rckpt.save_async |" in text
