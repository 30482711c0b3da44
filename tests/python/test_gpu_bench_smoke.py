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
    # Every rckpt row says what the staging did: a fallback is never hidden.
    for row in rows:
        if row["case"].startswith("rckpt.load"):
            assert row["unpinned leases"] == 0, row
            assert isinstance(row["device-unshuffled"], int), row


def test_sharded_rows_restore_a_format_1_1_file(tmp):
    text, rows = run(tmp, "sharded")
    cases = [row.get("case") for row in rows]
    for case in ("pinned cudaMemcpyAsync (the limit)", "rckpt.load, plain file (the reference)",
                 "rckpt.load, sharded file", "rckpt.distributed.load, sharded file, one process",
                 "verdict"):
        assert case in cases, (case, cases)
    assert "format 1.1" in text
    for row in rows:
        if row["case"].startswith("rckpt"):
            assert float(row["seconds"]) > 0 and row["unpinned leases"] == 0, row


def test_stall_rows_measure_save_async_first_and_later_saves_apart(tmp):
    text, rows = run(tmp, "stall")
    ours = [r for r in rows if r["method"] == "rckpt.save_async"]
    assert [r["saves"] for r in ours] == ["first", "later 1"], ours
    assert all(float(r["stall (ms)"]) >= 0 and r["unpinned leases"] == 0 for r in ours), ours
    assert any(r["method"].startswith("device-to-host copy") for r in rows)
    assert "| rckpt.save_async | first |" in text
