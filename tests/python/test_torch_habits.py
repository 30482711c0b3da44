"""What torch users write with torch.save / torch.load, written with rckpt."""

import collections

import pytest
import torch

import rckpt
from conftest import assert_same


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)


def _net(seed):
    torch.manual_seed(seed)
    return Net()


def test_a_flat_state_dict_restores_the_model(tmp):
    model = _net(0)
    rckpt.save(tmp / "m.rckpt", model.state_dict())
    other = _net(1)
    back = rckpt.load(tmp / "m.rckpt")
    assert type(back) is collections.OrderedDict
    assert back._metadata == model.state_dict()._metadata, "module versions kept"  # type: ignore[attr-defined]
    other.load_state_dict(back)
    assert_same(dict(other.state_dict()), dict(model.state_dict()))
    # One "model" section (model role: map_location and model_device apply); load_into too.
    ck = rckpt.load(tmp / "m.rckpt", file_tree=True)
    assert ck.sections == {"model": "model"}
    third = _net(2)
    rckpt.load_into(tmp / "m.rckpt", third.state_dict())
    assert_same(dict(third.state_dict()), dict(model.state_dict()))


def test_a_tensor_and_other_objects_come_back_as_themselves(tmp):
    t = torch.randn(3, 5)
    rckpt.save(tmp / "t.rckpt", t)
    assert_same(rckpt.load(tmp / "t.rckpt"), t)
    for obj in ([t, 1, "x"], (2, 3.5), {0: t, 1: "one"}, 7, None):
        rckpt.save(tmp / "o.rckpt", obj)
        assert_same(rckpt.load(tmp / "o.rckpt"), obj)


def test_a_dict_of_sections_still_gives_a_checkpoint(tmp):
    rckpt.save(tmp / "s.rckpt", {"model": {"w": torch.ones(2)}, "controller": {"epoch": 1}})
    assert isinstance(rckpt.load(tmp / "s.rckpt"), rckpt.Checkpoint)
    # A flat mapping of tensors with rng= stays sections (the RNG needs a Checkpoint).
    rckpt.save(tmp / "r.rckpt", {"w": torch.ones(2)}, rng=rckpt.capture_rng())
    ck = rckpt.load(tmp / "r.rckpt")
    assert isinstance(ck, rckpt.Checkpoint) and list(ck) == ["w"] and len(ck.rng) > 0


def test_saving_a_module_says_what_to_write(tmp):
    with pytest.raises(TypeError, match=r"rckpt\.save stores state, not modules .*write "
                                        r"rckpt\.save\(path, model\.state_dict\(\)\) and "
                                        r"model\.load_state_dict\(rckpt\.load\(path\)\)"):
        rckpt.save(tmp / "m.rckpt", _net(0))
    assert not (tmp / "m.rckpt").exists()
    with pytest.raises(TypeError, match=r"rng= needs a dict of sections"):
        rckpt.save(tmp / "m.rckpt", torch.ones(2), rng=rckpt.capture_rng())


def test_a_checkpoint_is_a_mapping(tmp):
    rckpt.save(tmp / "c.rckpt", {"model": {"w": torch.ones(256)}, "controller": {"epoch": 1}})
    ck = rckpt.load(tmp / "c.rckpt")
    assert "model" in ck and "nope" not in ck
    assert ck.get("nope") is None and ck.get("controller") == {"epoch": 1}
    assert list(ck.keys()) == ["model", "controller"]
    assert [k for k, _ in ck.items()] == ["model", "controller"]
    assert list(ck.values())[1] == {"epoch": 1}
    ck["extra"] = {"note": "added"}
    del ck["controller"]
    d = ck.to_dict()
    assert type(d) is dict and list(d) == ["model", "extra"] and d["model"] is ck["model"]
    assert repr(ck) == ("<rckpt.Checkpoint sections=['model', 'extra'] tensors=1 (1.0 KiB) "
                        "rng=[]>")
    # What a Checkpoint holds saves again as it is.
    rckpt.save(tmp / "c2.rckpt", ck)
    assert_same(rckpt.load(tmp / "c2.rckpt").to_dict(), d)


def test_map_location_callables_of_torch_and_of_rckpt(tmp):
    rckpt.save(tmp / "m.rckpt", {"model": {"w": torch.ones(3)}}, origin="cuda:1")
    seen = []

    def torch_style(storage, loc):
        seen.append(loc)
        return storage

    ck = rckpt.load(tmp / "m.rckpt", map_location=torch_style)
    assert seen == ["cuda:1"] and ck.placement == {"model.w": "cpu"}
    ck = rckpt.load(tmp / "m.rckpt", map_location=lambda storage, loc: storage.cpu())
    assert ck.placement == {"model.w": "cpu"}
    ck = rckpt.load(tmp / "m.rckpt", map_location=lambda storage, loc: None, emulate_devices=2)
    assert ck.placement == {"model.w": "cuda:1"}, "None: the default placement"
    ck = rckpt.load(tmp / "m.rckpt", map_location=lambda info: "cpu")
    assert ck.placement == {"model.w": "cpu"}
    with pytest.raises(TypeError, match=r"takes 3 required arguments; rckpt calls fn\(info\)"):
        rckpt.load(tmp / "m.rckpt", map_location=lambda a, b, c: None)
    with pytest.raises(TypeError, match=r"returned <class 'str'> for 'model\.w'; a torch-style "
                                        r"map_location\(storage, location\) returns a storage"):
        rckpt.load(tmp / "m.rckpt", map_location=lambda storage, loc: "cpu")


def test_metadata_that_imitates_rckpts_own_keys(tmp):
    with pytest.raises(ValueError, match=r"metadata key 'rckpt\.python\.root' is rckpt's own"):
        rckpt.save(tmp / "m.rckpt", {"model": {}}, metadata={"rckpt.python.root": "model"})
    # A world size that is not a number: an ordinary file, its tree as saved.
    rckpt.save(tmp / "w.rckpt", {"common": {"x": 1}}, metadata={"rckpt.world_size": "many"})
    ck = rckpt.load(tmp / "w.rckpt")
    assert list(ck) == ["common"] and ck.saved_world_size is None


def test_a_collective_file_of_one_rank_gives_that_ranks_rng_and_state(tmp):
    # The layout rckpt/distributed.h documents, as one rank writes it (no MPI needed here).
    rng = rckpt.capture_rng()
    in_file = rckpt.RngState((f"rank0/{name}", record) for name, record in rng.items())
    rckpt.save(tmp / "c.rckpt", {"common": {"model": {"w": torch.ones(2)}, "controller": {"e": 1}},
                                 "ranks": [{"cursor": 3}]},
               rng=in_file, metadata={"rckpt.world_size": "1"})
    ck = rckpt.load(tmp / "c.rckpt")
    assert list(ck) == ["model", "controller"] and ck.saved_world_size == 1
    assert ck.rank_states == [{"cursor": 3}] and ck.rank_state == {"cursor": 3}
    assert list(ck.rng) == list(rng) and list(ck.saved_rng) == [0]
    assert ck.rng["torch.cpu"].data == rng["torch.cpu"].data
    assert "saved_world_size=1" in repr(ck)
    only = rckpt.load(tmp / "c.rckpt", skip_sections=["controller"])
    assert list(only) == ["model"]
