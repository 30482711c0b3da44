"""rckpt.CheckpointManager over rckpt.distributed, on 2 and 3 ranks under
mpirun: every rank agrees on the steps, rank 0 alone prunes and writes
"latest", and a damaged newest checkpoint makes every rank fall back to the
same older step. Run as a script (under mpirun) this file is the MPI side."""

import json
import os
import subprocess
import sys

import pytest

from conftest import mpiexec_or_skip



def rank_main(directory, out):
    import warnings

    import torch
    from mpi4py import MPI

    import rckpt
    import rckpt.distributed as rd

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    rows = 6 * world
    full = {s: torch.arange(rows * 4, dtype=torch.float32).reshape(rows, 4) + s for s in range(5)}

    def state(step):
        return {"model": {"w": rd.Shard.split(full[step], rank, world)},
                "controller": {"step": step}}

    m = rckpt.CheckpointManager(directory, keep=2, comm=comm)
    for step in range(5):
        m.save(step, state(step), rank_state={"cursor": step * 10 + rank})
    steps_after_saves = m.steps()
    comm.Barrier()
    if rank == 0:  # damage the newest: every rank must skip it together
        with open(m.path(4), "r+b") as f:
            f.truncate(200)
    comm.Barrier()
    wants = {"model.w": rd.part((rows, 4), rank, world)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        back = m.load(wants=wants)
    block = back.blocks["model.w"]
    expected = rd.Shard.split(full[3], rank, world).block
    record = {"rank": rank, "steps": steps_after_saves, "loaded": back.step,
              "controller": back["controller"], "rank_state": back.rank_state,
              "block_ok": bool(torch.equal(block, expected)),
              "warned": [str(w.message) for w in caught],
              "files": sorted(os.listdir(directory))}
    m.close()
    with open(os.path.join(out, f"{rank}.json"), "w") as record_file:
        json.dump(record, record_file)


if __name__ == "__main__":
    rank_main(sys.argv[1], sys.argv[2])
    sys.exit(0)

MPIEXEC = mpiexec_or_skip("distributed manager tests")


@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_agree_on_steps_rank0_prunes_and_all_fall_back_together(tmp_path, ranks):
    directory, out = tmp_path / "ckpt", tmp_path / "out"
    out.mkdir()
    cmd = [MPIEXEC, "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--mca", "btl", "self,vader", sys.executable, __file__, str(directory), str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    records = [json.load(open(out / f"{r}.json")) for r in range(ranks)]
    for r in records:
        assert r["steps"] == [3, 4], r
        assert r["loaded"] == 3 and r["controller"] == {"step": 3}, r
        assert r["rank_state"] == {"cursor": 30 + r["rank"]}, r
        assert r["block_ok"], r
        assert any("step-000004.rckpt" in w for w in r["warned"]), r
        assert r["files"] == ["latest", "step-000003.rckpt", "step-000004.rckpt"], r
    assert (directory / "latest").read_text() == "4\n"
