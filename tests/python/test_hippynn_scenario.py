"""The hippynn restart scenario (the seed's bug) against the Python API: a
checkpoint of a run on cuda:1 restored with model_device, with map_location
as a device, a tag map and a callback, restore_db=False as skip_sections,
and both options refused before any I/O. Devices are the library's
host-emulated ones (emulate_devices), so this runs without GPUs."""

import pytest
import torch

import rckpt


def hippynn_run():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=2)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(5, 4)).sum().backward()
        opt.step()
    sched.step(0.5)
    return model, opt, sched


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    model, opt, sched = hippynn_run()
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "controller": {"current_epoch": 4, "boredom": 1, "batch_size": 32, "_max_epochs": 100,
                       "stopping_key": "Loss"},
        "metrics": {"best_model": model.state_dict(), "epoch_best_metric_values": [0.9, 0.5, 0.4],
                    "other": {"device": torch.device("cuda", 1)}},
        "database": {"arr_x": torch.randn(10, 4), "arr_y": torch.randn(10, 1)},
    }
    rng = rckpt.capture_rng()
    path = tmp_path_factory.mktemp("hip") / "best_checkpoint.rckpt"
    # Saved as on the seed's machine: the model side on cuda:1.
    rckpt.save(path, state, rng=rng, origin={"model": "cuda:1", "optimizer": "cuda:1",
                                             "metrics": "cuda:1"})
    return path, state, rng


def test_saved_tags_model_cuda1_rng_cpu(ckpt):
    path, _, _ = ckpt
    ck = rckpt.load(path, map_location="cpu")
    assert ck.origin["model.0.weight"] == "cuda:1"
    assert ck.origin["metrics.best_model.0.weight"] == "cuda:1"
    assert ck.origin["optimizer.state.0.exp_avg"] == "cuda:1"
    assert all(r.origin == "cpu" for r in ck.rng.values())
    assert ck.rng["torch.cpu"].kind == "torch_cpu" and len(ck.rng["torch.cpu"].data) == 5056


def test_both_options_refused_before_io():
    with pytest.raises(rckpt.InvalidArgumentError, match="model_device") as e:
        rckpt.load("/nonexistent/best_checkpoint.rckpt", map_location="cpu", model_device="auto")
    assert isinstance(e.value, ValueError) and e.value.code == "InvalidArgument"


def test_invalid_model_device_is_a_device_spec_error(ckpt):
    with pytest.raises(rckpt.InvalidArgumentError, match="cuda:x"):
        rckpt.load(ckpt[0], model_device="cuda:x")


@pytest.mark.parametrize("devices", [0, 1])
def test_no_option_on_a_machine_without_cuda1_names_the_fix(ckpt, devices):
    with pytest.raises(rckpt.DeviceUnavailableError, match="cuda:1") as e:
        rckpt.load(ckpt[0], emulate_devices=devices)
    assert "model_device" in str(e.value) or "map_location" in str(e.value)


def test_no_option_with_cuda1_present_restores_where_saved(ckpt):
    ck = rckpt.load(ckpt[0], emulate_devices=2)
    assert ck.placement["model.0.weight"] == "cuda:1"
    assert ck.placement["database.arr_x"] == "cpu"


def test_map_location_cpu_puts_everything_on_cpu(ckpt):
    path, state, _ = ckpt
    ck = rckpt.load(path, map_location="cpu", emulate_devices=2)
    assert set(ck.placement.values()) == {"cpu"}
    model, opt, _ = hippynn_run()
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    rckpt.restore_rng(ck.rng)


def test_map_location_device_keeps_rng_and_host_records_on_host(ckpt):
    path, _, rng = ckpt
    ck = rckpt.load(path, map_location=torch.device("cuda", 0), emulate_devices=1)
    assert ck.placement["model.0.weight"] == "cuda:0"
    assert ck.placement["optimizer.state.0.step"] == "cpu"  # Adam's step: host role
    torch.manual_seed(99)
    rckpt.restore_rng(ck.rng)  # the seed's bug: this raised TypeError in hippynn
    assert torch.equal(torch.get_rng_state(), torch.frombuffer(bytearray(rng["torch.cpu"].data),
                                                               dtype=torch.uint8))


def test_map_location_tag_map(ckpt):
    ck = rckpt.load(ckpt[0], map_location={"cuda:1": "cuda:0"}, emulate_devices=1)
    assert ck.placement["model.0.weight"] == "cuda:0"
    assert ck.placement["metrics.best_model.0.weight"] == "cpu"  # host role
    assert ck.placement["optimizer.state.0.exp_avg"] == "cuda:0"
    assert ck.placement["optimizer.state.0.step"] == "cpu"
    assert ck.placement["database.arr_x"] == "cpu"
    # A map whose keys match no tag leaves everything as stored.
    ck = rckpt.load(ckpt[0], map_location={"cuda:3": "cuda:0"}, emulate_devices=2)
    assert ck.placement["model.0.weight"] == "cuda:1"


def test_map_location_callback_none_falls_back_to_default(ckpt):
    seen = []

    def where(info):
        seen.append(info)
        return "cuda:0" if info["name"].endswith("weight") else None

    ck = rckpt.load(ckpt[0], map_location=where, emulate_devices=2)
    assert ck.placement["model.0.weight"] == "cuda:0"
    assert ck.placement["model.0.bias"] == "cuda:1"
    assert {i["origin"] for i in seen} >= {"cuda:1"}
    assert not any(i["role"] == "host" for i in seen)  # host role is never consulted

    def bad(info):
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        rckpt.load(ckpt[0], map_location=bad, emulate_devices=2)


@pytest.mark.parametrize("devices,expect", [(0, "cpu"), (1, "cuda:0")])
def test_model_device_auto_and_explicit(ckpt, devices, expect):
    path, state, _ = ckpt
    ck = rckpt.load(path, model_device="auto", emulate_devices=devices)
    assert ck.placement["model.0.weight"] == expect
    assert ck.placement["optimizer.state.0.exp_avg"] == expect
    assert ck.placement["optimizer.state.0.step"] == "cpu"
    assert ck.placement["metrics.best_model.0.weight"] == "cpu"
    assert ck.placement["database.arr_x"] == "cpu"
    assert all(r.origin == "cpu" for r in ck.rng.values())
    if devices == 0:
        # Resume: restore, then one optimizer step runs.
        model, opt, sched = hippynn_run()
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        assert ck["controller"] == state["controller"]
        assert opt.param_groups[0]["params"][0] is list(model.parameters())[0]
        model(torch.randn(2, 4)).sum().backward()
        opt.step()


def test_restore_db_false_is_skip_sections(ckpt):
    ck = rckpt.load(ckpt[0], model_device="cpu", skip_sections=["database"])
    assert "database" not in ck
    assert not any(n.startswith("database.") for n in ck.tensors)
    assert ck.stats["bytes_restored"] < rckpt.load(ckpt[0], model_device="cpu").stats["bytes_restored"]
    with pytest.raises(rckpt.InvalidArgumentError, match="nosuch"):
        rckpt.load(ckpt[0], skip_sections=["nosuch"])


def test_sections_reads_only_those(ckpt):
    ck = rckpt.load(ckpt[0], sections=["model", "controller"], map_location="cpu")
    assert list(ck) == ["model", "controller"]
    assert all(n.startswith("model.") for n in ck.tensors)
    assert ck["controller"] == ckpt[1]["controller"]


def test_load_into_mismatch_names_every_key_before_writing(ckpt):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(rckpt.InvalidArgumentError, match=r"model\.2\.weight.*shape"):
        rckpt.load_into(ckpt[0], {"model": model.state_dict()})
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    model, _, _ = hippynn_run()
    rckpt.load_into(ckpt[0], {"model": model.state_dict()})
    for k, v in model.state_dict().items():
        assert torch.equal(v, ckpt[1]["model"][k]), k
