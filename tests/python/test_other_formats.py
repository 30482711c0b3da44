"""rckpt.load of every format rckpt converts (a torch.save archive, safetensors, a DCP
directory) with rckpt's placement and RNG rules; rckpt.convert as `rckpt convert`; and the
commands that read only .rckpt files saying what such a file is and what reads it."""

import io
import os
import re
import shutil
import warnings

import pytest
import torch

import rckpt
from conftest import DATA, assert_same, run_cli

PT = os.path.join(DATA, "pytorch")
CUDA_TAGGED = os.path.join(PT, "cuda_tagged.pt")  # tensors saved on cuda:1, cuda:0 and cpu
ADAM = os.path.join(PT, "optimizer_adam.pt")
RNG_PT = os.path.join(PT, "rng_states.pt")
SAFETENSORS = os.path.join(DATA, "safetensors", "model.safetensors")
DCP = os.path.join(DATA, "dcp", "simple")


@pytest.fixture
def tmpdir_env(tmp, monkeypatch):
    """TMPDIR, where load puts its private copies, as a directory of its own."""
    d = tmp / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    return d


def _converted(tmp, src):
    out = tmp / (os.path.basename(src) + ".rckpt")
    r = run_cli("convert", src, out)
    assert r.returncode == 0, r.stderr
    return out


def _same_load(a, b):
    assert type(a) is type(b)
    assert_same(a.to_dict(), b.to_dict())
    assert a.rng == b.rng and a.sections == b.sections and a.origin == b.origin
    assert a.placement == b.placement


@pytest.mark.parametrize("src", [ADAM, RNG_PT, SAFETENSORS, DCP],
                         ids=["pt", "pt-rng", "safetensors", "dcp"])
def test_load_of_another_format_is_the_load_of_its_conversion(tmp, tmpdir_env, src):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the DCP fixture's warning about an empty list
        direct = rckpt.load(src, map_location="cpu")
    _same_load(direct, rckpt.load(_converted(tmp, src), map_location="cpu"))
    assert os.listdir(tmpdir_env) == []  # the private copy is gone


def test_a_torch_file_saved_on_cuda_follows_the_placement_rules(tmpdir_env):
    # As stored: this machine has no cuda:1, and the error says what fixes it.
    with pytest.raises(rckpt.DeviceUnavailableError,
                       match=r"'on_cuda1' .* was saved on cuda:1.*map_location"):
        rckpt.load(CUDA_TAGGED)
    ck = rckpt.load(CUDA_TAGGED, map_location="cpu")
    assert set(ck.placement.values()) == {"cpu"}
    assert ck.origin == {"on_cuda1": "cuda:1", "on_cuda0": "cuda:0", "on_cpu": "cpu"}
    ck = rckpt.load(CUDA_TAGGED, emulate_devices=2)  # a machine with two GPUs: as stored
    assert ck.placement == ck.origin
    ck = rckpt.load(CUDA_TAGGED, map_location={"cuda:1": "cuda:0"}, emulate_devices=1)
    assert ck.placement == {"on_cuda1": "cuda:0", "on_cuda0": "cuda:0", "on_cpu": "cpu"}
    assert os.listdir(tmpdir_env) == []


def test_model_device_moves_every_tensor_of_a_safetensors_file_and_rng_stays_on_the_host():
    ck = rckpt.load(SAFETENSORS, model_device="auto", emulate_devices=2)
    assert ck.sections == {"model": "model"}
    assert set(ck.placement.values()) == {"cuda:0"} and len(ck.placement) == 4
    assert ck.rng["torch_rng_state"].kind == "torch_cpu"  # an RNG record, on the host
    assert ck.rng["torch_rng_state"].origin == "cpu"
    back = rckpt.load(SAFETENSORS, model_device="cpu")
    assert set(back.placement.values()) == {"cpu"}


def test_options_are_refused_before_the_file_is_imported(tmpdir_env):
    with pytest.raises(rckpt.InvalidArgumentError, match="map_location and model_device"):
        rckpt.load(CUDA_TAGGED, map_location="cpu", model_device="auto")
    with pytest.raises(rckpt.InvalidArgumentError, match=r"^model_device: invalid device 'gpu'"):
        rckpt.load(CUDA_TAGGED, model_device="gpu")
    # Options first, even for a path that does not exist.
    with pytest.raises(rckpt.InvalidArgumentError, match="map_location and model_device"):
        rckpt.load(os.path.join(PT, "absent.pt"), map_location="cpu", model_device="auto")
    assert os.listdir(tmpdir_env) == []


def test_errors_name_the_users_path_never_the_private_copy(tmp, tmpdir_env):
    # The load of the private copy is the library's (LoadAny), which names
    # the file given in its errors; the importer's errors name it too.
    src = tmp / "tagged.pt"
    shutil.copy(CUDA_TAGGED, src)
    with pytest.raises(rckpt.DeviceUnavailableError) as e:
        rckpt.load(src)  # saved on cuda:1, which this machine has not
    assert "rckpt-import-" not in str(e.value)
    # The importer's errors name the checkpoint too.
    damaged = tmp / "damaged"
    shutil.copytree(os.path.join(DATA, "dcp", "bad_shape"), damaged)
    with pytest.raises(rckpt.CorruptionError, match=f"^'{re.escape(str(damaged))}': "):
        rckpt.load(damaged)
    assert os.listdir(tmpdir_env) == []


def test_a_directory_that_is_not_a_dcp_checkpoint_says_what_rckpt_looked_for(tmp):
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=r"is a directory without \.metadata: not a torch\.distributed"
                             r"\.checkpoint \(DCP\) checkpoint, whose directory holds "
                             r"\.metadata and __<rank>_<n>\.distcp files"):
        rckpt.load(tmp)


def test_a_file_object_of_another_format_loads(tmpdir_env):
    with open(CUDA_TAGGED, "rb") as f:
        data = f.read()
    ck = rckpt.load(io.BytesIO(data), map_location="cpu")
    assert ck.origin["on_cuda1"] == "cuda:1"
    with pytest.raises(rckpt.DeviceUnavailableError) as e:
        rckpt.load(io.BytesIO(data))
    assert "rckpt-import" not in str(e.value) and "rckpt-load" not in str(e.value)
    assert os.listdir(tmpdir_env) == []


def test_convert_writes_what_the_cli_writes_and_reports_its_line(tmp):
    report = rckpt.convert(ADAM, tmp / "py.rckpt")
    cli = run_cli("convert", ADAM, tmp / "cli.rckpt")
    assert cli.returncode == 0
    assert run_cli("diff", tmp / "py.rckpt", tmp / "cli.rckpt").returncode == 0
    assert report.format == "pytorch"
    assert report.tensors == len(rckpt.load(tmp / "py.rckpt").tensors) > 0
    def shape(line, dst):
        return re.sub(r"in [0-9.]+ s \(.*\)", "in T", line.replace(str(dst), "DST"))

    assert shape(str(report), tmp / "py.rckpt") == shape(cli.stdout.strip(), tmp / "cli.rckpt")
    assert str(report).startswith(f"{ADAM} -> {tmp / 'py.rckpt'}: {report.tensors} tensors, ")


def test_convert_takes_the_clis_options(tmp):
    out = tmp / "moved.rckpt"
    rckpt.convert(CUDA_TAGGED, out, set_device={"cuda:1": "cuda:0"}, codec="zstd", level=3,
                  chunk_bytes=1024, shuffle="on")
    assert rckpt.load(out, emulate_devices=1).origin["on_cuda1"] == "cuda:0"
    rckpt.convert(ADAM, tmp / "sec.rckpt", sections={"model": "evaluator"})
    assert rckpt.load(tmp / "sec.rckpt").sections["evaluator"] == "host"
    rckpt.convert(ADAM, tmp / "named.ck", to_format="pt")
    assert torch.load(tmp / "named.ck")["epoch"] == torch.load(ADAM)["epoch"]
    rckpt.convert(tmp / "named.ck", tmp / "back.safetensors", from_format="pt")
    with pytest.warns(UserWarning, match=r"rckpt\.convert: .*simple: a list in the state dict "
                                         r"has no item 0"):  # the importer's warnings
        assert rckpt.convert(DCP, tmp / "dcp.rckpt").format == "dcp"


def test_convert_set_device_takes_map_locations_syntax_and_message(tmp):
    # A string as --set-device takes it (one device for every origin, too),
    # and the CLI's message for a bad one, in the argument's name.
    rckpt.convert(CUDA_TAGGED, tmp / "all.rckpt", set_device="cuda:2")
    assert set(rckpt.load(tmp / "all.rckpt", emulate_devices=3).origin.values()) == {"cuda:2"}
    rckpt.convert(CUDA_TAGGED, tmp / "one.rckpt", set_device="cuda:1=cuda:0")
    assert rckpt.load(tmp / "one.rckpt", emulate_devices=1).origin["on_cuda1"] == "cuda:0"
    for bad in ("gpu", "cuda:1=cuda:0,cuda:1=cpu", "cuda:1=cuda:0,cpu"):
        cli = run_cli("convert", CUDA_TAGGED, tmp / "x.rckpt", "--set-device", bad)
        assert cli.returncode == 2, cli.stderr
        said = cli.stderr.split("InvalidArgument: --set-device", 1)[1].strip()
        with pytest.raises(rckpt.InvalidArgumentError) as e:
            rckpt.convert(CUDA_TAGGED, tmp / "x.rckpt", set_device=bad)
        assert str(e.value) == "set_device" + said
    with pytest.raises(rckpt.InvalidArgumentError, match=r"set_device: device cuda:1 is mapped "
                                                         r"twice"):
        rckpt.convert(CUDA_TAGGED, tmp / "x.rckpt", set_device="cuda:1=cpu,cuda:1=cuda:0")
    assert not os.path.exists(tmp / "x.rckpt")


def test_a_load_of_another_format_crosses_into_the_library_once(monkeypatch):
    # The import into a private .rckpt and the load are one call (LoadAny).
    import rckpt.checkpoint
    real = rckpt._core
    calls = []

    class Counting:
        def __getattr__(self, name):
            attr = getattr(real, name)
            if not callable(attr):
                return attr

            def counted(*args, **kwargs):
                calls.append(name)
                return attr(*args, **kwargs)
            return counted

    monkeypatch.setattr(rckpt, "_core", Counting())
    monkeypatch.setattr(rckpt.checkpoint, "_core", rckpt._core)
    loaded = rckpt.load(CUDA_TAGGED, map_location={"cuda:1": "cpu", "cuda:0": "cpu"})
    assert calls == ["load"]
    assert set(loaded.placement.values()) == {"cpu"}


def test_convert_warns_of_inert_classes_and_strict_refuses_them(tmp):
    src = os.path.join(PT, "custom_class.pt")
    with pytest.warns(rckpt.InertObjectWarning, match=r"mylib\.metrics\.MetricTracker"):
        report = rckpt.convert(src, tmp / "c.rckpt")
    assert report.inert_classes == ["mylib.metrics.MetricTracker"]
    with pytest.raises(rckpt.UnsupportedError, match="MetricTracker"):
        rckpt.convert(src, tmp / "strict.rckpt", strict=True)
    assert not os.path.exists(tmp / "strict.rckpt")
    # drop_objects writes them as None: what the .pt does not keep is warned
    # about, as the CLI's "does not keep" warnings.
    with pytest.warns(rckpt.DroppedValueWarning,
                      match=r"dropped\.pt does not keep inert object of class "
                            r"'mylib\.metrics\.MetricTracker'"):
        report = rckpt.convert(tmp / "c.rckpt", tmp / "dropped.pt", drop_objects=True)
    assert len(report.not_kept) == 1 and "MetricTracker" in report.not_kept[0]


def test_convert_checks_dst_before_reading_src(tmp):
    absent = tmp / "absent.pt"
    with pytest.raises(rckpt.InvalidArgumentError, match=r"output '.*' is a directory: expected a "
                                                         r"file path such as"):
        rckpt.convert(absent, tmp)
    with pytest.raises(rckpt.NotFoundError, match=r"output '.*': directory '.*nope' does not exist"):
        rckpt.convert(absent, tmp / "nope" / "x.rckpt")
    with pytest.raises(rckpt.InvalidArgumentError, match=r"no known extension .* to_format="):
        rckpt.convert(absent, tmp / "x.ck")
    with pytest.raises(rckpt.NotFoundError, match="absent.pt"):
        rckpt.convert(absent, tmp / "x.rckpt")
    with pytest.raises(rckpt.InvalidArgumentError, match=r"output format dcp: rckpt reads DCP "
                                                         r"directories but does not write them"):
        rckpt.convert(ADAM, tmp / "x", to_format="dcp")
    with pytest.raises(rckpt.InvalidArgumentError,
                       match=r"unknown format 'zip': expected rckpt, pt, safetensors or dcp"):
        rckpt.convert(ADAM, tmp / "x.rckpt", from_format="zip")
    with pytest.raises(TypeError, match=r"rckpt\.convert: rng_keys must be a list of keys, not "
                                        r"the string 'rng'"):
        rckpt.convert(ADAM, tmp / "x.rckpt", rng_keys="rng")


@pytest.mark.parametrize("cmd", ["verify", "plan", "load"])
@pytest.mark.parametrize("src,what", [(ADAM, r"a PyTorch zip archive \(torch\.save\)"),
                                      (SAFETENSORS, "a safetensors file"),
                                      (DCP, r"a torch\.distributed\.checkpoint \(DCP\) directory")],
                         ids=["pt", "safetensors", "dcp"])
def test_rckpt_only_commands_say_what_another_format_is_with_exit_5(cmd, src, what):
    r = run_cli(cmd, src)
    assert r.returncode == 5, r.stderr
    assert re.search(rf"^rckpt {cmd}: Unsupported: '{re.escape(src)}' is {what}, not an \.rckpt "
                     rf"file: rckpt {cmd} reads \.rckpt files only\. rckpt\.load\(", r.stderr), \
        r.stderr
    assert f"'rckpt convert {src} OUT.rckpt'" in r.stderr


def test_the_lightning_plugin_reads_lightnings_own_files_without_executing_them(tmp):
    pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning)")
    from lightning.fabric.plugins.io import TorchCheckpointIO
    import rckpt.lightning
    ckpt = {"epoch": 3, "global_step": 12, "state_dict": {"w": torch.arange(3.0)}}
    TorchCheckpointIO().save_checkpoint(ckpt, tmp / "own.ckpt")  # Lightning's own format
    back = rckpt.lightning.CheckpointIO(rng=False).load_checkpoint(tmp / "own.ckpt")
    assert back["epoch"] == 3 and back["global_step"] == 12
    assert torch.equal(back["state_dict"]["w"], torch.arange(3.0))
