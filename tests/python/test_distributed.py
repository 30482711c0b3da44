"""rckpt.distributed: collective saves and resharded loads over mpi4py
communicators, run under mpirun. distributed_driver.py does the MPI side and
checks each rank's blocks bit for bit; this side compares what every rank
reported and checks what a single process sees of the file."""

import collections
import json
import os
import subprocess
import sys
import tempfile

import pytest

import rckpt
from conftest import DATA, assert_same, doc_example, mpiexec_or_skip, run_cli

MPIEXEC = mpiexec_or_skip("distributed tests")

import distributed_driver as driver  # noqa: E402  (imports no MPI)

DRIVER = os.path.join(os.path.dirname(__file__), "distributed_driver.py")


def mpirun(ranks, script, *args):
    """Runs a Python script on ``ranks`` ranks; its output, once it succeeded on all."""
    cmd = [MPIEXEC, "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # One machine, no network: shared memory between the ranks.
    cmd += ["--mca", "btl", "self,vader", sys.executable, str(script), *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)  # type: ignore[arg-type]
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"  # type: ignore[arg-type]
    return p.stdout


def run_driver(ranks, scenario, *args):
    """Runs a scenario of the driver on ``ranks`` ranks; every rank's records."""
    with tempfile.TemporaryDirectory() as out:
        mpirun(ranks, DRIVER, scenario, out, *args)
        records = []
        for rank in range(ranks):
            with open(os.path.join(out, f"{rank}.jsonl")) as f:
                records += [json.loads(line) for line in f]
        return records


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """DIR/ck.rckpt saved by 4 ranks, and what each rank reported."""
    d = tmp_path_factory.mktemp("distributed")
    return d, run_driver(driver.SAVED_RANKS, "save", d)


def test_save_on_4_ranks_loads_back_on_4_with_each_ranks_rng_and_state(saved):
    _, results = saved
    assert sorted(r["rank"] for r in results) == list(range(driver.SAVED_RANKS))
    for r in results:
        # The driver checked the draws after restore_rng equal those after capture_rng.
        assert {"python.random", "numpy.global", "torch.cpu"} <= set(r["restored"]), r
        assert r["bytes_read"] >= r["bytes_needed"] > 0


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_load_resharded_on_other_world_sizes_bit_for_bit(saved, ranks):
    d, _ = saved
    results = run_driver(ranks, "load", d)
    assert sorted(r["rank"] for r in results) == list(range(ranks))
    for r in results:
        assert r["world"] == ranks
        # A resharded read stays at chunk granularity: never the whole file.
        assert r["bytes_needed"] <= r["bytes_read"], r


def test_single_process_load_is_the_assembled_state(saved):
    d, _ = saved
    ck = rckpt.load(d / "ck.rckpt", map_location="cpu")
    # The sections the ranks saved, whole tensors: a job of one rank.
    assert list(ck) == list(driver.assembled_state())
    assert_same(ck.to_dict(), driver.assembled_state())
    assert ck.saved_world_size == driver.SAVED_RANKS
    assert ck.rank_states == [driver.rank_state(r) for r in range(driver.SAVED_RANKS)]
    assert ck.rank_state is None and len(ck.rng) == 0, "another world size: no own RNG"
    assert sorted(ck.saved_rng) == list(range(driver.SAVED_RANKS))
    assert all("torch.cpu" in records for records in ck.saved_rng.values())
    assert sorted(ck.tensors) == sorted(driver.TENSORS)
    assert ck.metadata["rckpt.world_size"] == str(driver.SAVED_RANKS)
    assert ck.metadata["job"] == "python-mpi-test"
    # Sections choose among the saved sections.
    model_only = rckpt.load(d / "ck.rckpt", sections=["model"], map_location="cpu")
    assert list(model_only) == ["model"]
    assert_same(model_only["model"], driver.assembled_state()["model"])
    # The file's tree as written, by option.
    raw = rckpt.load(d / "ck.rckpt", map_location="cpu", file_tree=True)
    assert list(raw) == ["common", "ranks"]
    assert_same(raw["common"], driver.assembled_state())
    assert raw["ranks"] == ck.rank_states
    assert {f"rank{r}/torch.cpu" for r in range(driver.SAVED_RANKS)} <= set(raw.rng)
    assert run_cli("verify", d / "ck.rckpt").returncode == 0
    # Every shard records the rank that wrote it and that rank's device.
    inspect = run_cli("inspect", "--json", d / "ck.rckpt")
    tensors = {t["name"]: t for t in json.loads(inspect.stdout)["tensors"]}
    shards = tensors["model.fc2.weight"]["shards"]
    assert [(s["rank"], s["device"]) for s in shards] == [(r, f"cuda:{r}") for r in range(4)]
    assert [s["offsets"] for s in shards] == [[0, 0], [0, 18], [0, 36], [0, 53]]
    assert "shards" not in tensors["model.embed.weight"], "replicated: written once, whole"


def test_a_failure_on_one_rank_raises_the_same_error_on_every_rank(tmp):
    ranks = 3
    results = run_driver(ranks, "failures", tmp, DATA)
    by_case = collections.defaultdict(list)
    for r in results:
        by_case[r.pop("case")].append(r)
    expected = {  # case: (exception class, text its message holds)
        "wrong_global_shape": ("InvalidArgumentError", "rank 1: tensor 'model.fc1.weight'"),
        "overlap": ("InvalidArgumentError", "shards 1 and 2 overlap"),
        "file_size_limit": ("IoError", "rank 1: "),
        "missing_directory": ("IoError", "open '"),
        "unstorable_value": ("TypeError", "rank 2: model.hook: cannot store"),
        "tensor_in_rank_state": ("TypeError", "rank 1: rank_state.buf"),
        "not_a_shard_on_one_rank": ("InvalidArgumentError", "rank 2: tensor 'model.fc1.weight'"),
        "missing_file": ("NotFoundError", "none.rckpt"),
        "manifest-bitflip.corruption": ("CorruptionError", ""),
        "truncated-half.corruption": ("CorruptionError", ""),
        "newer-major-version.unsupported": ("UnsupportedError", ""),
        "block_outside_tensor": ("InvalidArgumentError", "rank 1: "),
        "unknown_tensor": ("NotFoundError", "rank 0: "),
        "bad_request": ("TypeError", "rank 2: wants['model.fc1.weight']: a block is"),
        "map_location_raises": ("KeyError", "rank 1: 'no device for model.fc1.weight'"),
    }
    assert set(by_case) == set(expected) | {"previous_file"}
    for case, (error, text) in expected.items():
        seen = by_case[case]
        assert sorted(r["rank"] for r in seen) == list(range(ranks)), case
        assert {(r["error"], r["message"]) for r in seen} == {(error, seen[0]["message"])}, \
            f"{case}: ranks raised different errors: {seen}"
        assert text in seen[0]["message"], f"{case}: {seen[0]['message']}"
    for r in by_case["previous_file"]:
        assert r["intact"] and r["temps"] == [], r


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return doc_example("DISTRIBUTED.md", "train_dp.py", tmp_path_factory.mktemp("example"))


def test_documented_run_saved_on_4_ranks_resumes_on_2(example, tmp):
    first = mpirun(4, example, tmp, 3)
    assert "step 3 loss" in first and "resumed" not in first, first
    second = mpirun(2, example, tmp, 6)
    assert second.startswith("resumed at step 3, saved by 4 ranks, now 2\n"), second
    assert "step 6 loss" in second, second
    ck = rckpt.load(tmp / "last.rckpt")
    assert ck["controller"] == {"step": 6}
    assert ck.metadata["rckpt.world_size"] == "2" and ck.saved_world_size == 2
    # 16 samples a step on each of 4 ranks for 3 steps, shared out on 2, then 32 a step.
    assert ck.rank_states == [{"samples_seen": 4 * 48 // 2 + 3 * 32}] * 2
    n = sum(t.numel() for t in ck["model"].values())
    assert ck["optimizer"]["exp_avg"].shape == (n,)
