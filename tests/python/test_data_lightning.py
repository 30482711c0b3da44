"""rckpt.data under Lightning's own fit loop: a run checkpointed in the middle of an epoch
(ModelCheckpoint(every_n_train_steps=...)), or on the last batch of one, and resumed with
trainer.fit(ckpt_path=...) trains the full length and ends with the global_step, the losses and
the weights of the run that never stopped, with 0 and 2 workers; and so does a 2-process DDP fit
on the CPU with Lightning's default flags, where Lightning injects its DistributedSampler and
the loader takes a ResumableSampler of the rank in its place (lightning_ddp_driver.py)."""

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import warnings

import pytest
import torch

from conftest import assert_same

pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning; "
                                        "the torch 2 stage of scripts/test.sh has it)")
import lightning as L  # noqa: E402
import rckpt.lightning  # noqa: E402  (needs Lightning)
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from lightning.fabric.utilities.distributed import DistributedSamplerWrapper  # noqa: E402
from lightning.pytorch.overrides.distributed import (  # noqa: E402
    UnrepeatedDistributedSamplerWrapper)
from rckpt.data import ResumableDataLoader, ResumableSampler  # noqa: E402

SAMPLES, BATCH, EPOCHS, EVERY = 32, 4, 4, 4  # 8 batches an epoch, a checkpoint every 4 steps


class Augmented(torch.utils.data.Dataset):
    """Noise and a random flip drawn from torch's global generator, in the loading process."""

    def __init__(self):
        g = torch.Generator().manual_seed(2)
        self.x, self.y = torch.randn(SAMPLES, 4, generator=g), torch.randn(SAMPLES, 1, generator=g)

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        x = self.x[i] + 0.1 * torch.randn(4)
        return (x.flip(0) if torch.rand(()) < 0.5 else x), self.y[i]


class Net(L.LightningModule):
    """Dropout draws from the global generator too; every step's loss is recorded."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.detach().clone())
        return loss

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=0.01)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)]


def loader(workers):
    return ResumableDataLoader(Augmented(), batch_size=BATCH, shuffle=True, seed=5,
                               num_workers=workers)


def trainer(directory, **limits):
    every = ModelCheckpoint(dirpath=directory, every_n_train_steps=EVERY, save_top_k=-1)
    return L.Trainer(plugins=[rckpt.lightning.CheckpointIO()], callbacks=[every], logger=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=directory, deterministic=True, **limits)


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture(scope="module", params=[0, 2], ids=["0 workers", "2 workers"])
def reference(request, tmp_path_factory):
    """The run that never stopped: 4 epochs of 8 batches."""
    workers = request.param
    L.seed_everything(0)
    model = Net()
    t = trainer(tmp_path_factory.mktemp("reference"), max_epochs=EPOCHS)
    t.fit(model, loader(workers))
    assert t.global_step == EPOCHS * SAMPLES // BATCH == 32
    return workers, model.losses, model.state_dict()


@pytest.mark.parametrize("stop_step,loader_state", [(12, (1, 16)), (8, (0, 32))],
                         ids=["mid-epoch", "last batch of an epoch"])
def test_resumed_fit_trains_the_full_length_bit_for_bit(tmp_path, reference, stop_step,
                                                       loader_state):
    workers, losses, weights = reference
    L.seed_everything(0)
    first = Net()
    t = trainer(tmp_path / "run", max_steps=stop_step)
    t.fit(first, loader(workers))
    assert t.global_step == stop_step
    assert_same(first.losses, losses[:stop_step], "losses before the stop")
    ckpt = next((tmp_path / "run").glob(f"*-step={stop_step}.ckpt"))
    saved = rckpt.load(ckpt)["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]
    # Lightning stops an epoch after len(loader) batches, before the iterator ends: the last
    # batch of epoch 0 leaves the loader at (epoch 0, position 32), Lightning's set_epoch(1) of
    # the resumed run moves it on.
    assert (saved["epoch"], saved["position"]) == loader_state

    L.seed_everything(1234)  # the resumed process starts from other generator states
    resumed = Net()
    t = trainer(tmp_path / "resumed", max_epochs=EPOCHS)
    t.fit(resumed, loader(workers), ckpt_path=ckpt)
    assert t.global_step == 32, "the resumed run trained short"
    assert t.current_epoch == EPOCHS
    assert_same(resumed.losses, losses[stop_step:], "losses after the resume")
    assert_same(resumed.state_dict(), weights, "weights")


DDP_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lightning_ddp_driver.py")
DDP_STOP = 6  # the driver's: 4 batches an epoch on each of 2 ranks, 3 epochs


@pytest.fixture(scope="module", autouse=True)
def ddp_driver(request, tmp_path_factory):
    """The driver's process, started with the module's first test when a DDP test is to run,
    so that its import of torch and Lightning and its ranks' fits go on beside the tests in
    this process; and its directory. Ended, with its ranks, when the module is done."""
    if not any(getattr(item, "module", None) is request.module and
               "ddp" in getattr(item, "fixturenames", ()) for item in request.session.items):
        yield None
        return
    out = tmp_path_factory.mktemp("ddp")
    with open(out / "driver.log", "w") as log:
        p = subprocess.Popen([sys.executable, DDP_DRIVER, str(out)], stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield p, out
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)  # the ranks too
        p.wait()


@pytest.fixture(scope="module")
def ddp(ddp_driver):
    """What the two ranks of the driver's fits saw: (run, rank) -> global step, losses,
    weights, training sampler; and the directory."""
    p, out = ddp_driver
    try:
        p.wait(timeout=900)  # the driver ends its ranks after 600 s
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    log = (out / "driver.log").read_text(errors="replace")
    assert p.returncode == 0, f"the driver ended with status {p.returncode}:\n{log[-6000:]}"
    runs = {}
    for name in ("reference", "uninjected", "passed.stopped", "passed.resumed",
                 "hooked.stopped", "hooked.resumed"):
        for rank in (0, 1):
            runs[name, rank] = torch.load(out / f"{name}.{rank}.pt", weights_only=False)
    return runs, out


def test_ddp_ranks_train_on_resumable_samplers_of_their_share(ddp):
    runs, _ = ddp
    for (name, rank), run in runs.items():
        # The loader's seed (5) kept, Lightning's rank and world size taken.
        assert run["sampler"] == ("ResumableSampler", 2, rank, 5), (name, rank)
    first, second = runs["reference", 0], runs["reference", 1]
    assert first["global_step"] == second["global_step"] == 12
    assert not torch.equal(torch.stack(first["losses"]), torch.stack(second["losses"])), \
        "both ranks trained on the same batches"
    assert_same(first["weights"], second["weights"], "weights of the two ranks")
    # Lightning's default flags train as use_distributed_sampler=False with the loader made
    # in train_dataloader() does.
    for rank in (0, 1):
        assert_same(runs["uninjected", rank]["losses"], runs["reference", rank]["losses"],
                    f"rank {rank}'s losses")
        assert_same(runs["uninjected", rank]["weights"], runs["reference", rank]["weights"])


@pytest.mark.parametrize("how", ["passed", "hooked"],
                         ids=["loader handed to fit", "loader made in train_dataloader"])
def test_ddp_fit_stopped_mid_epoch_resumes_bit_for_bit(ddp, how):
    runs, out = ddp
    saved = rckpt.load(out / how / f"epoch=1-step={DDP_STOP}.ckpt")
    loader_state = saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]
    assert (loader_state["epoch"], loader_state["position"], loader_state["num_replicas"]) == \
        (1, 8, 2), "not a checkpoint in the middle of epoch 1"
    for rank in (0, 1):
        reference = runs["reference", rank]
        stopped, resumed = runs[f"{how}.stopped", rank], runs[f"{how}.resumed", rank]
        assert stopped["global_step"] == DDP_STOP
        assert_same(stopped["losses"], reference["losses"][:DDP_STOP],
                    f"rank {rank}'s losses before the stop")
        assert resumed["global_step"] == 12, "the resumed run trained short"
        assert_same(resumed["losses"], reference["losses"][DDP_STOP:],
                    f"rank {rank}'s losses after the resume")
        assert_same(resumed["weights"], reference["weights"], f"rank {rank}'s weights")


def test_lightnings_sampler_over_the_loaders_becomes_a_resumable_one_of_its_rank():
    """What Lightning's injection does to a loader (its rebuild, in one process): the
    DistributedSamplerWrapper over the loader's ResumableSampler is replaced by a
    ResumableSampler with the loader's order and state and the wrapper's rank and world."""
    from lightning.pytorch.utilities.data import _update_dataloader
    original = loader(0)
    original.load_state_dict(dict(original.state_dict(), epoch=2))  # a finished epoch
    wrapper = DistributedSamplerWrapper(original.sampler, num_replicas=2, rank=1, seed=99)
    rebuilt = _update_dataloader(original, wrapper)
    assert type(rebuilt) is ResumableDataLoader
    # The user's data set, in one wrapper (loader.dataset), not in two.
    assert rebuilt.dataset.dataset is original.dataset.dataset  # type: ignore[attr-defined]
    s = rebuilt.sampler
    assert type(s) is ResumableSampler
    assert (s.seed, s.shuffle, s.num_replicas, s.rank, s.epoch, s.position) == \
        (5, True, 2, 1, 2, 0)
    assert len(rebuilt) == SAMPLES // 2 // BATCH
    # pytorch_lightning's Trainer puts lightning_fabric's wrapper in (where it is installed).
    if importlib.util.find_spec("lightning_fabric") is not None:
        fabric = importlib.import_module("lightning_fabric.utilities.distributed")
        other = _update_dataloader(original, fabric.DistributedSamplerWrapper(
            original.sampler, num_replicas=2, rank=0))
        assert (type(other.sampler), other.sampler.rank) == (ResumableSampler, 0)
    # A rank's share cannot come out of an unsharded position in the middle of an epoch.
    original.load_state_dict(dict(original.state_dict(), position=8))
    with pytest.raises(ValueError, match="num_replicas: saved 1 in the middle of epoch 2"):
        _update_dataloader(original, DistributedSamplerWrapper(original.sampler,
                                                               num_replicas=2, rank=1))
    # A sampler sharded for another world is the user's choice, not Lightning's to change.
    sharded = ResumableDataLoader(Augmented(), batch_size=BATCH,
                                  sampler=ResumableSampler(SAMPLES, num_replicas=4, rank=3))
    with pytest.raises(ValueError, match=r"rank 3 of 4, and Lightning runs this process as "
                                         r"rank 1 of 2.*use_distributed_sampler=False"):
        _update_dataloader(sharded, DistributedSamplerWrapper(sharded.sampler,
                                                              num_replicas=2, rank=1))


def test_a_sampler_it_does_not_know_is_refused_with_the_hint():
    original = loader(0)
    for sampler in (UnrepeatedDistributedSamplerWrapper(original.sampler, num_replicas=2,
                                                        rank=0),
                    torch.utils.data.DistributedSampler(Augmented(), num_replicas=2, rank=0)):
        with pytest.raises(TypeError, match=rf"got {type(sampler).__name__} .*"
                                            r"use_distributed_sampler=False"):
            ResumableDataLoader(Augmented(), batch_size=BATCH, sampler=sampler)
