"""rckpt.dcp: torch.distributed.checkpoint's storage in one .rckpt file.

In one process: dcp.save / dcp.async_save through rckpt.dcp.Writer and
dcp.load through rckpt.dcp.Reader give back what DCP's own FileSystemWriter
and FileSystemReader give back, for models, optimizers (the
torch.distributed.checkpoint.state_dict helpers) and values; the file is an
ordinary rckpt file whose tree is the state's (lists stay lists). Under torchrun (gloo, CPU): DTensors saved by 4 ranks
load on 2 and 3 ranks resharded, as DCP's own storage does (dcp_driver.py).
Skips, saying why, on a torch without torch.distributed.checkpoint.
"""

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import pytest
import torch

import rckpt
from conftest import DCP_DRIVER as DRIVER, assert_same, dcp_or_skip, raw_bytes, run_cli

dcp = dcp_or_skip()
import rckpt.dcp  # noqa: E402

import dcp_driver as driver  # noqa: E402


def model_and_optimizer(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    for _ in range(2):
        model(torch.randn(5, 8)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def app_state(seed):
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model, opt = model_and_optimizer(seed)
    msd, osd = get_state_dict(model, opt)
    return model, opt, {"model": msd, "optim": osd, "extra": {"epoch": 4, "tag": "a"}}


def load_back(reader):
    """A fresh model and optimizer (other weights) loaded from ``reader`` by DCP."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    model, opt = model_and_optimizer(99)
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd, "extra": {"epoch": 0, "tag": ""}}
    dcp.load(state, storage_reader=reader)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return model, opt, state


def test_model_and_optimizer_come_back_as_from_dcps_own_storage(tmp):
    _, _, state = app_state(1)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt"))
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp / "ref")))
    mine_model, mine_opt, mine = load_back(rckpt.dcp.Reader(tmp / "ck.rckpt"))
    ref_model, ref_opt, ref = load_back(dcp.FileSystemReader(str(tmp / "ref")))
    assert_same(mine_model.state_dict(), ref_model.state_dict())
    assert_same(mine_opt.state_dict(), ref_opt.state_dict())
    assert mine["extra"] == ref["extra"] == {"epoch": 4, "tag": "a"}
    for k, v in state["model"].items():
        assert torch.equal(raw_bytes(mine["model"][k]), raw_bytes(v)), k


def test_the_file_is_an_ordinary_rckpt_file_of_whole_tensors(tmp):
    _, _, state = app_state(2)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt", codec="zstd"))
    assert run_cli("verify", tmp / "ck.rckpt").returncode == 0
    inspect = json.loads(run_cli("inspect", "--json", tmp / "ck.rckpt").stdout)
    names = {t["name"] for t in inspect["tensors"]}
    assert {"model.0.weight", "optim.state.0.weight.exp_avg"} <= names, names
    ck = rckpt.load(tmp / "ck.rckpt")
    assert_same(ck["model"], dict(state["model"]))
    assert ck["extra"] == {"epoch": 4, "tag": "a"}
    assert ck["optim"]["param_groups"][0]["lr"] == 0.01
    assert torch.equal(ck["optim"]["state"]["0.weight"]["exp_avg"],
                       state["optim"]["state"]["0.weight"]["exp_avg"])
    assert list(ck["optim"]["state"]) == ["0.weight", "0.bias", "2.weight", "2.bias"], \
        "keys that hold dots stay one key"


def state_with_lists(seed):
    """Lists DCP walks (they hold tensors or dicts) and lists it stores whole."""
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model, opt = model_and_optimizer(seed)
    _, osd = get_state_dict(model, opt)  # param_groups: a list of dicts
    _, raw_opt = model_and_optimizer(seed + 1)
    g = torch.Generator().manual_seed(seed)
    return {
        "optim": osd,
        "raw_optim": raw_opt.state_dict(),  # its state's keys are ints
        "layers": [torch.randn(3, generator=g),
                   [torch.randn(2, generator=g).to(torch.bfloat16), 7, [2.5, "relu"]],
                   {"w": torch.randn(2, 2, generator=g), "ids": [1, 2]}],
        "schedule": [0.1, 0.01],
    }


def zeroed(obj):
    """obj's structure with other values: zero tensors, numbers and strings changed."""
    if isinstance(obj, torch.Tensor):
        return torch.zeros_like(obj)
    if isinstance(obj, dict):
        return {k: zeroed(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(zeroed(v) for v in obj)
    if isinstance(obj, str):
        return ""
    return obj if isinstance(obj, bool) or obj is None else type(obj)(-1)


def test_lists_in_the_state_stay_lists_in_the_file(tmp):
    state = state_with_lists(12)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt"))
    ck = rckpt.load(tmp / "ck.rckpt")
    assert_same(ck["optim"], state["optim"])
    assert_same(ck["layers"], state["layers"])
    assert_same(ck["schedule"], state["schedule"])
    # DCP's flattening makes every dict key a str: the optimizer state's int
    # keys come back as the str keys of a dict, its param_groups as a list.
    raw = state["raw_optim"]
    assert list(ck["raw_optim"]["state"]) == [str(k) for k in raw["state"]] == ["0", "1", "2", "3"]
    assert_same(ck["raw_optim"]["state"]["0"], raw["state"][0])
    assert_same(ck["raw_optim"]["param_groups"], raw["param_groups"])
    inspect = json.loads(run_cli("inspect", "--json", tmp / "ck.rckpt").stdout)
    assert {"layers.0", "layers.1.0", "layers.2.w"} <= {t["name"] for t in inspect["tensors"]}


def test_lists_in_the_state_load_back_through_the_reader(tmp):
    state = state_with_lists(13)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt"))
    back = zeroed(state)
    dcp.load(back, storage_reader=rckpt.dcp.Reader(tmp / "ck.rckpt"))
    assert_same(back, state)
    # The optimizers take their states back.
    _, opt = model_and_optimizer(14)
    opt.load_state_dict(back["raw_optim"])
    assert_same(opt.state_dict(), state["raw_optim"])


def test_an_empty_container_in_a_list_is_none_as_dcps_directory_converts_it(tmp):
    # DCP stores no empty container: the list's place for it is None.
    state = {"x": [{}, torch.ones(2), []], "y": {"z": [[], 3]}}
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt"))
    ck = rckpt.load(tmp / "ck.rckpt")
    assert_same(ck["x"], [None, torch.ones(2), []])
    assert ck["y"] == {"z": [[], 3]}, "a list of values is one value: stored whole"
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp / "dir")))
    assert run_cli("convert", tmp / "dir", tmp / "conv.rckpt").returncode == 0
    d = run_cli("diff", tmp / "conv.rckpt", tmp / "ck.rckpt")
    assert d.returncode == 0, d.stdout + d.stderr


def test_key_paths_that_disagree_on_a_container_fail_the_save(tmp):
    from torch.distributed.checkpoint import DefaultSavePlanner

    class Remapping(DefaultSavePlanner):
        def create_local_plan(self):
            self.mappings["a.y"] = ("a", 0)  # "a" is a dict by "a.x"'s path
            return super().create_local_plan()
    state = {"a": {"x": torch.ones(1), "y": torch.ones(1)}}
    err = rank0_error(lambda: dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "m.rckpt"),
                                       planner=Remapping()))
    assert isinstance(err, rckpt.InvalidArgumentError), repr(err)
    assert "'a.y': key path ['a', 0] uses ['a'] as a list, where another item uses it as a " \
        "dict" in str(err), str(err)
    assert not (tmp / "m.rckpt").exists()


def test_async_save_through_the_writer(tmp):
    _, _, state = app_state(3)
    future = dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "a.rckpt"))
    future.result()
    mine_model, _, mine = load_back(rckpt.dcp.Reader(tmp / "a.rckpt"))
    assert_same(dict(mine_model.state_dict()), dict(state["model"]))
    assert mine["extra"]["epoch"] == 4


def test_one_writer_with_a_cached_staging_copy_saves_each_step_as_it_was(tmp):
    writer = rckpt.dcp.Writer(cache_staged_state_dict=True)
    state: dict[str, Any] = {"model": {"w": torch.zeros(64)}, "extra": {"step": 0}}
    for step in (1, 2):
        state["model"]["w"].fill_(step)
        state["extra"]["step"] = step
        future = dcp.async_save(state, checkpoint_id=tmp / f"s{step}.rckpt", storage_writer=writer)
        state["model"]["w"].fill_(-1)  # training goes on: the staged copy is what is saved
        future.result()
    for step in (1, 2):
        ck = rckpt.load(tmp / f"s{step}.rckpt")
        assert torch.equal(ck["model"]["w"], torch.full((64,), float(step)))
        assert ck["extra"] == {"step": step}


def kept_tensor():
    """The kept staging copy's tensor at model.w (None: no copy kept)."""
    copy = rckpt.dcp._STAGING.copy
    return None if copy is None else copy["model"]["w"]


def test_async_saves_through_new_writers_copy_into_one_kept_staging_copy(tmp):
    rckpt.dcp.free_staging()
    state: dict[str, Any] = {"model": {"w": torch.zeros(64)},
                             "extra": {"step": 0, "dtype": torch.bfloat16}}
    kept = []
    for step in (1, 2, 3):
        if step == 3:
            state["model"]["w"] = torch.zeros(32)  # another shape: a new copy replaces the kept one
        state["model"]["w"].fill_(step)
        state["extra"]["step"] = step
        future = dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / f"s{step}.rckpt"))
        state["model"]["w"].fill_(-1)
        future.result()
        kept.append(kept_tensor())
        assert not rckpt.dcp._STAGING.busy, "a finished save leaves the copy free"
    assert kept[0] is not None and kept[1] is kept[0], "the second save copied into the first's copy"
    assert torch.equal(kept[0], torch.full((64,), 2.0))
    assert kept[2] is not kept[0] and kept[2].shape == (32,)
    assert torch.equal(kept[2], torch.full((32,), 3.0)), "the copy holds the last save's state"
    for step, n in ((1, 64), (2, 64), (3, 32)):
        ck = rckpt.load(tmp / f"s{step}.rckpt")
        assert torch.equal(ck["model"]["w"], torch.full((n,), float(step)))
        assert ck["extra"] == {"step": step, "dtype": torch.bfloat16}
    rckpt.dcp.free_staging()
    assert kept_tensor() is None


def test_a_save_staged_while_the_previous_one_writes_gets_memory_of_its_own(tmp, monkeypatch):
    import threading
    rckpt.dcp.free_staging()
    writing, go_on = threading.Event(), threading.Event()
    real_save = rckpt.dcp._rd.save
    calls = []

    def held_first_save(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 1:
            writing.set()
            assert go_on.wait(60)
        return real_save(*args, **kwargs)
    monkeypatch.setattr(rckpt.dcp._rd, "save", held_first_save)
    state = {"model": {"w": torch.full((64,), 1.0)}}
    try:
        first = dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "first.rckpt"))
        assert writing.wait(60)
        kept = kept_tensor()
        state["model"]["w"].fill_(2.0)
        second = dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "second.rckpt"))
        state["model"]["w"].fill_(3.0)
        second.result()  # the second finishes first: the first's copy stays held
        assert rckpt.dcp._STAGING.busy
        assert kept_tensor() is kept and torch.equal(kept, torch.full((64,), 1.0)), \
            "the copy being written was neither replaced nor written into"
    finally:
        go_on.set()
    first.result()
    assert torch.equal(rckpt.load(tmp / "first.rckpt")["model"]["w"], torch.full((64,), 1.0))
    assert torch.equal(rckpt.load(tmp / "second.rckpt")["model"]["w"], torch.full((64,), 2.0))
    # Both saves are done: the kept copy takes the next one again.
    assert not rckpt.dcp._STAGING.busy
    state["model"]["w"].fill_(4.0)
    dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "third.rckpt")).result()
    assert kept_tensor() is kept and torch.equal(kept, torch.full((64,), 4.0))
    assert torch.equal(rckpt.load(tmp / "third.rckpt")["model"]["w"], torch.full((64,), 4.0))
    rckpt.dcp.free_staging()


def test_a_save_that_fails_before_writing_gives_the_kept_copy_back(tmp):
    import gc
    import weakref

    from torch.distributed.checkpoint import DefaultSavePlanner
    from torch.distributed.checkpoint.api import CheckpointException
    rckpt.dcp.free_staging()
    state = {"model": {"w": torch.full((64,), 1.0)}}
    dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "a.rckpt")).result()
    kept = weakref.ref(kept_tensor())  # a reference of the test's would itself hold the copy

    class FailingPlanner(DefaultSavePlanner):
        def create_local_plan(self):
            raise RuntimeError("planning failed")
    failed = dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "b.rckpt"),
                            planner=FailingPlanner())
    with pytest.raises(CheckpointException) as raised:  # a BaseException, by rank
        failed.result()
    assert "planning failed" in repr(raised.value.failures)
    del failed, raised
    gc.collect()
    state["model"]["w"].fill_(5.0)
    dcp.async_save(state, storage_writer=rckpt.dcp.Writer(tmp / "c.rckpt")).result()
    assert kept_tensor() is kept() and torch.equal(kept_tensor(), torch.full((64,), 5.0)), \
        "the failed save's hold went with it: the next save staged into the kept copy"
    assert torch.equal(rckpt.load(tmp / "c.rckpt")["model"]["w"], torch.full((64,), 5.0))
    assert not (tmp / "b.rckpt").exists()
    rckpt.dcp.free_staging()


def test_a_writer_that_keeps_no_staging_copy_leaves_none(tmp):
    rckpt.dcp.free_staging()
    state = {"model": {"w": torch.full((64,), 5.0)}}
    writer = rckpt.dcp.Writer(tmp / "n.rckpt", cache_staged_state_dict=False)
    dcp.async_save(state, storage_writer=writer).result()
    assert kept_tensor() is None
    assert torch.equal(rckpt.load(tmp / "n.rckpt")["model"]["w"], state["model"]["w"])


def test_checkpoint_id_names_the_file(tmp):
    _, _, state = app_state(4)
    dcp.save(state, checkpoint_id=tmp / "id.rckpt", storage_writer=rckpt.dcp.Writer())
    _, _, back = load_back(rckpt.dcp.Reader(tmp / "id.rckpt"))
    assert back["extra"] == state["extra"]
    assert rckpt.dcp.Writer.validate_checkpoint_id(tmp / "x.rckpt")
    assert not rckpt.dcp.Reader.validate_checkpoint_id(tmp / "dir")


def test_a_converted_dcp_directory_loads_through_the_reader_as_from_dcps_own(tmp):
    _, _, state = app_state(9)
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp / "dir")))
    r = run_cli("convert", tmp / "dir", tmp / "conv.rckpt")
    assert r.returncode == 0, r.stderr
    mine_model, mine_opt, mine = load_back(rckpt.dcp.Reader(tmp / "conv.rckpt"))
    ref_model, ref_opt, ref = load_back(dcp.FileSystemReader(str(tmp / "dir")))
    assert_same(mine_model.state_dict(), ref_model.state_dict())
    assert_same(mine_opt.state_dict(), ref_opt.state_dict())
    assert mine["extra"] == ref["extra"]


def test_reader_loads_a_file_rckpt_save_wrote(tmp):
    model, _ = model_and_optimizer(5)
    rckpt.save(tmp / "plain.rckpt", {"model": model.state_dict(), "extra": {"epoch": 9}})
    dest, _ = model_and_optimizer(6)
    state = {"model": dest.state_dict(), "extra": {"epoch": 0}}
    dcp.load(state, storage_reader=rckpt.dcp.Reader(tmp / "plain.rckpt"))
    assert_same(state["model"], model.state_dict())
    assert state["extra"] == {"epoch": 9}


def test_the_reader_finds_a_files_sections_as_rckpt_load_does(tmp):
    # "rckpt.world_size" without a positive number makes no collective file: its "common"
    # is a section like any other, for the Reader as for rckpt.load (the rule is the
    # library's, format/collective_layout.h).
    rckpt.save(tmp / "f.rckpt", {"common": {"w": torch.arange(3.0)}, "extra": {"epoch": 2}},
               metadata={"rckpt.world_size": "none"})
    assert rckpt.load(tmp / "f.rckpt")["extra"] == {"epoch": 2}
    state: dict[str, Any] = {"common": {"w": torch.zeros(3)}, "extra": {"epoch": 0}}
    dcp.load(state, storage_reader=rckpt.dcp.Reader(tmp / "f.rckpt"))
    assert state["extra"] == {"epoch": 2}
    assert_same(state["common"]["w"], torch.arange(3.0))


def rank0_error(fn):
    """What fn() raised; for DCP's CheckpointException (a BaseException that
    carries each rank's exception), rank 0's own exception."""
    with pytest.raises(BaseException) as info:
        fn()
    failures = getattr(info.value, "failures", None)
    return failures[0][0] if failures else info.value


def test_a_value_rckpt_cannot_store_fails_the_save_and_keeps_the_previous_file(tmp):
    _, _, state = app_state(7)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt"))
    before = (tmp / "ck.rckpt").read_bytes()
    state["extra"]["hook"] = object()
    err = rank0_error(lambda: dcp.save(state, storage_writer=rckpt.dcp.Writer(tmp / "ck.rckpt")))
    assert isinstance(err, TypeError) and "extra.hook: cannot store" in str(err), repr(err)
    assert (tmp / "ck.rckpt").read_bytes() == before
    assert [n for n in os.listdir(tmp) if ".tmp-" in n] == []


def test_reader_errors_name_the_file(tmp):
    _, _, state = app_state(8)
    err = rank0_error(lambda: dcp.load(state,
                                       storage_reader=rckpt.dcp.Reader(tmp / "missing.rckpt")))
    assert "missing.rckpt': No such file" in str(err), repr(err)
    (tmp / "bad.rckpt").write_bytes(b"RCKPT" + b"\0" * 100)
    err = rank0_error(lambda: dcp.load(state, storage_reader=rckpt.dcp.Reader(tmp / "bad.rckpt")))
    assert "bad.rckpt" in str(err), repr(err)
    # A key the state asks for that the file lacks: DCP's own planner says so.
    dcp.save({"model": {"w": torch.ones(2)}}, storage_writer=rckpt.dcp.Writer(tmp / "w.rckpt"))
    err = rank0_error(lambda: dcp.load({"model": {"w": torch.zeros(2), "other": torch.zeros(1)}},
                                       storage_reader=rckpt.dcp.Reader(tmp / "w.rckpt")))
    assert "model.other" in str(err), repr(err)


def torchrun(ranks, *args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           str(ranks), DRIVER, *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"


def run_driver(ranks, scenario, *args):
    with tempfile.TemporaryDirectory() as out:
        torchrun(ranks, scenario, out, *args)
        records = []
        for r in range(ranks):
            with open(os.path.join(out, f"{r}.jsonl")) as f:
                records += [json.loads(line) for line in f]
        return records


@pytest.fixture(scope="module")
def saved_on_4(tmp_path_factory):
    d = tmp_path_factory.mktemp("dcp4")
    results = run_driver(4, "save", d)
    assert sorted(r["rank"] for r in results if r.get("saved")) == [0, 1, 2, 3]
    return d


@pytest.mark.parametrize("ranks", [2, 3])
def test_dtensors_saved_on_4_ranks_load_resharded_on_other_world_sizes(saved_on_4, ranks):
    results = run_driver(ranks, "load", saved_on_4)
    assert sorted(r["rank"] for r in results if r.get("loaded")) == list(range(ranks))


def test_a_file_4_ranks_wrote_is_one_whole_state_in_one_process(saved_on_4):
    assert run_cli("verify", saved_on_4 / "ck.rckpt").returncode == 0
    for name in ("ck.rckpt", "async.rckpt"):
        ck = rckpt.load(saved_on_4 / name)
        assert ck.saved_world_size == 4
        expected = driver.nested(driver.global_tensor)
        assert_same(ck["model"], expected["model"])
        assert_same(ck["optim"]["state"], expected["optim"]["state"])
        assert ck["extra"] == driver.VALUES["extra"]
        assert_same(ck["layers"], expected["layers"])  # a list, as the ranks' state had it
        inspect = json.loads(run_cli("inspect", "--json", saved_on_4 / name).stdout)
        shards = {t["name"]: t.get("shards", []) for t in inspect["tensors"]}
        assert [s["rank"] for s in shards["model.w1"]] == [0, 1, 2, 3]
        assert shards["model.bias"] == [], "a whole tensor is written once, whole"
