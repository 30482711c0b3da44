"""rckpt.data: a run stopped mid-epoch and resumed from an rckpt file with fresh objects sees
exactly the remaining batches of the uninterrupted run, augmentations and training RNG included,
with 0 and 2 workers, on 1 and 2 ranks."""

import os
import random
import signal
import subprocess
import sys

import numpy
import pytest
import torch
from conftest import assert_same, doc_example

import rckpt
from rckpt.data import ResumableDataLoader, ResumableSampler


class Augmented(torch.utils.data.Dataset):
    """A random flip and noise from torch, a draw from Python's and NumPy's generators."""

    def __init__(self, n=38):
        self.x = torch.arange(n * 4, dtype=torch.float32).reshape(n, 4)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if torch.rand(()) < 0.5:
            x = x.flip(0)
        x = x + torch.randn(4)
        extra = torch.tensor([random.random(), numpy.random.rand()], dtype=torch.float64)
        return x, torch.tensor(i), extra


EPOCHS, BATCH = 2, 5


def seed_everything(seed):
    torch.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)


def make_loader(workers, **sampler_args):
    sampler = ResumableSampler(38, shuffle=True, seed=7, **sampler_args)
    return ResumableDataLoader(Augmented(), batch_size=BATCH, sampler=sampler, num_workers=workers)


def train(loader, record, start_epoch=0, stop_after=None):
    """Iterates like a training loop (which draws from the global RNG, as dropout does); returns
    the epoch it stopped in when it stopped after stop_after batches, else None."""
    for epoch in range(start_epoch, EPOCHS):
        loader.set_epoch(epoch)
        for batch in loader:
            record.append((epoch, batch, torch.rand(3), random.random(), numpy.random.rand()))
            if len(record) == stop_after:
                return epoch
    return None


def uninterrupted(workers, **sampler_args):
    seed_everything(0)
    record = []
    train(make_loader(workers, **sampler_args), record)
    return record


def interrupted(tmp, workers, resume_workers, stop_after, **sampler_args):
    seed_everything(0)
    record = []
    loader = make_loader(workers, **sampler_args)
    epoch = train(loader, record, stop_after=stop_after)
    # The run stops in the middle of an epoch (the workers have prefetched batches beyond it).
    rckpt.save(tmp / "last.rckpt", {"data": {"loader": loader.state_dict()},
                                    "controller": {"epoch": epoch}}, rng=rckpt.capture_rng())
    del loader
    seed_everything(12345)  # a fresh process: nothing of the first run's RNG is left
    ck = rckpt.load(tmp / "last.rckpt")
    loader = make_loader(resume_workers, **sampler_args)
    loader.load_state_dict(ck["data"]["loader"])
    rckpt.restore_rng(ck.rng)
    train(loader, record, start_epoch=ck["controller"]["epoch"])
    return record


@pytest.mark.parametrize("workers,resume_workers", [(0, 0), (2, 2), (2, 0)])
@pytest.mark.parametrize("stop_after", [3, 9])  # in epoch 0, in epoch 1 (8 batches an epoch)
def test_resumed_run_sees_the_remaining_batches_bit_for_bit(tmp, workers, resume_workers,
                                                            stop_after):
    reference = uninterrupted(workers)
    assert len(reference) == EPOCHS * 8
    assert_same(interrupted(tmp, workers, resume_workers, stop_after), reference)


def test_batches_do_not_depend_on_num_workers():
    assert_same(uninterrupted(0), uninterrupted(2))


def test_persistent_workers_continue_a_stopped_iteration():
    seed_everything(0)
    record = []
    sampler = ResumableSampler(38, shuffle=True, seed=7)
    loader = ResumableDataLoader(Augmented(), batch_size=BATCH, sampler=sampler, num_workers=2,
                                 persistent_workers=True)
    epoch = train(loader, record, stop_after=3)  # the workers have prefetched past batch 3
    train(loader, record, start_epoch=epoch)  # a new iter() of the same workers goes on from 3
    assert_same(record, uninterrupted(0))


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("workers", [0, 2])
def test_two_ranks_resume_each_their_share(tmp, rank, workers):
    reference = uninterrupted(workers, num_replicas=2, rank=rank)
    assert len(reference) == EPOCHS * 4  # 19 samples a rank: 4 batches
    assert_same(interrupted(tmp, workers, workers, 6, num_replicas=2, rank=rank), reference)


def test_two_ranks_cover_the_epoch_in_distributed_samplers_order():
    for epoch in range(2):
        shares = []
        for rank in range(2):
            ours = ResumableSampler(38, seed=7, num_replicas=2, rank=rank)
            ours.set_epoch(epoch)
            torchs = torch.utils.data.DistributedSampler(range(38),  # type: ignore[arg-type]
                                                         num_replicas=2, rank=rank,
                                                         shuffle=True, seed=7)
            torchs.set_epoch(epoch)
            assert list(ours) == list(torchs)
            shares += ours.indices(epoch)
        assert sorted(shares) == list(range(38))


@pytest.mark.parametrize("length,replicas,drop_last,shuffle",
                         [(10, 3, False, True), (10, 3, True, True), (2, 5, False, True),
                          (7, 1, False, False), (9, 4, True, False)])
def test_order_is_distributed_samplers(length, replicas, drop_last, shuffle):
    for rank in range(replicas):
        ours = ResumableSampler(length, shuffle=shuffle, seed=3, num_replicas=replicas, rank=rank,
                                drop_last=drop_last)
        torchs = torch.utils.data.DistributedSampler(range(length),  # type: ignore[arg-type]
                                                     num_replicas=replicas,
                                                     rank=rank, shuffle=shuffle, seed=3,
                                                     drop_last=drop_last)
        assert len(ours) == len(torchs) and list(ours) == list(torchs)


def test_loading_data_leaves_the_global_generators_alone():
    loader = make_loader(0)
    seed_everything(1)
    before = (torch.get_rng_state(), random.getstate(), numpy.random.get_state())
    batches = list(loader)
    assert len(batches) == 8
    assert torch.equal(torch.get_rng_state(), before[0])
    assert random.getstate() == before[1]
    assert all(numpy.array_equal(a, b) for a, b in zip(numpy.random.get_state(), before[2]))


def test_state_counts_received_batches_not_prefetched_ones():
    loader = make_loader(2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    assert loader.state_dict()["position"] == 3 * BATCH and loader.state_dict()["epoch"] == 0
    assert len(it) == 8


def test_a_finished_epoch_moves_on_and_set_epoch_keeps_or_restarts():
    loader = make_loader(0)
    epoch0 = [b[1] for b in loader]
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (1, 0)
    it = iter(loader)
    next(it)
    loader.set_epoch(1)  # the current epoch: the position stays
    assert loader.state_dict()["position"] == BATCH
    assert len(loader) == 8 and len(iter(loader)) == 7  # a whole epoch; the iterator: the rest
    rest = [b[1] for b in loader]  # a new iter() continues where the loop stopped
    assert len(rest) == 7
    loader.set_epoch(0)  # another epoch: from its beginning, the same order as before
    assert_same([b[1] for b in loader], epoch0)


@pytest.mark.parametrize("replicas,rank", [(1, 0), (2, 1)])
def test_len_stays_a_whole_epoch_after_a_resume_and_the_iterator_counts_the_rest(replicas, rank):
    # Lightning reads len(loader) once for every epoch: a remainder there trains later epochs short.
    loader = make_loader(0, num_replicas=replicas, rank=rank)
    whole = len(loader)
    assert whole == -(-loader.sampler.num_samples // BATCH) and len(loader.sampler) == (
        loader.sampler.num_samples)
    it = iter(loader)
    for _ in range(3):
        next(it)
    resumed = make_loader(0, num_replicas=replicas, rank=rank)
    resumed.load_state_dict(loader.state_dict())
    assert len(resumed) == whole and len(resumed.sampler) == resumed.sampler.num_samples
    rest = iter(resumed)
    assert len(rest) == whole - 3 and len(list(rest)) == whole - 3
    assert len(resumed) == whole and len(iter(resumed)) == whole  # the next epoch, from its start


def test_a_change_before_an_iterators_first_batch_applies_to_it():
    # Lightning makes the iterator of a resumed run, then calls set_epoch with the next epoch.
    loader = make_loader(2)
    list(loader)  # epoch 0
    epoch1 = [b[1] for b in loader]
    ended = make_loader(2)
    ended.load_state_dict(dict(ended.state_dict(), position=38))  # every batch of epoch 0 received
    it = iter(ended)
    assert len(it) == 0
    ended.set_epoch(1)
    assert len(it) == 8
    assert_same([b[1] for b in it], epoch1)
    fresh = make_loader(0)
    it = iter(fresh)
    fresh.load_state_dict(dict(fresh.state_dict(), epoch=1, position=3 * BATCH))
    assert_same([b[1] for b in it], epoch1[3:])


def test_a_state_loaded_mid_iteration_applies_at_the_next_iter():
    loader = make_loader(0)
    state = loader.state_dict()
    first = [b[1] for b in loader]
    it = iter(loader)
    next(it)
    loader.load_state_dict(state)
    with pytest.raises(RuntimeError, match="made before load_state_dict"):
        next(it)
    assert_same([b[1] for b in loader], first)
    it = iter(loader)
    next(it)
    loader.set_epoch(5)  # another epoch mid-iteration: the old iterator stops counting too
    with pytest.raises(RuntimeError, match="set_epoch"):
        next(it)
    assert loader.state_dict()["position"] == 0
    assert_same(torch.cat([b[1] for b in loader]).tolist(), loader.sampler.indices(5))


def test_plain_sampler_counts_what_it_handed_out():
    s = ResumableSampler(10, seed=1)
    it = iter(s)
    head = [next(it) for _ in range(4)]
    state = s.state_dict()
    assert state["position"] == 4
    fresh = ResumableSampler(10, seed=99)
    fresh.load_state_dict(state)  # the saved seed replaces this sampler's
    assert head + list(fresh) == s.indices(0)
    assert fresh.state_dict()["epoch"] == 1


def corrupt(**changes):
    state = ResumableSampler(38, seed=7).state_dict()
    state.update(changes)
    return state


@pytest.mark.parametrize("state,error,message", [
    ([1, 2], TypeError, "expected the dict of state_dict"),
    (corrupt(format="other/1"), ValueError, "format: expected"),
    ({k: v for k, v in corrupt().items() if k != "epoch"}, ValueError, "field 'epoch' is missing"),
    (corrupt(position="3"), TypeError, "position: expected int, got str"),
    (corrupt(shuffle=1), TypeError, "shuffle: expected bool, got int"),
    (corrupt(length=40), ValueError, "data set length: saved 40, this sampler 38"),
    (corrupt(shuffle=False), ValueError, "shuffle: saved False, this sampler True"),
    (corrupt(drop_last=True), ValueError, "drop_last: saved True, this sampler False"),
    (corrupt(position=39), ValueError, r"position: expected 0\.\.38, got 39"),
    (corrupt(epoch=-1), ValueError, "epoch: expected >= 0"),
    (corrupt(num_replicas=2, position=5), ValueError,
     "num_replicas: saved 2 in the middle of epoch 0 .position 5., this sampler 1"),
])
def test_load_state_dict_refuses_what_does_not_fit(state, error, message):
    s = ResumableSampler(38, seed=7)
    before = s.state_dict()
    with pytest.raises(error, match=message):
        s.load_state_dict(state)
    assert s.state_dict() == before  # nothing changed


def test_another_world_size_resumes_at_an_epoch_boundary():
    s = ResumableSampler(38, seed=7, num_replicas=2, rank=1)
    s.load_state_dict(corrupt(epoch=3, position=0))
    assert s.state_dict()["epoch"] == 3 and list(s) == s.indices(3)


def test_loader_refuses_what_it_cannot_resume():
    data = Augmented()
    with pytest.raises(TypeError, match="RandomSampler draws its seed from the global RNG"):
        ResumableDataLoader(data, sampler=torch.utils.data.RandomSampler(data))
    # A torch DistributedSampler of the user's (Lightning's over the loader's own sampler is
    # replaced: test_data_lightning.py).
    with pytest.raises(TypeError, match=r"got DistributedSampler .*use_distributed_sampler=False"):
        ResumableDataLoader(data, sampler=torch.utils.data.DistributedSampler(
            data, num_replicas=2, rank=0), seed=3)
    with pytest.raises(ValueError, match="batch_sampler is not accepted"):
        ResumableDataLoader(data, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match="generator is not accepted"):
        ResumableDataLoader(data, generator=torch.Generator())
    with pytest.raises(ValueError, match="covers 10 samples, the data set has 38"):
        ResumableDataLoader(data, sampler=ResumableSampler(10))
    with pytest.raises(ValueError, match="seed, num_replicas and rank are the sampler's"):
        ResumableDataLoader(data, sampler=ResumableSampler(38), seed=3)
    with pytest.raises(ValueError, match="shuffle=True with a sampler"):
        ResumableDataLoader(data, shuffle=True, sampler=ResumableSampler(38))

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(TypeError, match="IterableDataset"):
        ResumableDataLoader(Stream())
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\), got 2"):
        ResumableSampler(38, num_replicas=2, rank=2)
    with pytest.raises(TypeError, match="seed: expected an int, got float"):
        ResumableSampler(38, seed=1.5)


def run_example(script, run_dir, *args):
    run_dir.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, str(script), str(run_dir), "2", *map(str, args)],
                          capture_output=True, text=True, env=dict(os.environ))


def test_restarting_example_resumes_bit_identically(tmp):
    script = doc_example("RESTARTING.md", "train_data.py", tmp)
    done = run_example(script, tmp / "reference")
    assert done.returncode == 0, done.stderr
    crashed = run_example(script, tmp / "crashed", 17)  # in epoch 1 (13 batches an epoch)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert (tmp / "crashed" / "last.rckpt").exists()
    assert not (tmp / "crashed" / "final.rckpt").exists()
    resumed = run_example(script, tmp / "crashed")
    assert resumed.returncode == 0, resumed.stderr
    reference = rckpt.load(tmp / "reference" / "final.rckpt")
    assert_same(rckpt.load(tmp / "crashed" / "final.rckpt")["model"], reference["model"])


GLOO_RANK = r"""
import sys, torch, torch.distributed as dist, rckpt
from rckpt.data import ResumableDataLoader
sys.path.insert(0, sys.argv[3])
from test_data_resume import Augmented, seed_everything
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=int(sys.argv[2]),
                        world_size=2)
try:
    rank = dist.get_rank()
    def loader():  # num_replicas and rank from torch.distributed
        return ResumableDataLoader(Augmented(), batch_size=5, shuffle=True, seed=7, num_workers=2)
    def epochs(ld, stop=None):
        seen = []
        while ld.epoch < 2:
            for x, i, extra in ld:
                seen.append(torch.cat([x.flatten(), i.double(), extra.flatten()]))
                if len(seen) == stop:
                    return seen
        return seen
    seed_everything(0)
    reference = epochs(loader())
    ld = loader()
    head = epochs(ld, stop=3)
    rckpt.save(f"{sys.argv[1]}.{rank}.rckpt", {"data": {"loader": ld.state_dict()}})
    ld = loader()
    ld.load_state_dict(rckpt.load(f"{sys.argv[1]}.{rank}.rckpt")["data"]["loader"])
    rest = epochs(ld)
    assert len(reference) == 8 and len(head) + len(rest) == 8
    assert all(torch.equal(a, b) for a, b in zip(head + rest, reference)), "resumed batches differ"
    share = torch.tensor(ld.sampler.indices(0))
    shares = [torch.empty_like(share) for _ in range(2)]
    dist.all_gather(shares, share)
    assert sorted(torch.cat(shares).tolist()) == list(range(38)), "the ranks do not cover the epoch"
    print("rank", rank, "resumed", len(rest), "batches of", len(reference), flush=True)
finally:
    dist.destroy_process_group()
"""


def test_two_gloo_ranks_take_their_world_from_torch_distributed(tmp):
    if not torch.distributed.is_available():
        pytest.skip("this torch has no torch.distributed")
    here = os.path.dirname(os.path.abspath(__file__))
    ranks = [subprocess.Popen([sys.executable, "-c", GLOO_RANK, str(tmp / "rendezvous"), str(r),
                               here], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=300) for p in ranks]
    for r, (p, (out, err)) in enumerate(zip(ranks, outs)):
        assert p.returncode == 0, err
        assert out.strip() == f"rank {r} resumed 5 batches of 8", out
