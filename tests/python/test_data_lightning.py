"""rckpt.data under Lightning's own fit loop: a run checkpointed in the middle of an epoch
(ModelCheckpoint(every_n_train_steps=...)), or on the last batch of one, and resumed with
trainer.fit(ckpt_path=...) trains the full length and ends with the global_step, the losses and
the weights of the run that never stopped, with 0 and 2 workers."""

import warnings

import pytest
import torch

from conftest import assert_same

pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning; "
                                        "the torch 2 stage of scripts/test.sh has it)")
import lightning as L  # noqa: E402
import rckpt.lightning  # noqa: E402  (needs Lightning)
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from rckpt.data import ResumableDataLoader  # noqa: E402

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
