"""rckpt.lightning: Lightning's CheckpointIO plug-ins. A Trainer's checkpoint dict
round-trips through an .rckpt; a run resumed with trainer.fit(ckpt_path=...)
continues bit-identically (RNG states saved and restored); the async variant
defers removals until its save is durable and surfaces errors; bad files raise
rckpt errors naming the path."""

import copy
import os
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import rckpt
from conftest import assert_same, run_cli

pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning; "
                                        "the torch 2 stage of scripts/test.sh has it)")
import lightning as L  # noqa: E402
import rckpt.lightning  # noqa: E402  (needs Lightning)
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402


class Net(L.LightningModule):
    """Dropout and a shuffling loader without a generator of its own: both draw from the
    global RNG, so a resume that did not restore it would diverge."""

    def __init__(self, lr=0.01, hidden=16):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.3), torch.nn.Linear(hidden, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)]


def loader():
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(40, 4, generator=g),
                                          torch.randn(40, 1, generator=g))
    return torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)  # 5 steps an epoch


def trainer(directory, io, **kwargs):
    kwargs.setdefault("callbacks", [ModelCheckpoint(dirpath=directory, save_last=True)])
    return L.Trainer(plugins=[io], logger=False, enable_progress_bar=False,
                     enable_model_summary=False, default_root_dir=directory,
                     deterministic=True, **kwargs)


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class Recording(rckpt.lightning.CheckpointIO):
    """Keeps a copy of each checkpoint dict Lightning hands over."""

    def __init__(self, **options):
        super().__init__(**options)
        self.saved = []

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        self.saved.append(copy.deepcopy(checkpoint))
        super().save_checkpoint(checkpoint, path, storage_options)


def test_trainer_checkpoint_round_trips_whole(tmp_path):
    L.seed_everything(0)
    io = Recording()
    t = trainer(tmp_path / "run", io, max_steps=7)
    t.fit(Net(), loader())
    path = tmp_path / "manual.ckpt"
    t.save_checkpoint(path)
    saved = io.saved[-1]
    assert {"state_dict", "optimizer_states", "lr_schedulers", "loops", "callbacks",
            "hyper_parameters", "epoch", "global_step", "pytorch-lightning_version"} <= set(saved)
    after_save = torch.rand(4)  # what the generator gives right after the save

    back = rckpt.lightning.CheckpointIO().load_checkpoint(path)
    assert_same(saved, back, "checkpoint")  # every key, type, order and tensor bit
    assert torch.equal(torch.rand(4), after_save), "the torch RNG state was not restored"
    assert back["state_dict"]._metadata == saved["state_dict"]._metadata
    assert rckpt.load(path)["global_step"] == 7  # an ordinary rckpt file, by Lightning's keys


def resumed_weights(tmp_path, io_class, stop_epochs=2, total_epochs=4, **options):
    """(weights of an uninterrupted run, weights of one stopped and resumed from last.ckpt)."""
    L.seed_everything(0)
    model = Net()
    trainer(tmp_path / "ref", io_class(**options), max_epochs=total_epochs).fit(model, loader())
    reference = model.state_dict()

    L.seed_everything(0)
    first = trainer(tmp_path / "run", io_class(**options), max_epochs=stop_epochs)
    first.fit(Net(), loader())
    last = tmp_path / "run" / "last.ckpt"
    assert rckpt.load(last)["global_step"] == 5 * stop_epochs  # ModelCheckpoint's .ckpt name

    L.seed_everything(1234)  # the resumed process starts from other generator states
    model = Net()
    resumed = trainer(tmp_path / "resumed", io_class(**options), max_epochs=total_epochs)
    resumed.fit(model, loader(), ckpt_path=last)
    assert resumed.global_step == 5 * total_epochs
    return reference, model.state_dict()


@pytest.mark.parametrize("io_class", [rckpt.lightning.CheckpointIO,
                                      rckpt.lightning.AsyncCheckpointIO])
def test_stopped_and_resumed_fit_is_bit_identical(tmp_path, io_class):
    reference, resumed = resumed_weights(tmp_path, io_class)
    assert_same(reference, resumed, "weights")


def test_without_rng_states_the_resumed_fit_diverges(tmp_path):
    # The control of the test above: dropout masks and shuffles depend on the RNG.
    reference, resumed = resumed_weights(tmp_path, rckpt.lightning.CheckpointIO, rng=False)
    assert any(not torch.equal(reference[k], resumed[k]) for k in reference)


def test_model_checkpoint_with_the_rckpt_extension(tmp_path):
    callback = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    callback.FILE_EXTENSION = ".rckpt"
    L.seed_everything(0)
    trainer(tmp_path, rckpt.lightning.CheckpointIO(), max_epochs=1,
            callbacks=[callback]).fit(Net(), loader())
    assert sorted(os.listdir(tmp_path)) == ["epoch=0-step=5.rckpt", "last.rckpt"]
    assert rckpt.load(tmp_path / "last.rckpt")["epoch"] == 0


def test_lightning_torch_file_converted_by_the_cli_loads(tmp_path):
    L.seed_everything(0)
    t = L.Trainer(max_steps=3, logger=False, enable_progress_bar=False,
                  enable_model_summary=False, enable_checkpointing=False)
    t.fit(Net(), loader())
    t.save_checkpoint(tmp_path / "old.ckpt")  # Lightning's own torch.save file
    result = run_cli("convert", tmp_path / "old.ckpt", tmp_path / "old.rckpt")
    assert result.returncode == 0, result.stderr
    old = torch.load(tmp_path / "old.ckpt", weights_only=False)
    back = rckpt.lightning.CheckpointIO().load_checkpoint(tmp_path / "old.rckpt")
    assert sorted(back) == sorted(old) and back["global_step"] == 3
    assert_same(old["state_dict"], back["state_dict"], "state_dict")
    assert_same(old["optimizer_states"], back["optimizer_states"], "optimizer_states")


def test_unstorable_hyperparameter_is_a_type_error_naming_it(tmp_path):
    with pytest.raises(TypeError, match=r"hyper_parameters\.encoder: cannot store"):
        rckpt.lightning.CheckpointIO().save_checkpoint(
            {"hyper_parameters": {"encoder": object()}}, tmp_path / "x.ckpt")
    assert not os.path.exists(tmp_path / "x.ckpt")


class Validated(Net):
    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))


def test_validate_with_ckpt_path_loads_through_the_plugin(tmp_path):
    L.seed_everything(0)
    t = trainer(tmp_path, rckpt.lightning.CheckpointIO(), max_steps=3, callbacks=[])
    t.fit(Validated(), loader())
    t.save_checkpoint(tmp_path / "a.ckpt")
    saved = rckpt.load(tmp_path / "a.ckpt")["state_dict"]

    class Counting(rckpt.lightning.CheckpointIO):
        loads = 0

        def load_checkpoint(self, path, map_location="cpu", weights_only=None):
            Counting.loads += 1
            return super().load_checkpoint(path, map_location, weights_only)

    model = Validated()
    trainer(tmp_path, Counting(), callbacks=[]).validate(model, loader(),
                                                         ckpt_path=tmp_path / "a.ckpt")
    assert Counting.loads == 1
    assert_same(dict(saved), dict(model.state_dict()), "state_dict")


def test_load_follows_map_location(tmp_path):
    path = tmp_path / "ck.rckpt"
    rckpt.save(path, {"state_dict": {"w": torch.arange(4.0)}, "epoch": 3},
               origin={"state_dict": "cuda:1"})  # as if trained on cuda:1
    io = rckpt.lightning.CheckpointIO()
    assert io.load_checkpoint(path)["state_dict"]["w"].device.type == "cpu"  # the default
    with pytest.raises(rckpt.DeviceUnavailableError, match="cuda:1"):
        io.load_checkpoint(path, map_location=None)  # origin devices, as torch.load
    seen = []

    def to_cpu(storage, location):  # torch's form
        seen.append(location)
        return storage
    back = io.load_checkpoint(path, map_location=to_cpu)
    assert seen == ["cuda:1"] and back["epoch"] == 3
    back = io.load_checkpoint(path, map_location={"cuda:1": "cpu"})
    assert torch.equal(back["state_dict"]["w"], torch.arange(4.0))
    assert io.load_checkpoint(path, map_location=torch.device("cpu"), weights_only=True)["epoch"] == 3


def test_storage_options_set_save_options(tmp_path):
    io = rckpt.lightning.CheckpointIO()
    state = {"state_dict": {"w": torch.zeros(1 << 18)}}
    io.save_checkpoint(state, tmp_path / "raw.ckpt")
    io.save_checkpoint(state, tmp_path / "zstd.ckpt", storage_options={"codec": "zstd"})
    assert os.path.getsize(tmp_path / "zstd.ckpt") < os.path.getsize(tmp_path / "raw.ckpt") // 10
    assert rckpt.lightning.CheckpointIO(codec="zstd").options["codec"] == "zstd"
    with pytest.raises(TypeError, match=r"unknown key\(s\) \['compress'\]"):
        io.save_checkpoint(state, tmp_path / "x.ckpt", storage_options={"compress": True})
    with pytest.raises(ValueError, match="'gs://bucket/x.ckpt' is a gs:// URL; rckpt.lightning"):
        io.save_checkpoint(state, "gs://bucket/x.ckpt")  # s3:// is test_s3_manager.py's
    assert not os.path.exists(tmp_path / "x.ckpt")


def test_dict_of_tensors_without_rng_round_trips(tmp_path):
    io = rckpt.lightning.CheckpointIO(rng=False)
    state = {"w": torch.arange(3.0), "b": torch.ones(1)}
    io.save_checkpoint(state, tmp_path / "flat.ckpt")
    assert_same(state, io.load_checkpoint(tmp_path / "flat.ckpt"), "state")


def test_save_makes_the_directory(tmp_path):
    rckpt.lightning.CheckpointIO().save_checkpoint({"epoch": 1}, tmp_path / "a" / "b" / "c.ckpt")
    assert rckpt.load(tmp_path / "a" / "b" / "c.ckpt")["epoch"] == 1


def test_remove_checkpoint(tmp_path):
    io = rckpt.lightning.CheckpointIO()
    io.save_checkpoint({"epoch": 1}, tmp_path / "a.ckpt")
    io.remove_checkpoint(tmp_path / "a.ckpt")
    assert not os.path.exists(tmp_path / "a.ckpt")
    io.remove_checkpoint(tmp_path / "a.ckpt")  # already gone: nothing to do
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "shard").write_bytes(b"x")
    io.remove_checkpoint(tmp_path / "d")
    assert not os.path.exists(tmp_path / "d")


def test_saves_and_removals_go_through_the_librarys_file_system(tmp_path, monkeypatch):
    """The plug-in's directories, saves and removals go through the library's file systems
    (rckpt.storage), so the in-memory one holds them all and nothing reaches the disk."""
    mem = rckpt._core.memory_file_system()
    monkeypatch.setattr(rckpt.s3, "file_system", lambda paths, s3, who: mem)
    io = rckpt.lightning.CheckpointIO()
    path = str(tmp_path / "run" / "a.ckpt")
    io.save_checkpoint({"epoch": 1}, path)
    assert rckpt.storage.exists(path)
    assert io.load_checkpoint(path)["epoch"] == 1
    io.remove_checkpoint(path)
    assert not rckpt.storage.exists(path)
    rckpt.storage.write(str(tmp_path / "d" / "shard"), b"x")
    io.remove_checkpoint(tmp_path / "d")
    assert not rckpt.storage.exists(str(tmp_path / "d" / "shard"))
    assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "d")


def test_missing_and_corrupt_files_raise_rckpt_errors_naming_the_path(tmp_path):
    io = rckpt.lightning.CheckpointIO()
    missing = tmp_path / "nope.ckpt"
    with pytest.raises(rckpt.NotFoundError, match="nope.ckpt"):
        io.load_checkpoint(missing)
    corrupt = tmp_path / "bad.ckpt"
    io.save_checkpoint({"state_dict": {"w": torch.ones(1000)}}, corrupt)
    corrupt.write_bytes(corrupt.read_bytes()[:-64])  # a torn write: the footer is gone
    with pytest.raises(rckpt.CorruptionError, match="bad.ckpt"):
        io.load_checkpoint(corrupt)
    not_a_dict = tmp_path / "tensor.rckpt"
    rckpt.save(not_a_dict, torch.ones(2))
    with pytest.raises(ValueError, match="not a Lightning checkpoint"):
        io.load_checkpoint(not_a_dict)
    with pytest.raises(rckpt.CorruptionError, match="bad.ckpt"):
        trainer(tmp_path / "run", io, max_epochs=1).fit(Net(), loader(), ckpt_path=corrupt)


class Held(rckpt.lightning.AsyncCheckpointIO):
    """Each save waits in its progress callback until the test releases it; ``cancel``
    makes it fail (a cancelled save raises rckpt.IoError)."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.cancel = False

    def _save_args(self, checkpoint, path, storage_options):
        path, sections, options = super()._save_args(checkpoint, path, storage_options)

        def progress(done, total):
            self.release.wait()
            return not self.cancel
        options["progress"] = progress
        return path, sections, options


@pytest.fixture
def held():
    io = Held()
    yield io
    io.release.set()  # a failed assertion must not leave a save blocked


def test_async_removal_waits_until_the_save_in_flight_is_durable(tmp_path, held):
    io = held
    old, new = tmp_path / "old.ckpt", tmp_path / "new.ckpt"
    rckpt.lightning.CheckpointIO().save_checkpoint({"epoch": 1}, old)
    io.save_checkpoint({"epoch": 2, "w": torch.ones(8)}, new)
    io.remove_checkpoint(old)  # as ModelCheckpoint does right after starting the new save
    assert os.path.exists(old) and not os.path.exists(new)
    io.release.set()
    io.teardown()  # waits
    assert not os.path.exists(old)
    assert rckpt.load(new)["epoch"] == 2
    io.remove_checkpoint(new)  # nothing in flight: at once
    assert not os.path.exists(new)


def test_async_failure_surfaces_at_the_next_save_and_keeps_the_old_file(tmp_path, held):
    io = held
    old = tmp_path / "old.ckpt"
    rckpt.lightning.CheckpointIO().save_checkpoint({"epoch": 1}, old)
    io.save_checkpoint({"epoch": 2, "w": torch.ones(8)}, tmp_path / "new.ckpt")
    io.remove_checkpoint(old)
    io.cancel = True
    io.release.set()
    with pytest.raises(rckpt.IoError, match="new.ckpt"):
        io.save_checkpoint({"epoch": 3}, tmp_path / "newer.ckpt")
    assert rckpt.load(old)["epoch"] == 1  # the save failed: nothing was removed
    assert not os.path.exists(tmp_path / "new.ckpt") and not os.path.exists(tmp_path / "newer.ckpt")
    io.cancel = False
    io.save_checkpoint({"epoch": 3}, tmp_path / "newer.ckpt")
    io.teardown()
    assert rckpt.load(tmp_path / "newer.ckpt")["epoch"] == 3
    assert not os.path.exists(old)  # removed once a later save was durable


def test_async_failure_surfaces_at_teardown(tmp_path, held):
    io = held
    io.save_checkpoint({"epoch": 2}, tmp_path / "new.ckpt")
    io.cancel = True
    io.release.set()
    with pytest.raises(rckpt.IoError, match="new.ckpt"):
        io.teardown()
    io.teardown()  # raised once


def test_async_save_holds_the_state_at_the_call(tmp_path, held):
    io = held
    w = torch.zeros(16)
    io.save_checkpoint({"state_dict": {"w": w}}, tmp_path / "a.ckpt")
    w.add_(1)  # training goes on while the file is written
    io.release.set()
    back = io.load_checkpoint(tmp_path / "a.ckpt")  # waits for the save first
    assert torch.equal(back["state_dict"]["w"], torch.zeros(16))


def test_pytorch_lightning_trainer_takes_the_plugin():
    pl = pytest.importorskip("pytorch_lightning", reason="pytorch_lightning is not installed")
    io = rckpt.lightning.CheckpointIO()
    assert isinstance(io, pl.plugins.io.CheckpointIO)
    t = pl.Trainer(plugins=[io], logger=False, enable_progress_bar=False,
                   enable_checkpointing=False)
    assert t.strategy.checkpoint_io is io


def test_import_rckpt_does_not_import_lightning():
    code = ("import sys, rckpt; print('lightning' in sys.modules, "
            "'pytorch_lightning' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_lightning_missing_is_an_import_error_saying_what_to_install(tmp_path):
    # A Python that finds no Lightning: a directory of empty stand-ins first on its path.
    for name in ("lightning", "lightning_fabric"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('absent')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", "import rckpt.lightning"], capture_output=True,
                         text=True, env=env)
    assert out.returncode != 0
    assert "rckpt.lightning needs Lightning: pip install lightning" in out.stderr

