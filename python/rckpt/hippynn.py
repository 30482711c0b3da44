"""Checkpoint and restart a hippynn training run through rckpt.

    import rckpt.hippynn
    from hippynn.experiment import setup_training, train_model

    training_modules, controller, metric_tracker = setup_training(training_modules, setup_params)
    if os.path.exists("run/last.rckpt"):       # a restart: freshly built objects, then
        metric_tracker = rckpt.hippynn.load("run/last.rckpt", training_modules, controller,
                                            model_device="cpu")
    train_model(training_modules, database, controller, metric_tracker, batch_callbacks=None,
                callbacks=[rckpt.hippynn.EpochCheckpoint("run/last.rckpt", training_modules,
                                                          controller, metric_tracker)])

What is saved: the model's state_dict (section ``model``), the optimizer's
(``optimizer``), the controller's scalars and every scheduler's state
(``controller``), the MetricTracker's data (``metrics``: its metric history
and its ``best_model`` tensors), and every RNG state (``rckpt.capture_rng``).
Nothing is pickled: ``load`` rebuilds the MetricTracker through hippynn's own
class and restores the controller, the schedulers and the optimizer through
their ``load_state_dict``, into objects built as the run built them, and
restores ``RaiseBatchSizeOnPlateau``'s best metric from the saved
``best_metric`` (hippynn 0.1.3's ``load_state_dict`` reads it from
``"boredom"``). Needs hippynn (pip install hippynn). docs/HIPPYNN.md,
"Restarting a hippynn run with rckpt".
"""

from __future__ import annotations

import copy
import os
from typing import Any, Optional

from .checkpoint import load as _load
from .checkpoint import save as _save
from .rng import capture_rng, restore_rng

try:
    from hippynn.experiment.controllers import RaiseBatchSizeOnPlateau
    from hippynn.experiment.device import set_devices
    from hippynn.experiment.metric_tracker import MetricTracker
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"rckpt.hippynn needs hippynn: pip install hippynn ({e})") from None

__all__ = ["EpochCheckpoint", "load", "metric_tracker_from_state", "metric_tracker_state",
           "restore", "save", "state"]

FORMAT = "rckpt.hippynn/1"

# The MetricTracker's data; metric_names, stopping_key and quiet go to its constructor, which
# derives the rest (name_column_width, n_metrics).
_TRACKER_FIELDS = ("metric_names", "stopping_key", "quiet", "best_metric_values",
                   "other_metric_values", "best_model", "epoch_times", "epoch_metric_values",
                   "epoch_best_metric_values")


def _class_path(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def metric_tracker_state(metric_tracker: Any, *, best_model: Any = None) -> dict[str, Any]:
    """A MetricTracker's data as plain values (its ``best_model`` tensors as they are):
    what ``metric_tracker_from_state`` rebuilds it from. ``best_model`` replaces the tracker's
    (hippynn sets it after the epoch callbacks run)."""
    state = {name: getattr(metric_tracker, name) for name in _TRACKER_FIELDS}
    if best_model is not None:
        state["best_model"] = best_model
    return state


def metric_tracker_from_state(state: dict[str, Any]) -> Any:
    """A MetricTracker made by hippynn's constructor and given the saved data (no unpickling)."""
    missing = [name for name in _TRACKER_FIELDS if name not in state]
    if missing:
        raise ValueError(f"rckpt.hippynn: metrics: field(s) {missing} missing; expected the "
                         f"dict of metric_tracker_state()")
    tracker = MetricTracker(list(state["metric_names"]), state["stopping_key"],
                            quiet=state["quiet"])
    for name in _TRACKER_FIELDS[3:]:
        setattr(tracker, name, state[name])
    return tracker


def state(training_modules: Any, controller: Any, metric_tracker: Any, *,
          better_model: bool = False) -> dict[str, Any]:
    """The sections ``save`` writes. ``better_model=True`` (in an epoch callback of an epoch
    that improved) records the model as the tracker's best, which hippynn does only after the
    callbacks have run."""
    model = training_modules.model
    controller_state = controller.state_dict()
    optimizer_state = controller_state.pop("optimizer", None)
    best = copy.deepcopy(model.state_dict()) if better_model else None
    sections = {
        "model": model.state_dict(),
        "controller": controller_state,
        "metrics": metric_tracker_state(metric_tracker, best_model=best),
        "hippynn": {"format": FORMAT, "controller": _class_path(controller),
                    "schedulers": [_class_path(s) for s in controller.scheduler_list]},
    }
    if optimizer_state is not None:
        sections["optimizer"] = optimizer_state
    return sections


def save(path: Any, training_modules: Any, controller: Any, metric_tracker: Any, *,
         better_model: bool = False, **save_options: Any) -> None:
    """Writes the run's state and every RNG state to ``path`` (``rckpt.save``; atomic: the
    previous file survives any failure). ``save_options`` are rckpt.save's (codec, origin, ...)."""
    _save(path, state(training_modules, controller, metric_tracker, better_model=better_model),
          rng=capture_rng(), **save_options)


class EpochCheckpoint:
    """A hippynn epoch callback (``train_model(..., callbacks=[...])``) that saves the run
    through ``save`` after every ``every``-th epoch; the file then holds the epoch's metrics,
    the controller after its ``push_epoch`` and the RNG the next epoch starts from, as
    hippynn's own ``best_checkpoint.pt`` does, and is written whether or not the epoch
    improved. A relative ``path`` is resolved when the callback is made (hippynn runs are often
    moved into a directory of their own while they train)."""

    def __init__(self, path: Any, training_modules: Any, controller: Any, metric_tracker: Any,
                 *, every: int = 1, **save_options: Any) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"rckpt.hippynn.EpochCheckpoint: every: expected an int >= 1, got "
                             f"{every!r}")
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.path.abspath(path)
        self.path, self.every, self.save_options = path, every, save_options
        self.training_modules, self.controller = training_modules, controller
        self.metric_tracker = metric_tracker

    def __call__(self, epoch: int, better_model: Any) -> None:
        if (epoch + 1) % self.every == 0:
            save(self.path, self.training_modules, self.controller, self.metric_tracker,
                 better_model=bool(better_model), **self.save_options)


def _check(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{where}: {message}")


def _check_model(where: str, model: Any, saved: Any) -> None:
    current = model.state_dict()
    missing = [k for k in current if k not in saved]
    unexpected = [k for k in saved if k not in current]
    _check(not missing and not unexpected, where,
           f"model: the saved state does not fit this model: missing {missing}, unexpected "
           f"{unexpected}")
    for key, value in current.items():
        shape = getattr(saved[key], "shape", None)
        if hasattr(value, "shape") and shape is not None and tuple(shape) != tuple(value.shape):
            raise ValueError(f"{where}: model: {key}: shape: saved {tuple(shape)}, this model "
                             f"{tuple(value.shape)}")


def _check_optimizer(where: str, optimizer: Any, saved: Any) -> None:
    if optimizer is None:
        _check(saved is None, where, "optimizer: saved one, this controller has none")
        return
    _check(saved is not None, where, "optimizer: this controller has one, the file none")
    groups, saved_groups = optimizer.param_groups, saved["param_groups"]
    _check(len(groups) == len(saved_groups), where,
           f"optimizer: param groups: saved {len(saved_groups)}, this optimizer {len(groups)}")
    for i, (group, saved_group) in enumerate(zip(groups, saved_groups)):
        _check(len(group["params"]) == len(saved_group["params"]), where,
               f"optimizer: param group {i}: parameters: saved {len(saved_group['params'])}, "
               f"this optimizer {len(group['params'])}")


def _check_controller(where: str, controller: Any, saved: dict[str, Any],
                      record: dict[str, Any]) -> None:
    _check(record.get("controller") == _class_path(controller), where,
           f"controller: saved {record.get('controller')!r}, this one {_class_path(controller)!r}")
    schedulers = [_class_path(s) for s in controller.scheduler_list]
    _check(list(record.get("schedulers", [])) == schedulers, where,
           f"schedulers: saved {list(record.get('schedulers', []))}, this controller "
           f"{schedulers}")
    missing = [k for k in (*controller._state_vars, "scheduler") if k not in saved]
    _check(not missing, where, f"controller: field(s) {missing} missing")
    _check(len(saved["scheduler"]) == len(schedulers), where,
           f"controller: scheduler: saved {len(saved['scheduler'])} states, this controller "
           f"{len(schedulers)} schedulers")


def _model_device(checkpoint: Any, model: Any) -> Any:
    """The torch device the model's tensors were loaded to (CPU for an emulated device)."""
    for value in checkpoint["model"].values():
        if hasattr(value, "device"):
            return value.device
    return next(model.parameters()).device


def restore(checkpoint: Any, training_modules: Any, controller: Any, *,
            path: Optional[str] = None) -> Any:
    """Restores a loaded checkpoint (``rckpt.load`` of a file ``save`` wrote) into freshly built
    training modules and controller; returns the rebuilt MetricTracker. Everything is checked
    before the first object changes. The modules go where the model's tensors were loaded, with
    hippynn's ``set_devices``, as hippynn's ``load_checkpoint`` places them."""
    where = f"rckpt.hippynn.load: {path!r}" if path is not None else "rckpt.hippynn.restore"
    for section in ("hippynn", "model", "controller", "metrics"):
        _check(section in checkpoint, where, f"section {section!r} is missing; expected a file "
               f"written by rckpt.hippynn.save (sections: {sorted(checkpoint.keys())})")
    record = checkpoint["hippynn"]
    _check(isinstance(record, dict) and record.get("format") == FORMAT, where,
           f"section 'hippynn': format: expected {FORMAT!r}, got "
           f"{record.get('format') if isinstance(record, dict) else record!r}")
    model, loss, evaluator = training_modules
    _check_model(where, model, checkpoint["model"])
    _check_optimizer(where, controller.optimizer, checkpoint.get("optimizer"))
    _check_controller(where, controller, checkpoint["controller"], record)
    metrics = checkpoint["metrics"]
    _check(list(metrics.get("metric_names", [])) == list(evaluator.loss_names), where,
           f"metrics: metric_names: saved {metrics.get('metric_names')}, this evaluator "
           f"{list(evaluator.loss_names)}")
    rng = getattr(checkpoint, "rng", None) or {}
    _check("torch.cpu" in rng, where, f"RNG: the record 'torch.cpu' (what hippynn's shuffles "
           f"draw from) is missing; records: {sorted(rng)}")
    tracker = metric_tracker_from_state(metrics)
    restore_rng(rng)  # validates every record before it touches a generator

    set_devices(model, loss, evaluator, controller.optimizer, _model_device(checkpoint, model))
    model.load_state_dict(checkpoint["model"])
    controller_state = dict(checkpoint["controller"])
    if controller.optimizer is not None:
        controller_state["optimizer"] = checkpoint["optimizer"]
    controller.load_state_dict(controller_state)
    for scheduler, saved in zip(controller.scheduler_list, controller_state["scheduler"]):
        if isinstance(scheduler, RaiseBatchSizeOnPlateau):
            scheduler.best_metric = saved["best_metric"]  # hippynn 0.1.3 reads "boredom"
    return tracker


def load(path: Any, training_modules: Any, controller: Any, *, map_location: Any = None,
         model_device: Any = None, **load_options: Any) -> Any:
    """Loads a file ``save`` wrote into freshly built training modules and controller and
    returns the rebuilt MetricTracker, to pass to ``train_model``.

    ``map_location`` and ``model_device`` are hippynn's ``load_checkpoint`` arguments with
    rckpt's placement rules (both given: ``rckpt.InvalidArgumentError`` before the file is
    opened); ``load_options`` are rckpt.load's others (``emulate_devices``, ``threads``, ...).
    """
    ck = _load(path, map_location=map_location, model_device=model_device, **load_options)
    name = (os.fsdecode(os.fspath(path)) if isinstance(path, (str, bytes, os.PathLike))
            else getattr(path, "name", repr(path)))
    return restore(ck, training_modules, controller, path=name)
