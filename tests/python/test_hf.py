"""rckpt.hf: a Trainer checkpoint folder into one .rckpt and back, file by file, with what
each file holds (test_hf_trainer.py resumes the real Trainer from it)."""

import json
import os
import random

import numpy as np
import pytest
import torch

import rckpt
import rckpt.hf


class Opaque:
    """Stands for an object torch.load(weights_only=True) cannot rebuild (TrainingArguments)."""

    def __init__(self):
        self.lr = 0.5


def trainer_state():
    return {"global_step": 3, "epoch": 0.5, "best_metric": None, "is_world_process_zero": True,
            "log_history": [{"loss": 2.5, "step": 1, "learning_rate": 1e-05},
                            {"loss": float("nan"), "step": 2, "grad_norm": 1e16}],
            "trial_name": "\u00e9t\u00e9", "stateful_callbacks": {}}


def make_folder(d, safetensors=True):
    """A folder as Trainer leaves checkpoint-N (smaller), plus odd files."""
    d.mkdir(parents=True)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    if safetensors:
        from safetensors.torch import save_file
        save_file(model.state_dict(), str(d / "model.safetensors"), metadata={"format": "pt"})
    else:
        torch.save(model.state_dict(), d / "pytorch_model.bin")
    torch.save(opt.state_dict(), d / "optimizer.pt")
    torch.save(sched.state_dict(), d / "scheduler.pt")
    np.random.seed(2)
    np.random.standard_normal()
    for name in ("rng_state.pth", "rng_state_1.pth"):
        torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                    "cpu": torch.get_rng_state()}, d / name)
    (d / "trainer_state.json").write_text(json.dumps(trainer_state(), indent=2, sort_keys=True)
                                          + "\n")
    torch.save(Opaque(), d / "training_args.bin")
    (d / "config.json").write_text('{"model_type": "toy"}\n')
    (d / "empty.txt").write_bytes(b"")
    (d / "sub").mkdir()
    (d / "sub" / "notes.bin").write_bytes(bytes(range(256)) * 3)


def files_of(d):
    return sorted(os.path.relpath(os.path.join(r, n), d).replace(os.sep, "/")
                  for r, _, names in os.walk(d) for n in names)


def same(a, b, path):
    assert type(a) is type(b), path
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}.{i}")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), path
    else:
        assert a == b, path


def have_safetensors():
    try:
        import safetensors.torch  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_pack_then_unpack_gives_every_file_back(tmp, weights):
    if weights == "safetensors" and not have_safetensors():
        pytest.skip("safetensors is not installed (pip install safetensors)")
    src = tmp / "checkpoint-3"
    make_folder(src, safetensors=weights == "safetensors")
    report = rckpt.hf.pack(src, tmp / "c.rckpt")
    weights_file = "model.safetensors" if weights == "safetensors" else "pytorch_model.bin"
    assert report.files == {
        "config.json": "bytes", "empty.txt": "bytes",
        weights_file: "safetensors" if weights == "safetensors" else "pytorch",
        "optimizer.pt": "pytorch", "rng_state.pth": "pytorch", "rng_state_1.pth": "pytorch",
        "scheduler.pt": "pytorch", "sub/notes.bin": "bytes", "trainer_state.json": "tree",
        "training_args.bin": "bytes"}
    assert report.reasons == {}
    back = rckpt.hf.unpack(tmp / "c.rckpt", tmp / "out" / "checkpoint-3")
    assert back.files == files_of(src) == files_of(tmp / "out" / "checkpoint-3")
    out = tmp / "out" / "checkpoint-3"
    for rel in ("config.json", "empty.txt", "sub/notes.bin", "training_args.bin",
                "trainer_state.json"):
        assert (out / rel).read_bytes() == (src / rel).read_bytes(), rel
    for rel in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "rng_state_1.pth") + \
            (("pytorch_model.bin",) if weights == "bin" else ()):
        same(torch.load(src / rel, weights_only=False), torch.load(out / rel, weights_only=False),
             rel)
    if weights == "safetensors":
        from safetensors import safe_open
        with safe_open(str(src / weights_file), "pt") as a, safe_open(str(out / weights_file),
                                                                       "pt") as b:
            assert a.metadata() == {"format": "pt"} and b.metadata()["format"] == "pt"
            assert list(a.keys()) == list(b.keys())
            for k in a.keys():
                assert torch.equal(a.get_tensor(k), b.get_tensor(k)), k


def test_the_packed_file_is_a_checkpoint_of_the_folders_state(tmp):
    make_folder(tmp / "c", safetensors=False)
    rckpt.hf.pack(tmp / "c", tmp / "c.rckpt")
    ck = rckpt.load(tmp / "c.rckpt")
    assert set(ck) == {"pytorch_model", "optimizer", "scheduler", "rng_state", "rng_state_1",
                       "trainer_state", "files"}
    assert ck["trainer_state"]["global_step"] == 3
    assert ck["optimizer"]["param_groups"][0]["lr"] == 1e-3
    assert ck.sections["model"] == "model" and ck.sections["files"] == "host"
    assert ck.tensors["pytorch_model.0.weight"].shape == (4, 3)
    assert bytes(ck["files"]["sub/notes.bin"].numpy()) == bytes(range(256)) * 3
    # The RNG states are records, NumPy's in NumPy's own form.
    assert ck.rng["rng_state.numpy"].kind == "numpy"
    assert ck["rng_state"]["numpy"][0] == "MT19937"
    assert ck.rng["rng_state_1.cpu"].kind == "torch_cpu"


def test_files_pack_cannot_write_back_the_same_way_are_carried_as_bytes(tmp):
    src = tmp / "c"
    make_folder(src, safetensors=False)
    torch.save({"state": {}, "param_groups": [], "extra": Opaque()}, src / "optimizer.pt")
    (src / "trainer_state.json").write_text('{"global_step": 3}')  # not as Trainer writes it
    (src / "scheduler.pt").write_bytes(b"not a zip")
    report = rckpt.hf.pack(src, tmp / "c.rckpt")
    assert report.files["optimizer.pt"] == "bytes"
    assert "test_hf.Opaque" in report.reasons["optimizer.pt"]
    assert report.files["trainer_state.json"] == "bytes"
    assert report.files["scheduler.pt"] == "bytes"
    assert "not a torch.save zip" in report.reasons["scheduler.pt"]
    rckpt.hf.unpack(tmp / "c.rckpt", tmp / "out")
    for rel in ("optimizer.pt", "trainer_state.json", "scheduler.pt"):
        assert (tmp / "out" / rel).read_bytes() == (src / rel).read_bytes()


def test_unpack_refuses_what_it_cannot_do_and_leaves_nothing_behind(tmp):
    make_folder(tmp / "c", safetensors=False)
    rckpt.hf.pack(tmp / "c", tmp / "c.rckpt")
    (tmp / "busy").mkdir()
    (tmp / "busy" / "x").write_text("x")
    with pytest.raises(rckpt.InvalidArgumentError, match=r"busy' exists and is not an empty "
                                                         r"directory"):
        rckpt.hf.unpack(tmp / "c.rckpt", tmp / "busy")
    rckpt.save(tmp / "plain.rckpt", {"model": {"w": torch.ones(2)}})
    with pytest.raises(rckpt.InvalidArgumentError, match=r"holds no folder \(no metadata "
                                                         r"'rckpt.folder'"):
        rckpt.hf.unpack(tmp / "plain.rckpt", tmp / "new")
    assert sorted(os.listdir(tmp)) == ["busy", "c", "c.rckpt", "plain.rckpt"]
    (tmp / "empty").mkdir()  # an empty folder is fine
    assert rckpt.hf.unpack(tmp / "c.rckpt", tmp / "empty").files == files_of(tmp / "c")


def test_pack_names_a_folder_that_is_not_one(tmp):
    with pytest.raises(rckpt.NotFoundError, match="folder '.*nope' does not exist"):
        rckpt.hf.pack(tmp / "nope", tmp / "x.rckpt")
    (tmp / "f").write_text("x")
    with pytest.raises(rckpt.InvalidArgumentError, match="is not a directory"):
        rckpt.hf.pack(tmp / "f", tmp / "x.rckpt")
    (tmp / "d").mkdir()
    os.symlink(tmp, tmp / "d" / "link")
    with pytest.raises(rckpt.InvalidArgumentError, match="link' is a symbolic link to a "
                                                         "directory"):
        rckpt.hf.pack(tmp / "d", tmp / "x.rckpt")
    with pytest.raises(TypeError, match="chunk_bytes must be"):
        rckpt.hf.pack(tmp, tmp / "x.rckpt", chunk_bytes="big")  # type: ignore[arg-type]
    assert not (tmp / "x.rckpt").exists()
