"""A real hippynn training run (hippynn 0.1.3's train_model) checkpointed through rckpt.hippynn,
stopped, and resumed in fresh objects on the CPU with hippynn's argument names and on emulated
devices: weights, optimizer, controller and scheduler state, metric history and RNG are those
of the run that never stopped, RaiseBatchSizeOnPlateau included. The scenario is
tests/hippynn/restart_scenario.py (also a script, for real GPUs); docs/HIPPYNN.md's restart
script is run crashed with SIGKILL and restarted."""

import os
import runpy
import signal
import subprocess
import sys
from collections import OrderedDict

import pytest
import torch

from conftest import SOURCE, doc_example

pytest.importorskip("hippynn", reason="hippynn is not installed (pip install hippynn==0.1.3, "
                                      "which needs torch 2; the torch 2 stage of scripts/test.sh "
                                      "has it)")
sys.path.insert(0, os.path.join(SOURCE, "tests", "hippynn"))
import restart_scenario as scenario  # noqa: E402

import rckpt  # noqa: E402
import rckpt.hippynn  # noqa: E402
from hippynn.experiment.metric_tracker import MetricTracker  # noqa: E402

SCRIPT = os.path.join(SOURCE, "tests", "hippynn", "restart_scenario.py")


def assert_identical(result):
    assert result["differences"] == [], "\n".join(result["differences"][:20])
    assert result["resumed"]["epochs"] == 8


@pytest.mark.parametrize("options", [{"model_device": "cpu"}, {"map_location": "cpu"}, {}],
                         ids=["model_device", "map_location", "as saved"])
def test_resumed_run_is_the_run_that_never_stopped(tmp_path, options):
    result = scenario.run("cpu", "cpu", load_options=options, workdir=tmp_path)
    assert_identical(result)
    # The batch size is raised after the stop: the scheduler's restored state decides it.
    assert result["batch_sizes"][:4] == [4, 4, 4, 4] and result["batch_sizes"][-1] > 4


@pytest.mark.parametrize("options", [{"model_device": "cuda:0", "emulate_devices": 2},
                                     {"map_location": {"cuda:1": "cuda:0"}, "emulate_devices": 1}],
                         ids=["model_device", "map_location"])
def test_run_saved_on_cuda1_resumes_on_emulated_cuda0(tmp_path, options):
    result = scenario.run("cpu", "cpu", load_options=options, saved_on="cuda:1", workdir=tmp_path)
    assert_identical(result)
    ck = rckpt.load(result["checkpoint"], **options)
    model = [name for name in ck.placement if name.startswith("model.")]
    assert model and all(ck.origin[n] == "cuda:1" and ck.placement[n] == "cuda:0" for n in model)
    assert ck.placement["optimizer.state.1.exp_avg"] == "cuda:0"
    assert ck.placement["optimizer.state.1.step"] == "cpu"  # the host-role counters
    assert all(p == "cpu" for n, p in ck.placement.items() if n.startswith("metrics."))
    assert all(record.origin == "cpu" for record in ck.rng.values())


def test_torch_plateau_scheduler_resumes_identically(tmp_path):
    assert_identical(scenario.run("cpu", "cpu", scheduler="plateau", workdir=tmp_path))


def test_without_the_best_metric_fix_the_resumed_run_diverges(tmp_path, monkeypatch):
    # hippynn 0.1.3's RaiseBatchSizeOnPlateau.load_state_dict restores best_metric from
    # "boredom": the control of the tests above, with the helper's fix switched off.
    monkeypatch.setattr(rckpt.hippynn, "RaiseBatchSizeOnPlateau", type("NotIt", (), {}))
    result = scenario.run("cpu", "cpu", workdir=tmp_path)
    assert any(d.startswith("run.model.") for d in result["differences"])
    assert any("best_metric" in d for d in result["differences"])


@pytest.mark.gpu
@pytest.mark.parametrize("resume_on", ["cuda:0", "cpu"])
def test_run_on_a_real_gpu_resumes_on_it_and_on_the_cpu(tmp_path, resume_on):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    assert_identical(scenario.run("cuda:0", resume_on, workdir=tmp_path))


def test_script_resumes_emulated_run_and_says_identical(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "--saved-on", "cuda:1", "--emulate-devices",
                           "2", "--model-device", "cuda:0", "--stop-after", "3", "--workdir",
                           str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("identical: cpu -> stop after epoch 3 -> cpu "
                                  "(model_device=cuda:0, emulate_devices=2;"), done.stdout
    assert len(done.stdout.splitlines()) == 1  # hippynn's printout goes to the runs' logs


@pytest.fixture
def saved(tmp_path):
    """A checkpoint after 2 epochs of the scenario's run."""
    torch.manual_seed(0)
    objects = scenario.build("cpu")
    path = tmp_path / "last.rckpt"
    saver = rckpt.hippynn.EpochCheckpoint(path, objects[0], objects[2], objects[3])
    with pytest.raises(scenario.Stop):
        scenario.train(objects, tmp_path / "run", [saver, scenario.stop_after(2, {})])
    return path


def fresh(**build_args):
    torch.manual_seed(99)
    objects = scenario.build("cpu", **build_args)
    return objects, scenario.fingerprint(objects)


def test_both_placement_options_are_refused_before_anything_changes(saved):
    objects, before = fresh()
    for path in (saved, saved.parent / "missing.rckpt"):
        with pytest.raises(rckpt.InvalidArgumentError, match="model_device"):
            rckpt.hippynn.load(path, objects[0], objects[2], map_location="cpu",
                               model_device="cpu")
    assert scenario.differences(before, scenario.fingerprint(objects)) == []


@pytest.mark.parametrize("build_args,message", [
    ({"n_features": 5},
     r"model: .*int_weights: shape: saved \(3, 4, 3\), this model \(3, 5, 3\)"),
    ({"scheduler": "plateau"}, r"schedulers: saved \['hippynn\.experiment\.controllers\."
                               r"RaiseBatchSizeOnPlateau'\], this controller "
                               r"\['torch\.optim\.lr_scheduler\.ReduceLROnPlateau'\]"),
])
def test_a_checkpoint_of_another_run_is_refused_before_anything_changes(saved, build_args,
                                                                        message):
    objects, before = fresh(**build_args)
    with pytest.raises(ValueError, match=message) as e:
        rckpt.hippynn.load(saved, objects[0], objects[2])
    assert str(saved) in str(e.value)
    assert scenario.differences(before, scenario.fingerprint(objects)) == []


def test_a_file_not_written_by_rckpt_hippynn_is_refused_naming_the_path(tmp_path):
    objects, before = fresh()
    path = tmp_path / "plain.rckpt"
    rckpt.save(path, {"model": objects[0].model.state_dict()}, rng=rckpt.capture_rng())
    with pytest.raises(ValueError, match=r"plain\.rckpt.*section 'hippynn' is missing"):
        rckpt.hippynn.load(path, objects[0], objects[2])
    assert scenario.differences(before, scenario.fingerprint(objects)) == []


def drop_cpu_rng(ck):
    del ck.rng["torch.cpu"]


@pytest.mark.parametrize("corrupt,message", [
    (lambda ck: ck["metrics"].update(metric_names=["Loss"]),
     r"metrics: metric_names: saved \['Loss'\], this evaluator \['T-RMSE', 'T-MAE', 'Loss'\]"),
    (lambda ck: ck["optimizer"]["param_groups"].append(ck["optimizer"]["param_groups"][0]),
     "optimizer: param groups: saved 2, this optimizer 1"),
    (lambda ck: ck["hippynn"].update(controller="hippynn.experiment.controllers.Controller"),
     r"controller: saved 'hippynn\.experiment\.controllers\.Controller', this one "
     r"'hippynn\.experiment\.controllers\.PatienceController'"),
    (lambda ck: ck["controller"].pop("last_best"),
     r"controller: field\(s\) \['last_best'\] missing"),
    (lambda ck: ck["hippynn"].update(format="rckpt.hippynn/9"),
     "format: expected 'rckpt.hippynn/1', got 'rckpt.hippynn/9'"),
    (drop_cpu_rng, "RNG: the record 'torch.cpu' .* is missing"),
], ids=["metric names", "optimizer", "controller class", "controller field", "format", "rng"])
def test_restore_refuses_a_state_that_does_not_fit_before_anything_changes(saved, corrupt,
                                                                           message):
    ck = rckpt.load(saved)
    corrupt(ck)
    objects, before = fresh()
    with pytest.raises(ValueError, match=message):
        rckpt.hippynn.restore(ck, objects[0], objects[2])
    assert scenario.differences(before, scenario.fingerprint(objects)) == []


def test_metric_tracker_is_stored_as_data_and_rebuilt_by_hippynns_class(saved):
    stored = rckpt.load(saved)["metrics"]

    def plain(value):
        if isinstance(value, (dict, OrderedDict)):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        if isinstance(value, list):
            return all(plain(v) for v in value)
        return isinstance(value, (str, int, float, bool, type(None), torch.Tensor))
    assert plain(stored), "the MetricTracker was stored as an object"
    assert len(stored["epoch_best_metric_values"]) == 2
    objects, _ = fresh()
    tracker = rckpt.hippynn.load(saved, objects[0], objects[2])
    assert type(tracker) is MetricTracker and tracker.current_epoch == 2
    assert tracker.best_metric_values == stored["best_metric_values"]
    assert tracker.n_metrics == 3 and tracker.name_column_width == len("T-RMSE")


def test_epoch_checkpoint_refuses_a_bad_interval(tmp_path):
    with pytest.raises(ValueError, match="every: expected an int >= 1, got 0"):
        rckpt.hippynn.EpochCheckpoint(tmp_path / "x.rckpt", None, None, None, every=0)


def run_doc_script(script, run_dir, *args):
    return subprocess.run([sys.executable, str(script), str(run_dir), *map(str, args)],
                          capture_output=True, text=True)


def test_documented_restart_script_resumes_a_killed_run_bit_for_bit(tmp_path, monkeypatch):
    script = doc_example("HIPPYNN.md", "hippynn_restart.py", tmp_path)
    # The run that never stops, in this process (hippynn imports slowly).
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path / "reference")])
    runpy.run_path(str(script), run_name="__main__")
    crashed = run_doc_script(script, tmp_path / "crashed", "--crash-after", 3)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert rckpt.load(tmp_path / "crashed" / "last.rckpt")["controller"]["current_epoch"] == 3
    resumed = run_doc_script(script, tmp_path / "crashed", "--map-location", "cpu")
    assert resumed.returncode == 0, resumed.stderr
    want = rckpt.load(tmp_path / "reference" / "final.rckpt")
    got = rckpt.load(tmp_path / "crashed" / "final.rckpt")
    for state in (want, got):
        del state["metrics"]["epoch_times"]  # wall-clock seconds
    assert scenario.differences(want.to_dict(), got.to_dict()) == []
    assert want.rng["torch.cpu"].data == got.rng["torch.cpu"].data
