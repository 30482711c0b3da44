"""rckpt.distributed: collective saves and resharded loads, run under
mpirun (over mpi4py communicators) and under torchrun (over torch.distributed
gloo process groups). distributed_driver.py does the job's side and checks
each rank's blocks bit for bit; this side compares what every rank reported
and checks what a single process sees of the file. Each launcher's tests
skip, naming what is missing, where it cannot run."""

import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import rckpt
from conftest import DATA, assert_same, doc_example, run_cli

import distributed_driver as driver  # noqa: E402  (imports no MPI)

DRIVER = os.path.join(os.path.dirname(__file__), "distributed_driver.py")
LAUNCH = os.path.join(os.path.dirname(__file__), "launch.py")


def launch_command(launcher, ranks):
    """The command that starts ``ranks`` processes of a Python script, or a skip."""
    if launcher == "mpirun":
        mpiexec = os.environ.get("RCKPT_MPIEXEC") or shutil.which("mpiexec")
        if importlib.util.find_spec("mpi4py") is None:
            pytest.skip("mpirun runs skipped: mpi4py is not installed (Debian: python3-mpi4py)")
        if not mpiexec:
            pytest.skip("mpirun runs skipped: no mpiexec on PATH")
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        # One machine, no network: shared memory between the ranks.
        return cmd + ["--mca", "btl", "self,vader", sys.executable]
    import torch
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torchrun runs skipped: this torch has no torch.distributed")
    if int(torch.__version__.split(".")[0]) < 2:
        # torch 1.13's launcher cannot start workers on Python 3.11 (its
        # redirects parsing fails): launch.py starts them as torchrun would.
        return [sys.executable, LAUNCH, str(ranks)]
    # --standalone: a rendezvous on this machine at a free port.
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(ranks)]


@pytest.fixture(scope="module", params=["mpirun", "torchrun"])
def launcher(request):
    return request.param


def run_job(launcher, ranks, script, *args, expect_ok=True):
    """Runs a Python script on ``ranks`` processes; the finished process."""
    cmd = launch_command(launcher, ranks) + [str(script), *map(str, args)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if expect_ok:
        assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def mpirun(ranks, script, *args):
    """Runs a script under mpirun; its output, once it succeeded on all ranks."""
    return run_job("mpirun", ranks, script, *args).stdout


def records_of(out, ranks):
    records = []
    for rank in range(ranks):
        path = os.path.join(out, f"{rank}.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                records += [json.loads(line) for line in f]
    return records


def run_driver(launcher, ranks, scenario, *args, expect_ok=True):
    """Runs a scenario of the driver on ``ranks`` ranks; every rank's records."""
    with tempfile.TemporaryDirectory() as out:
        run_job(launcher, ranks, DRIVER, scenario, out, *args, expect_ok=expect_ok)
        return records_of(out, ranks)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, launcher):
    """DIR/ck.rckpt saved by 4 ranks, and what each rank reported."""
    d = tmp_path_factory.mktemp("distributed")
    return d, run_driver(launcher, driver.SAVED_RANKS, "save", d), launcher


def test_save_on_4_ranks_loads_back_on_4_with_each_ranks_rng_and_state(saved):
    _, results, _ = saved
    assert sorted(r["rank"] for r in results) == list(range(driver.SAVED_RANKS))
    for r in results:
        # The driver checked the draws after restore_rng equal those after capture_rng.
        assert {"python.random", "numpy.global", "torch.cpu"} <= set(r["restored"]), r
        assert r["bytes_read"] >= r["bytes_needed"] > 0


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_load_resharded_on_other_world_sizes_bit_for_bit(saved, ranks):
    d, _, launcher = saved
    results = run_driver(launcher, ranks, "load", d)
    assert sorted(r["rank"] for r in results) == list(range(ranks))
    for r in results:
        assert r["world"] == ranks
        # A resharded read stays at chunk granularity: never the whole file.
        assert r["bytes_needed"] <= r["bytes_read"], r


def test_single_process_load_is_the_assembled_state(saved):
    d, _, _ = saved
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


def test_a_failure_on_one_rank_raises_the_same_error_on_every_rank(tmp, launcher):
    ranks = 3
    results = run_driver(launcher, ranks, "failures", tmp, DATA)
    by_case = collections.defaultdict(list)
    for r in results:
        by_case[r.pop("case")].append(r)
    expected = {  # case: (exception class, text its message holds)
        "wrong_global_shape": ("InvalidArgumentError", "rank 1: tensor 'model.fc1.weight'"),
        "overlap": ("InvalidArgumentError", "shards 1 and 2 overlap"),
        "file_size_limit": ("IoError", "rank 1: "),
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
    # A directory that does not exist is made, as dcp.save and Lightning make it.
    created = by_case.pop("missing_directory")
    assert sorted(r["rank"] for r in created) == list(range(ranks))
    assert all(r["error"] is None for r in created), created
    assert set(by_case) == set(expected) | {"previous_file"}
    for case, (error, text) in expected.items():
        seen = by_case[case]
        assert sorted(r["rank"] for r in seen) == list(range(ranks)), case
        assert {(r["error"], r["message"]) for r in seen} == {(error, seen[0]["message"])}, \
            f"{case}: ranks raised different errors: {seen}"
        assert text in seen[0]["message"], f"{case}: {seen[0]['message']}"
    for r in by_case["previous_file"]:
        assert r["intact"] and r["temps"] == [], r


def test_a_rank_that_never_comes_makes_the_others_time_out_naming_themselves(tmp, launcher):
    ranks = 3
    results = run_driver(launcher, ranks, "vanish", tmp, expect_ok=False)
    seen = {r["rank"]: r for r in results if r["case"] == "vanish"}
    assert sorted(seen) == [0, 1, 2], results
    for rank in (0, 2):
        assert seen[rank]["error"] == "IoError" and seen[rank]["is_rckpt_error"], seen[rank]
        assert seen[rank]["message"].startswith(f"rank {rank}: "), seen[rank]
    files = [r for r in results if r["case"] == "vanish_file"]
    assert files and not any(r["exists"] for r in files), "no checkpoint from a failed save"


def test_a_rank_killed_mid_save_ends_the_job_and_leaves_the_previous_file(tmp, launcher):
    ranks = 2
    p = None
    with tempfile.TemporaryDirectory() as out:
        p = run_job(launcher, ranks, DRIVER, "kill", out, tmp, expect_ok=False)
        results = records_of(out, ranks)
    assert p.returncode != 0, "a job with a killed rank cannot succeed"
    assert sorted(r["rank"] for r in results if r.get("saved")) == [0, 1], results
    assert not any(r.get("saved_again") for r in results), results
    ck = rckpt.load(tmp / "k.rckpt", map_location="cpu")
    assert_same(ck["model"], driver.assembled_state()["model"])
    assert run_cli("verify", tmp / "k.rckpt").returncode == 0
    # Whatever temporary the killed job left, the next save to the path removes it.
    rckpt.save(tmp / "k.rckpt", {"model": {"w": driver.global_tensor("model.fc1.weight")}})
    assert [n for n in os.listdir(tmp) if ".tmp-" in n] == []


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
