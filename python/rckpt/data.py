"""Resumable data loading: a run stopped mid-epoch resumes with exactly the remaining batches.

    loader = rckpt.data.ResumableDataLoader(dataset, batch_size=32, shuffle=True, seed=0,
                                            num_workers=2)
    ...  # for batch in loader: train, and every K steps:
    rckpt.save(path, {..., "data": {"loader": loader.state_dict()}}, rng=rckpt.capture_rng())
    ...  # after a restart, fresh objects:
    loader.load_state_dict(ck["data"]["loader"]); rckpt.restore_rng(ck.rng)

The order of an epoch is a function of (seed, epoch) alone, as torch's
DistributedSampler computes it; the position is counted in samples the
training loop has received (not what the workers prefetched); and every
sample's augmentation draws from generators seeded from (seed, epoch, index),
in the worker that loads it or in the main process without touching its
generators. Nothing of the data pipeline lives in the global RNG, so the one
``capture_rng()`` of the save restores the training's randomness and the
loader's state restores the data's. docs/RESTARTING.md, "Resuming a data
pipeline mid-epoch".
"""

import random as _random
import sys as _sys

import torch
import torch.utils.data as _tud

try:
    import numpy as _numpy
except ImportError:  # numpy is optional for torch
    _numpy = None  # type: ignore[assignment]

__all__ = ["ResumableSampler", "ResumableDataLoader"]

_STATE_FORMAT = "rckpt.data.ResumableSampler/1"
_MASK64 = (1 << 64) - 1


def _mix(*values):
    """A 63-bit seed from integers (splitmix64 rounds): the same in every process and Python."""
    h = 0
    for v in values:
        h = (h ^ (v & _MASK64)) + 0x9E3779B97F4A7C15 & _MASK64
        h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
        h = (h ^ (h >> 27)) * 0x94D049BB133111EB & _MASK64
        h ^= h >> 31
    return h >> 1  # torch.Generator.manual_seed takes it on every torch version


def _sample_seed(seed, epoch, index):
    """The seed of the generators that load sample ``index`` in ``epoch`` of run ``seed``."""
    return _mix(seed, epoch, index)


def _seed_globals(seed):
    torch.default_generator.manual_seed(seed)
    _random.seed(seed)
    if _numpy is not None:
        _numpy.random.seed(seed & 0xFFFFFFFF)


class _SeededDataset(_tud.Dataset):
    """Loads (index, seed) keys: the sample's augmentation draws from generators seeded with seed.

    In a worker the worker's global generators are reseeded (they belong to
    that worker); in the main process (num_workers=0) they are put back
    afterwards, so the training loop's dropout and the like see the same
    stream whether or not the data was loaded in between.
    """

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, key):
        index, seed = key
        if _tud.get_worker_info() is not None:
            _seed_globals(seed)
            return self.dataset[index]
        saved = (torch.get_rng_state(), _random.getstate(),
                 _numpy.random.get_state() if _numpy is not None else None)
        try:
            _seed_globals(seed)
            return self.dataset[index]
        finally:
            torch.set_rng_state(saved[0])
            _random.setstate(saved[1])
            if _numpy is not None:
                _numpy.random.set_state(saved[2])


def _distributed_default(value, name):
    if value is not None:
        return value
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size() if name == "num_replicas" else dist.get_rank()
    return 1 if name == "num_replicas" else 0


class ResumableSampler(_tud.Sampler):
    """The indices of an epoch from (seed, epoch), and the position in it; resumable mid-epoch.

    The order is torch's ``DistributedSampler``'s for the same seed, epoch,
    num_replicas, rank and drop_last (with ``num_replicas=1``: a shuffle of
    the whole data set), computed with a generator of its own: it never draws
    from torch's global RNG. ``num_replicas`` and ``rank`` default to
    torch.distributed's world when it is initialized, else 1 and 0.

    ``state_dict()`` is ``{seed, epoch, position, ...}``: the next ``iter()``
    yields this rank's indices of ``epoch`` from ``position`` on. ``len()`` is
    always a whole epoch of this rank (``num_samples``, as a fresh sampler's
    and ``DistributedSampler``'s), also after a resume mid-epoch: training
    loops such as Lightning's read it once for every epoch. Used with a
    plain DataLoader, the position counts the indices the sampler has handed
    out, which runs ahead of the training loop by the batches the workers
    prefetched; inside a ``ResumableDataLoader`` it counts the samples the
    loop has received. An iteration that runs to its end moves on to the
    next epoch; ``set_epoch(e)`` with another epoch starts that epoch from
    its beginning, with the current one it changes nothing (so a resumed
    loop may call it as before).
    """

    def __init__(self, data_source, *, shuffle=True, seed=0, num_replicas=None, rank=None,
                 drop_last=False):
        self.length = _length_of(data_source, "ResumableSampler")
        self.shuffle = bool(shuffle)
        self.seed = _int_arg(seed, "seed")
        self.num_replicas = _int_arg(_distributed_default(num_replicas, "num_replicas"),
                                     "num_replicas")
        self.rank = _int_arg(_distributed_default(rank, "rank"), "rank")
        if self.num_replicas < 1:
            raise ValueError(f"ResumableSampler: num_replicas must be >= 1, got "
                             f"{self.num_replicas}")
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"ResumableSampler: rank must be in [0, {self.num_replicas}), "
                             f"got {self.rank}")
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self.position = 0
        self._version = 0  # set_epoch and load_state_dict make older iterators stale
        self._in_loader = False  # set by ResumableDataLoader: yield keys, it counts the position

    @property
    def num_samples(self):
        """This rank's samples in a whole epoch (DistributedSampler's num_samples)."""
        if self.drop_last:
            return self.length // self.num_replicas
        return -(-self.length // self.num_replicas)

    def indices(self, epoch=None):
        """This rank's indices of a whole epoch (default: the current one), in order."""
        epoch = self.epoch if epoch is None else epoch
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
            order = torch.randperm(self.length, generator=g).tolist()
        else:
            order = list(range(self.length))
        total = self.num_samples * self.num_replicas
        if total > len(order) and order:
            order += (order * -(-(total - len(order)) // len(order)))[:total - len(order)]
        return order[:total][self.rank:total:self.num_replicas]

    def __len__(self):
        return self.num_samples

    def __iter__(self):
        remaining = self.indices()[self.position:]
        if self._in_loader:
            seed, epoch = self.seed, self.epoch
            return ((i, _sample_seed(seed, epoch, i)) for i in remaining)
        return self._counting(remaining, self._version)

    def _counting(self, remaining, version):
        for i in remaining:
            if self._version == version:
                self.position += 1
            yield i
        if self._version == version:
            self.epoch, self.position = self.epoch + 1, 0

    def set_epoch(self, epoch):
        """Starts ``epoch`` from its beginning at the next iter(); the current epoch: no change."""
        epoch = _int_arg(epoch, "epoch")
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0
            self._version += 1

    def state_dict(self):
        """Plain ints, bools and strings (rckpt.save stores them as they are)."""
        return {"format": _STATE_FORMAT, "seed": self.seed, "epoch": self.epoch,
                "position": self.position, "length": self.length, "shuffle": self.shuffle,
                "num_replicas": self.num_replicas, "drop_last": self.drop_last}

    def load_state_dict(self, state):
        """Takes effect at the next iter(). The saved seed, epoch and position replace this
        sampler's; a state of another data set, shuffle or drop_last setting is refused, and so is
        another num_replicas in the middle of an epoch (a finished epoch may be resumed on another
        world size).
        """
        where = "ResumableSampler.load_state_dict"
        if not isinstance(state, dict):
            raise TypeError(f"{where}: expected the dict of state_dict(), got "
                            f"{type(state).__name__}")
        if state.get("format") != _STATE_FORMAT:
            raise ValueError(f"{where}: format: expected {_STATE_FORMAT!r}, got "
                             f"{state.get('format')!r}")
        fields = {"seed": int, "epoch": int, "position": int, "length": int, "shuffle": bool,
                  "num_replicas": int, "drop_last": bool}
        for name, kind in fields.items():
            if name not in state:
                raise ValueError(f"{where}: field {name!r} is missing")
            value = state[name]
            if type(value) is not kind:
                raise TypeError(f"{where}: {name}: expected {kind.__name__}, got "
                                f"{type(value).__name__} {value!r}")
        for name in ("length", "shuffle", "drop_last"):
            if state[name] != getattr(self, name):
                what = "data set length" if name == "length" else name
                raise ValueError(f"{where}: {what}: saved {state[name]!r}, this sampler "
                                 f"{getattr(self, name)!r}")
        if state["num_replicas"] != self.num_replicas and state["position"] != 0:
            raise ValueError(
                f"{where}: num_replicas: saved {state['num_replicas']} in the middle of epoch "
                f"{state['epoch']} (position {state['position']}), this sampler "
                f"{self.num_replicas}; resume mid-epoch on the same number of ranks, or from a "
                f"checkpoint taken at the end of an epoch")
        saved_samples = (self.length // state["num_replicas"] if self.drop_last
                         else -(-self.length // state["num_replicas"]))
        if not 0 <= state["position"] <= saved_samples:
            raise ValueError(f"{where}: position: expected 0..{saved_samples}, got "
                             f"{state['position']}")
        if state["epoch"] < 0:
            raise ValueError(f"{where}: epoch: expected >= 0, got {state['epoch']}")
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]
        self._version += 1


class _LoaderIterator:
    """Counts what the training loop received; refuses to go on once it is stale.

    The DataLoader's own iterator (and with it the workers) starts at the first
    ``next()``, from the sampler's state at that moment: a ``load_state_dict()``
    or ``set_epoch()`` between ``iter()`` and the first batch applies to this
    iterator (Lightning makes the iterator, then calls ``set_epoch``). Once
    started, a change of the state makes it stale.
    """

    def __init__(self, loader, generation):
        self._loader, self._generation = loader, generation
        self._inner = None
        self._version = None
        self._length = None
        self._per_batch = loader.batch_size or 1
        self._done = False

    def __iter__(self):
        return self

    def __len__(self):
        """The batches this iteration yields: what is left of the epoch it continues."""
        if self._length is None:
            return self._loader._remaining_batches()
        return self._length

    def _check_current(self):
        loader = self._loader
        if self._generation != loader._generation or (
                self._version is not None and self._version != loader.sampler._version):
            raise RuntimeError(
                "ResumableDataLoader: this iterator was made before load_state_dict(), set_epoch() "
                "with another epoch or a newer iter(); its batches would not follow the loader's "
                "state. Iterate the loader again")

    def __next__(self):
        if self._done:
            raise StopIteration
        self._check_current()
        loader, sampler = self._loader, self._loader.sampler
        if self._inner is None:
            self._version = sampler._version
            self._length = loader._remaining_batches()
            self._inner = loader._start_iteration()
        try:
            batch = next(self._inner)
        except StopIteration:
            self._done = True
            sampler.epoch, sampler.position = sampler.epoch + 1, 0
            raise
        sampler.position = min(sampler.position + self._per_batch, sampler.num_samples)
        return batch


class ResumableDataLoader(_tud.DataLoader):
    """A torch DataLoader whose state_dict() resumes a run mid-epoch, bit for bit.

    Takes torch DataLoader's arguments, except that the order comes from a
    ``ResumableSampler``: ``shuffle``, ``seed``, ``num_replicas``, ``rank`` and
    ``drop_last`` make one, or ``sampler=`` passes one; ``batch_sampler`` and
    ``generator`` are refused (the loader owns them), and so is an
    IterableDataset. ``state_dict()`` says where the next ``iter()`` begins:
    the epoch and the samples of it the training loop has received, whatever
    the workers prefetched. The batches after a ``load_state_dict()`` are the
    ones the saved run would have seen next, with the same augmentations:
    each sample is loaded with torch's, Python's and NumPy's global generators
    seeded from (seed, epoch, index), in a worker or (``num_workers=0``) in the
    main process with its generators put back afterwards. So the batches do
    not depend on num_workers, and a run may resume with another num_workers.

    ``len(loader)`` is a whole epoch, after a ``load_state_dict()`` too (as a
    fresh loader's: Lightning reads it once and uses it for every epoch, and
    counts the rest of a resumed epoch from the batch progress it restores);
    only the iterator of a resumed epoch, ``len(iter(loader))``, counts the
    batches left. ``load_state_dict()`` and ``set_epoch()`` apply at the next
    ``iter()``, or to an iterator that has not yielded its first batch yet.

    Under Lightning's DDP (``use_distributed_sampler=True``, its default),
    Lightning rebuilds the loader around a DistributedSampler of its own
    over this one's sampler; the rebuilt loader takes a ``ResumableSampler``
    in its place instead, with this one's order and state and Lightning's
    rank and world size (docs/LIGHTNING.md, "Under DDP").

    ``loader.dataset`` is a wrapper; ``loader.dataset.dataset`` is yours.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, *, seed=0,
                 num_replicas=None, rank=None, drop_last=False, **kwargs):
        where = "ResumableDataLoader"
        if isinstance(dataset, _SeededDataset):
            # Rebuilt from its attributes, as Lightning rebuilds a loader made outside its
            # hooks to put its own sampler in: the data set is the wrapper's, the generator
            # this class's own.
            dataset = dataset.dataset
            kwargs.pop("generator", None)
        for name in ("batch_sampler", "generator"):
            if kwargs.get(name) is not None:
                raise ValueError(f"{where}: {name} is not accepted: the loader makes its own so "
                                 f"that its state can be saved and restored")
        kwargs.pop("batch_sampler", None)
        kwargs.pop("generator", None)
        if isinstance(dataset, _tud.IterableDataset):
            raise TypeError(f"{where}: an IterableDataset has no indices to resume from; save "
                            f"its position yourself")
        resharded = _resharded(sampler)
        if resharded is not None:
            # Lightning's arguments (sampler, shuffle=False) beside the original call's (seed,
            # ...), which the sampler it wrapped carries.
            sampler, shuffle, seed, num_replicas, rank = resharded, False, 0, None, None
        if sampler is None:
            sampler = ResumableSampler(dataset, shuffle=shuffle, seed=seed,
                                       num_replicas=num_replicas, rank=rank)
        elif not isinstance(sampler, ResumableSampler):
            hint = ("; a ResumableDataLoader gives each rank its share itself (num_replicas, "
                    "rank). Under Lightning, the DistributedSamplerWrapper it puts over the "
                    "loader's sampler becomes a ResumableSampler of the rank, other samplers "
                    "do not: pass Trainer(use_distributed_sampler=False)"
                    if isinstance(sampler, _tud.DistributedSampler) else "")
            raise TypeError(f"{where}: sampler must be a rckpt.data.ResumableSampler, got "
                            f"{type(sampler).__name__} (torch's samplers cannot say where an "
                            f"epoch stopped; RandomSampler draws its seed from the global "
                            f"RNG){hint}")
        elif seed != 0 or num_replicas is not None or rank is not None:
            raise ValueError(f"{where}: seed, num_replicas and rank are the sampler's: pass them "
                             f"to the ResumableSampler, not beside it")
        elif shuffle:
            raise ValueError(f"{where}: shuffle=True with a sampler: the sampler's shuffle "
                             f"decides")
        elif sampler.length != len(dataset):
            raise ValueError(f"{where}: the sampler covers {sampler.length} samples, the data "
                             f"set has {len(dataset)}")
        sampler._in_loader = True
        self._generation = 0
        super().__init__(_SeededDataset(dataset), batch_size=batch_size, sampler=sampler,
                         drop_last=drop_last, generator=torch.Generator(), **kwargs)

    def __iter__(self):
        self._generation += 1
        return _LoaderIterator(self, self._generation)

    def _start_iteration(self):
        """torch's iterator over the rest of the sampler's epoch (at an iterator's first next())."""
        sampler = self.sampler
        # The workers' base seed comes from this generator (never the global RNG).
        self.generator.manual_seed(_mix(sampler.seed, sampler.epoch, 0x6C6F61646572))
        return super().__iter__()

    def _remaining_batches(self):
        """The batches the next iteration yields: the rest of the epoch from the position."""
        left = self.sampler.num_samples - self.sampler.position
        per_batch = self.batch_size or 1
        return left // per_batch if self.drop_last else -(-left // per_batch)

    @property
    def epoch(self):
        """The epoch the next iter() continues or starts (the sampler's)."""
        return self.sampler.epoch

    def set_epoch(self, epoch):
        """The sampler's set_epoch: another epoch starts from its beginning at the next iter()."""
        self.sampler.set_epoch(epoch)

    def state_dict(self):
        """Where the next iter() begins (the sampler's state_dict)."""
        return self.sampler.state_dict()

    def load_state_dict(self, state):
        """Takes effect at the next iter() (or the first batch of an iterator not yet started);
        an iterator that has started raises if used again."""
        self.sampler.load_state_dict(state)


# Where Lightning keeps DistributedSamplerWrapper (the `lightning` package's, then the
# standalone lightning_fabric's); never imported here: a wrapper exists only where its module does.
_LIGHTNING_WRAPPER_MODULES = ("lightning.fabric.utilities.distributed",
                              "lightning_fabric.utilities.distributed")


def _lightning_wrapped(sampler):
    """The sampler that Lightning's DistributedSamplerWrapper shards, or None for any other.

    Lightning (``use_distributed_sampler=True``, its default) rebuilds a loader whose sampler
    is no DistributedSampler with ``DistributedSamplerWrapper(loader.sampler, num_replicas=,
    rank=, ...)``; the wrapper holds the sampler at ``dataset._sampler`` (where its own
    set_epoch finds it).
    """
    for name in _LIGHTNING_WRAPPER_MODULES:
        wrapper = getattr(_sys.modules.get(name), "DistributedSamplerWrapper", None)
        if wrapper is not None and isinstance(sampler, wrapper):
            return getattr(sampler.dataset, "_sampler", None)
    return None


def _resharded(sampler):
    """The ResumableSampler that stands for Lightning's wrapper over one, with the wrapped one's
    order (seed, shuffle, drop_last), state, and the wrapper's rank and world size; None for
    any other sampler."""
    inner = _lightning_wrapped(sampler)
    if not isinstance(inner, ResumableSampler):
        return None
    world, rank = sampler.num_replicas, sampler.rank
    if (inner.num_replicas, inner.rank) not in ((1, 0), (world, rank)):
        raise ValueError(
            f"ResumableDataLoader: its ResumableSampler is rank {inner.rank} of "
            f"{inner.num_replicas}, and Lightning runs this process as rank {rank} of {world}: "
            f"leave num_replicas and rank out (Lightning's are taken), or pass "
            f"Trainer(use_distributed_sampler=False) to keep them")
    out = ResumableSampler(inner.length, shuffle=inner.shuffle, seed=inner.seed,
                           num_replicas=world, rank=rank, drop_last=inner.drop_last)
    out.load_state_dict(inner.state_dict())
    return out


def _length_of(data_source, where):
    if isinstance(data_source, bool):
        raise TypeError(f"{where}: expected a data set or its length, got a bool")
    if isinstance(data_source, int):
        n = data_source
    else:
        try:
            n = len(data_source)
        except TypeError:
            raise TypeError(f"{where}: expected a data set with a length or an int, got "
                            f"{type(data_source).__name__}") from None
    if n < 0:
        raise ValueError(f"{where}: data set length must be >= 0, got {n}")
    return n


def _int_arg(value, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    return value
