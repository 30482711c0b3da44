"""transformers' Trainer and accelerate resume from their own files after rckpt: a folder
rebuilt by rckpt.hf, or each file converted to .rckpt and back, ends training with the
weights of the run that never stopped. Tiny models made from a config; nothing is
downloaded (HF_HUB_OFFLINE)."""

import os
import random
import shutil

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
try:
    import transformers
except ImportError as e:
    pytest.skip(f"transformers is not installed ({e}; scripts/python-env.sh --torch2 installs "
                f"it)", allow_module_level=True)

import rckpt  # noqa: E402
import rckpt.hf  # noqa: E402

transformers.logging.set_verbosity_error()
# One thread: the same reduction order in every run, whatever the machine's load.
torch.set_num_threads(1)


def collate(batch):
    ids = torch.tensor([b["input_ids"] for b in batch])
    return {"input_ids": ids, "labels": ids.clone()}


class NoisyTrainer(transformers.Trainer):
    """Draws from NumPy's and Python's global generators in every step (as augmentations
    do), so that a resume must restore both to train as the run that never stopped."""

    def compute_loss(self, model, inputs, *args, **kwargs):
        loss = super().compute_loss(model, inputs, *args, **kwargs)
        return loss * float(1 + np.random.rand() + random.random())


def train(out, resume=None):
    """Six steps of a one-layer GPT-2 (with dropout), a checkpoint every three."""
    transformers.set_seed(0)
    data = np.random.default_rng(123).integers(0, 32, (24, 8)).tolist()
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=32, n_positions=8, n_embd=16, n_layer=1, n_head=2, bos_token_id=0,
        eos_token_id=0))
    args = transformers.TrainingArguments(
        str(out), max_steps=6, save_steps=3, per_device_train_batch_size=4, learning_rate=1e-2,
        report_to="none", use_cpu=True, seed=0, disable_tqdm=True, logging_steps=100)
    NoisyTrainer(model=model, args=args, train_dataset=[{"input_ids": x} for x in data],
                 data_collator=collate).train(resume_from_checkpoint=resume)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_weights(a, b):
    return list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run that never stopped, and its checkpoint after three steps."""
    out = tmp_path_factory.mktemp("trainer") / "never-stopped"
    return train(out), out / "checkpoint-3"


def test_trainer_resumes_from_a_folder_rebuilt_by_rckpt_hf(tmp, run):
    final, checkpoint = run
    report = rckpt.hf.pack(checkpoint, tmp / "checkpoint-3.rckpt")
    assert report.files["rng_state.pth"] == "pytorch"
    assert report.files["model.safetensors"] == "safetensors"
    assert report.files["training_args.bin"] == "bytes"
    assert report.reasons == {}
    rebuilt = tmp / "resumed" / "checkpoint-3"
    rckpt.hf.unpack(tmp / "checkpoint-3.rckpt", rebuilt)
    assert same_weights(train(tmp / "resumed", resume=str(rebuilt)), final)


def test_trainer_resumes_from_each_file_converted_to_rckpt_and_back(tmp, run):
    final, checkpoint = run
    converted = tmp / "resumed" / "checkpoint-3"
    shutil.copytree(checkpoint, converted)
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        rckpt.convert(converted / name, tmp / (name + ".rckpt"))
        os.remove(converted / name)
        rckpt.convert(tmp / (name + ".rckpt"), converted / name)
    ck = rckpt.load(tmp / "rng_state.pth.rckpt")
    assert {n: r.kind for n, r in ck.rng.items()} == \
        {"python": "python", "numpy": "numpy", "cpu": "torch_cpu"}
    assert same_weights(train(tmp / "resumed", resume=str(converted)), final)


def test_a_resume_without_the_rng_states_does_not_match(tmp, run):
    # The check above can fail: the steps draw from the generators the file restores.
    final, checkpoint = run
    partial = tmp / "resumed" / "checkpoint-3"
    shutil.copytree(checkpoint, partial)
    os.remove(partial / "rng_state.pth")
    assert not same_weights(train(tmp / "resumed", resume=str(partial)), final)


def test_accelerate_loads_its_random_states_file_converted_and_back(tmp):
    accelerate = pytest.importorskip("accelerate", reason="accelerate is not installed")
    acc = accelerate.Accelerator(cpu=True)
    np.random.seed(3)
    np.random.standard_normal()
    random.seed(4)
    torch.manual_seed(5)
    acc.save_state(str(tmp / "state"))
    expected = (np.random.rand(3).tolist(), random.random(), torch.rand(2).tolist())
    rckpt.convert(tmp / "state" / "random_states_0.pkl", tmp / "rs.rckpt")
    ck = rckpt.load(tmp / "rs.rckpt")
    assert {n: r.kind for n, r in ck.rng.items()} == {
        "random_state": "python", "numpy_random_seed": "numpy", "torch_manual_seed": "torch_cpu"}
    os.remove(tmp / "state" / "random_states_0.pkl")
    rckpt.convert(tmp / "rs.rckpt", tmp / "state" / "random_states_0.pkl", to_format="pt")
    np.random.seed(0)
    random.seed(0)
    torch.manual_seed(0)
    acc.load_state(str(tmp / "state"))  # torch.load(weights_only=True), NumPy allowed
    assert (np.random.rand(3).tolist(), random.random(), torch.rand(2).tolist()) == expected
