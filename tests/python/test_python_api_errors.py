"""The errors people meet in the Python API: wrong types, bad option values, files where
directories are expected; each names the argument, what was expected and what was given."""

import os

import pytest
import torch

import rckpt


@pytest.fixture
def saved(tmp):
    path = tmp / "a.rckpt"
    rckpt.save(path, {"model": {"w": torch.ones(2)}, "controller": {"epoch": 1}},
               rng=rckpt.capture_rng())
    return path


def test_restore_rng_of_a_record_that_is_not_an_rng_record_names_it():
    with pytest.raises(TypeError, match=r"^restore_rng: rng\['torch\.cpu'\] must be an "
                                        r"RngRecord\(kind, origin, data\) as "
                                        r"rckpt\.capture_rng\(\) makes, not b'xx' \(bytes\)$"):
        rckpt.restore_rng({"torch.cpu": b"xx"})  # type: ignore[dict-item]


def test_restore_rng_of_none_or_a_list_says_what_it_takes():
    for bad, shown in ((None, r"None \(NoneType\)"), ([1, 2], r"\[1, 2\] \(list\)")):
        with pytest.raises(TypeError, match=r"^restore_rng: rng must be an RngState \(ck\.rng, "
                                            r"rckpt\.capture_rng\(\)\) or a dict name -> "
                                            rf"RngRecord, not {shown}$"):
            rckpt.restore_rng(bad)  # type: ignore[arg-type]


def test_restore_rng_of_an_unknown_kind_lists_the_kinds_and_restores_nothing():
    state = rckpt.capture_rng(numpy=False, python=False)
    before = torch.get_rng_state()
    bad = rckpt.RngState({**state, "x": rckpt.RngRecord("bogus", "cpu", b"")})
    torch.manual_seed(123)
    with pytest.raises(ValueError, match=r"rng\['x'\] has kind 'bogus', expected one of python, "
                                         r"numpy, torch_cpu"):
        rckpt.restore_rng(bad)
    assert not torch.equal(torch.get_rng_state(), before)  # nothing restored


def test_restore_rng_checks_generators_and_device_count():
    state = rckpt.capture_rng()
    with pytest.raises(TypeError, match=r"restore_rng: generators must be a dict name -> "
                                        r"generator .* not \[1\] \(list\)"):
        rckpt.restore_rng(state, generators=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"restore_rng: device_count must be an int >= 0 or "
                                        r"None .* not '2'"):
        rckpt.restore_rng(state, device_count="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"capture_rng: generators must be a dict"):
        rckpt.capture_rng(generators=[1])  # type: ignore[arg-type]


def test_printing_rng_records_shows_a_summary_not_their_bytes(saved):
    text = repr(rckpt.load(saved).rng)
    assert len(text) < 500, text
    assert "'torch.cpu': RngRecord(kind='torch_cpu', origin='cpu', 5056 bytes)" in text
    assert repr(rckpt.RngState()) == "RngState({})"


def test_a_manager_given_a_file_says_it_keeps_a_directory(saved):
    with pytest.raises(NotADirectoryError, match=r"CheckpointManager: directory '.*a\.rckpt' is "
                                                 r"a file, not a directory: .* rckpt\.load\("):
        rckpt.CheckpointManager(saved)
    with pytest.raises(NotADirectoryError, match=r"CheckpointManager: cannot create directory "
                                                 r"'.*a\.rckpt.sub'"):
        rckpt.CheckpointManager(os.path.join(saved, "sub"))


def test_a_manager_load_of_a_step_never_saved_lists_the_saved_steps(tmp):
    with rckpt.CheckpointManager(tmp / "run", async_save=False) as mgr:
        mgr.save(3, {"c": {"x": 1}})
        with pytest.raises(rckpt.NotFoundError, match=r"CheckpointManager: step 5 is not saved "
                                                      r"in '.*run' \(saved steps: \[3\]\)"):
            mgr.load(5)
        with pytest.raises(ValueError, match=r"CheckpointManager\.load: step must be an int >= "
                                             r"0, got '3'"):
            mgr.load("3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async_save must be True or False, not 'no'"):
        rckpt.CheckpointManager(tmp / "run", async_save="no")  # type: ignore[arg-type]


@pytest.mark.parametrize("option,value,error,message", [
    ("level", "x", TypeError, r"rckpt\.save: level must be an int, not 'x' \(str\)"),
    # The ranges are the library's messages, whichever front end is given them.
    ("chunk_bytes", -1, rckpt.InvalidArgumentError, r"^SaveOptions\.chunk_bytes is -1: out of "
                                                    r"range"),
    ("chunk_bytes", 0, rckpt.InvalidArgumentError, r"^SaveOptions\.chunk_bytes is 0: expected 1 "
                                                   r"byte to 1 GiB"),
    ("threads", -1, rckpt.InvalidArgumentError, r"^SaveOptions\.threads is -1: expected 0 "),
    ("threads", 1.5, TypeError, r"rckpt\.save: threads must be an int, not 1\.5"),
    ("emulate_devices", "2", TypeError, r"rckpt\.save: emulate_devices must be an int >= 0"),
    ("codec", None, TypeError, r"rckpt\.save: codec must be a str, not None"),
    ("codec", "lz4", rckpt.InvalidArgumentError, r"^codec 'lz4': expected none or zstd$"),
    ("metadata", [1], TypeError, r"rckpt\.save: metadata must be a dict of str -> str .* not "
                                 r"\[1\] \(list\)"),
    ("rng", 5, TypeError, r"rckpt\.save: rng must be an RngState .* not 5"),
    ("rng", {"x": b"1"}, TypeError, r"rckpt\.save: rng\['x'\] must be an RngRecord"),
    ("origin", 3, TypeError, r"origin must be None, a device string or a dict section -> "
                             r"device, not 3"),
    ("origin", "gpu", rckpt.InvalidArgumentError, r"^origin: invalid device 'gpu'"),
    ("origin", {"model": "gpu"}, rckpt.InvalidArgumentError, r"^origin\['model'\]: invalid "
                                                             r"device 'gpu'"),
])
def test_save_names_the_bad_option(tmp, option, value, error, message):
    with pytest.raises(error, match=message):
        rckpt.save(tmp / "x.rckpt", {"model": {"w": torch.ones(1)}}, **{option: value})
    assert not os.path.exists(tmp / "x.rckpt")


def test_zstd_level_range_is_the_librarys_with_its_message(tmp):
    state = {"model": {"w": torch.ones(4)}}
    for level in (-7, 22):
        rckpt.save(tmp / "ok.rckpt", state, codec="zstd", level=level)
    for level in (-8, 23):
        with pytest.raises(rckpt.InvalidArgumentError,
                           match=rf"SaveOptions\.level is {level}: zstd levels run from -7 to 22"):
            rckpt.save(tmp / "x.rckpt", state, codec="zstd", level=level)
    assert not os.path.exists(tmp / "x.rckpt")


def test_save_async_names_the_bad_option(tmp):
    with pytest.raises(TypeError, match=r"rckpt\.save_async: level must be an int"):
        rckpt.save_async(tmp / "x.rckpt", {"c": {}}, level="x")


@pytest.mark.parametrize("option,value,error,message", [
    ("threads", "2", TypeError, r"rckpt\.load: threads must be an int >= 0 .* not '2' \(str\)"),
    ("verify", "no", TypeError, r"rckpt\.load: verify must be True or False, not 'no' \(str\)"),
    ("map_file", 1, TypeError, r"rckpt\.load: map_file must be True or False, not 1"),
    ("strict", None, TypeError, r"rckpt\.load: strict must be True or False, not None"),
    ("sections", "model", TypeError, r"rckpt\.load: sections must be a list of section names, "
                                     r"not the string 'model' \(write sections=\['model'\]\)"),
    ("skip_sections", [1], TypeError, r"rckpt\.load: skip_sections must hold section names "
                                      r"\(str\), not 1"),
    ("model_device", 0, TypeError, r"rckpt\.load: model_device must be \"auto\", a device .* "
                                   r"not 0"),
    ("model_device", "gpu", rckpt.InvalidArgumentError, r"^model_device: invalid device 'gpu'"),
    ("map_location", 3, TypeError, r"map_location must be a device .* not 3"),
    ("emulate_devices", -1, ValueError, r"rckpt\.load: emulate_devices must be an int >= 0"),
])
def test_load_names_the_bad_option(saved, option, value, error, message):
    with pytest.raises(error, match=message):
        rckpt.load(saved, **{option: value})


def test_load_into_names_the_bad_argument(saved):
    with pytest.raises(TypeError, match=r"rckpt\.load_into: state must be a dict of sections "
                                        r"\(\{'model': model\.state_dict\(\)\}\) or a state_dict, "
                                        r"not list"):
        rckpt.load_into(saved, [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"rckpt\.load_into: strict must be True or False"):
        rckpt.load_into(saved, {"model": {"w": torch.zeros(2)}}, strict="yes")  # type: ignore[arg-type]


def test_cuda_device_count_names_its_argument():
    with pytest.raises(TypeError, match=r"rckpt\.cuda_device_count: emulate_devices must be an "
                                        r"int >= 0 .* not 'a' \(str\)"):
        rckpt.cuda_device_count("a")  # type: ignore[arg-type]


def test_the_dcp_writer_checks_its_options_before_dcp_plans(tmp):
    pytest.importorskip("torch.distributed.checkpoint",
                        reason="this torch has no torch.distributed.checkpoint (torch 2.x)")
    import rckpt.dcp
    with pytest.raises(TypeError, match=r"rckpt\.dcp\.Writer: level must be an int, not 'x'"):
        rckpt.dcp.Writer(tmp / "x.rckpt", level="x")  # type: ignore[arg-type]
    with pytest.raises(rckpt.InvalidArgumentError, match=r"^codec 'lz4': expected none or zstd"):
        rckpt.dcp.Writer(tmp / "x.rckpt", codec="lz4")


def test_the_lightning_plugin_names_a_path_of_the_wrong_type():
    pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning)")
    import rckpt.lightning
    with pytest.raises(TypeError, match=r"rckpt\.lightning: path must be a str or os\.PathLike, "
                                        r"not int"):
        rckpt.lightning.CheckpointIO().save_checkpoint({"a": 1}, 3)
