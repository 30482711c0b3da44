"""Two ranks of Lightning DDP fits on the CPU (gloo), for test_data_lightning.py:
run_ranks(DIR), or from a shell ``python lightning_ddp_driver.py DIR``.

The ranks are forked from the calling process, which has imported torch and Lightning
already (importing them is most of the work on a loaded machine); each joins the process
group through the file DIR/rendezvous before Lightning starts, and Lightning, told by
LOCAL_RANK that the processes were launched for it, takes that group as it is. Every fit uses
Lightning's default flags (use_distributed_sampler=True), so that Lightning injects its
DistributedSampler into the training loader, except "uninjected":

- "reference": the run that never stopped, its ResumableDataLoader handed to fit();
- "uninjected": the same with Trainer(use_distributed_sampler=False) and the loader made in
  train_dataloader(), where it takes torch.distributed's world itself;
- "<how>.stopped" and "<how>.resumed", for the loader handed to fit() (how = "passed") and
  made in train_dataloader() (how = "hooked"): a run stopped in the middle of an epoch, and
  that run resumed from its checkpoint with fresh objects, its generators seeded otherwise.

Each run's global step, losses, weights and training sampler go to DIR/<run>.<rank>.pt, each
rank's output to DIR/rank<rank>.log. A rank destroys the group at its end
(launch.end_gloo_job); when one fails, the other is ended.
"""

import datetime
import os
import signal
import sys
import time
import traceback
import warnings

import torch
import torch.distributed as dist

import lightning as L
import rckpt.lightning
from launch import end_gloo_job
from lightning.pytorch.callbacks import ModelCheckpoint
from test_data_lightning import Net, loader

# 32 samples, 2 ranks, 4 a batch: 4 batches an epoch on each rank.
EPOCHS, EVERY, STOP = 3, 3, 6  # 12 steps; a checkpoint every 3; the stop in epoch 1's middle
RANKS = 2


class Hooked(Net):
    """Makes its loader in train_dataloader(), where Lightning records how it was made."""

    def train_dataloader(self):
        return loader(0)


def trainer(directory, **flags):
    every = ModelCheckpoint(dirpath=directory, every_n_train_steps=EVERY, save_top_k=-1)
    return L.Trainer(accelerator="cpu", devices=RANKS, strategy="ddp",
                     plugins=[rckpt.lightning.CheckpointIO()], callbacks=[every], logger=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=directory, deterministic=True, **flags)


def fit(out, run, t, model, *data, **kwargs):
    t.fit(model, *data, **kwargs)
    sampler = t.train_dataloader.sampler
    torch.save({"global_step": t.global_step, "losses": model.losses,
                "weights": model.state_dict(),
                "sampler": (type(sampler).__name__, getattr(sampler, "num_replicas", None),
                            getattr(sampler, "rank", None), getattr(sampler, "seed", None))},
               os.path.join(out, f"{run}.{dist.get_rank()}.pt"))


def rank_main(rank, out):
    os.environ.update(LOCAL_RANK=str(rank), NODE_RANK="0")
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "rendezvous"),
                            rank=rank, world_size=RANKS, timeout=datetime.timedelta(minutes=5))
    L.seed_everything(0)
    fit(out, "reference", trainer(os.path.join(out, "reference"), max_epochs=EPOCHS), Net(),
        loader(0))
    L.seed_everything(0)
    fit(out, "uninjected", trainer(os.path.join(out, "uninjected"), max_epochs=EPOCHS,
                                   use_distributed_sampler=False), Hooked())
    for how in ("passed", "hooked"):
        def model_and_data():
            return (Net(), loader(0)) if how == "passed" else (Hooked(),)
        directory = os.path.join(out, how)
        L.seed_everything(0)
        fit(out, f"{how}.stopped", trainer(directory, max_steps=STOP), *model_and_data())
        L.seed_everything(1234)  # a resumed process starts from other generator states
        fit(out, f"{how}.resumed", trainer(directory + ".resumed", max_epochs=EPOCHS),
            *model_and_data(), ckpt_path=os.path.join(directory, f"epoch=1-step={STOP}.ckpt"))
    end_gloo_job()


def run_ranks(out, timeout_s=600.0):
    """Forks the ranks and waits for them: "" when both ended well, else what went wrong,
    with the end of each rank's log. A rank still running after ``timeout_s`` is killed."""
    ranks = {}
    for rank in range(RANKS):
        pid = os.fork()
        if pid == 0:
            try:
                log = os.open(os.path.join(out, f"rank{rank}.log"),
                              os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                sys.stdout = sys.stderr = open(log, "w", buffering=1)
                # As torch's DataLoader workers do: a forked process keeps off the OpenMP
                # threads of the process it came from.
                torch.set_num_threads(1)
                rank_main(rank, out)  # ends the process with status 0
            except BaseException:  # noqa: BLE001  (the rank's failure, in its log)
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(1)
        ranks[pid] = rank
    deadline = time.monotonic() + timeout_s
    problems = []
    while ranks:
        for pid in list(ranks):
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(wait_status)
                if code != 0:
                    problems.append(f"rank {ranks[pid]} ended with status {code}")
                del ranks[pid]
        if ranks and (problems or time.monotonic() > deadline):
            if not problems:
                problems.append(f"the ranks ran past {timeout_s:.0f} s")
            for pid in ranks:
                os.kill(pid, signal.SIGKILL)
            for pid in ranks:
                os.waitpid(pid, 0)
            ranks.clear()
        time.sleep(0.05)
    if not problems:
        return ""
    for rank in range(RANKS):
        with open(os.path.join(out, f"rank{rank}.log"), errors="replace") as f:
            problems.append(f"--- rank {rank}'s log, its end:\n" + f.read()[-3000:])
    return "\n".join(problems)


if __name__ == "__main__":
    problem = run_ranks(sys.argv[1])
    print(problem or "both ranks ended well", file=sys.stderr)
    sys.exit(1 if problem else 0)
