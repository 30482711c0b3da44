#!/usr/bin/env python3
"""A real hippynn training run stopped and restarted through rckpt, checked bit for bit
against the run that never stopped.

A tiny HIP-NN learns a pairwise energy of 40 synthetic 4-atom molecules (in-memory arrays,
nothing downloaded), with hippynn's own train_model, a PatienceController, Adam and
RaiseBatchSizeOnPlateau (or torch's ReduceLROnPlateau). The run saves through
rckpt.hippynn.EpochCheckpoint after every epoch and is stopped after --stop-after epochs; a
"new process" (freshly built objects, its generators seeded otherwise) restores the file with
rckpt.hippynn.load on --resume-on and trains to the end. The result is compared with the run
that never stopped: weights, optimizer, controller and scheduler state, the MetricTracker's
metric history (all but the wall-clock epoch_times) and best model, and the torch RNG (CPU,
and the CUDA device's when both runs end on it). When --resume-on is another device than
--device, the run that never stopped is the same run moved to that device in memory at the
same epoch (hippynn's set_devices), since the arithmetic of two devices differs.

    python tests/hippynn/restart_scenario.py                          # CPU -> CPU
    python tests/hippynn/restart_scenario.py --device cuda:0 --resume-on cuda:0
    python tests/hippynn/restart_scenario.py --device cuda:0 --resume-on cpu
    python tests/hippynn/restart_scenario.py --saved-on cuda:1 --emulate-devices 2 \\
        --model-device cuda:0         # a run "on cuda:1" resumed on emulated cuda:0

Placement: --model-device X or --map-location X (hippynn's load_checkpoint arguments; a
map_location "cuda:1=cuda:0" is a tag map), --as-saved for neither; the default is
model_device=<--resume-on>. --emulate-devices N loads through rckpt's host-emulated runtime
(tensors stay CPU tensors; --device and --resume-on must be cpu), and --saved-on T records the
model's tensors as saved from T. On CUDA the run uses torch's deterministic algorithms
(CUBLAS_WORKSPACE_CONFIG is set when unset). Prints "identical: ..." and exits 0 when the
resumed run matches; prints the differences and exits 1 otherwise. Needs torch 2, hippynn
0.1.3 and rckpt (PYTHONPATH=<build>/python).
"""

import argparse
import contextlib
import copy
import math
import os
import sys
import tempfile

os.environ.setdefault("HIPPYNN_USE_CUSTOM_KERNELS", "False")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hippynn  # noqa: E402
from hippynn.experiment import SetupParams, setup_training, train_model  # noqa: E402
from hippynn.experiment.controllers import PatienceController, RaiseBatchSizeOnPlateau  # noqa: E402
from hippynn.experiment.device import set_devices  # noqa: E402
from hippynn.graphs import inputs, loss, networks, targets  # noqa: E402

import rckpt  # noqa: E402
import rckpt.hippynn  # noqa: E402

SCHEDULERS = ("raise-batch-size", "plateau")


def build(device, scheduler="raise-batch-size", n_features=4):
    """Fresh training modules, database, controller and MetricTracker on ``device``; the
    weights come from torch's global generator (seed it first)."""
    species = inputs.SpeciesNode(db_name="Z")
    positions = inputs.PositionsNode(db_name="R")
    network = networks.Hipnn(
        "hipnn", (species, positions),
        module_kwargs=dict(possible_species=[0, 1, 6, 8], n_features=n_features,
                           n_sensitivities=3, dist_soft_min=0.3, dist_soft_max=2.5,
                           dist_hard_max=3.0, n_interaction_layers=1, n_atom_layers=1))
    mol_energy = targets.HEnergyNode("HEnergy", network).mol_energy
    mol_energy.db_name = "T"
    rmse = loss.MSELoss.of_node(mol_energy) ** (1 / 2)
    mae = loss.MAELoss.of_node(mol_energy)
    training_modules, db_info = hippynn.experiment.assemble_for_training(
        rmse + mae, {"T-RMSE": rmse, "T-MAE": mae, "Loss": rmse + mae})

    rng = np.random.RandomState(7)  # the data: the same in every process
    n_mol, n_atom = 40, 4
    z = rng.choice([1, 6, 8], size=(n_mol, n_atom)).astype(np.int64)
    r = rng.uniform(0.0, 2.0, size=(n_mol, n_atom, 3)).astype(np.float32)
    dist = np.sqrt(((r[:, :, None] - r[:, None]) ** 2).sum(-1)) + np.eye(n_atom)[None]
    energy = (np.triu(np.exp(-dist), 1).sum((1, 2)) + 0.1 * z.sum(1)).astype(np.float32)
    database = hippynn.databases.Database(arr_dict={"Z": z, "R": r, "T": energy[:, None]},
                                          seed=3, quiet=True, pin_memory=False, **db_info)
    database.make_trainvalidtest_split(test_size=0.2, valid_size=0.2)

    optimizer = torch.optim.Adam(training_modules.model.parameters(), lr=2e-2)
    if scheduler == "raise-batch-size":  # a plateau (< 20 % better) of 2 epochs doubles the batch
        sched = RaiseBatchSizeOnPlateau(optimizer=optimizer, max_batch_size=16, patience=1,
                                        threshold=0.2)
    else:
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1, factor=0.5,
                                                           threshold=0.2)
    controller = PatienceController(optimizer=optimizer, scheduler=sched, batch_size=4,
                                    eval_batch_size=16, max_epochs=8, termination_patience=20,
                                    stopping_key="Loss", quiet=True)
    training_modules, controller, metric_tracker = setup_training(
        training_modules, SetupParams(controller=controller, device=device))
    return training_modules, database, controller, metric_tracker


class Stop(Exception):
    """Ends a run after an epoch (its checkpoint written), as a kill between epochs would."""


def stop_after(epochs, seen):
    def callback(epoch, better_model):
        seen["better_model"] = bool(better_model)
        if epoch + 1 == epochs:
            raise Stop(epoch)
    return callback


def train(objects, workdir, callbacks=()):
    """hippynn's train_model in workdir, its printout in workdir/train.log, without progress
    bars (tqdm's asyncio bar makes an iterator of every loader it wraps and drops it: one more
    draw from the global generator an epoch)."""
    training_modules, database, controller, metric_tracker = objects
    progress, hippynn.settings.PROGRESS = hippynn.settings.PROGRESS, None
    try:
        with hippynn.tools.active_directory(workdir, create=None), \
                open("train.log", "a") as log, contextlib.redirect_stdout(log):
            train_model(training_modules, database, controller, metric_tracker,
                        callbacks=list(callbacks), batch_callbacks=None, store_best=False,
                        store_structure_file=False, store_metrics=False, quiet=True)
    finally:
        hippynn.settings.PROGRESS = progress


def on_host(value):
    """A deep copy with every tensor on the CPU (compared by bits; devices may differ)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: on_host(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(on_host(v) for v in value)
    return copy.deepcopy(value)


def fingerprint(objects):
    """What must be identical at the end: state, metric history, RNG."""
    training_modules, _, controller, tracker = objects
    metrics = rckpt.hippynn.metric_tracker_state(tracker)
    del metrics["epoch_times"]  # wall-clock seconds
    device = next(training_modules.model.parameters()).device
    rng = {"torch.cpu": torch.get_rng_state()}
    if device.type == "cuda":
        rng["torch.cuda"] = torch.cuda.get_rng_state(device)
    return on_host({"model": training_modules.model.state_dict(),
                    "controller": controller.state_dict(), "metrics": metrics, "rng": rng,
                    "batch_size": controller.batch_size, "epochs": tracker.current_epoch})


def differences(a, b, path="run"):
    """Where a and b differ (tensors by bytes, floats by bits)."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, torch.Tensor):
        same = (a.dtype == b.dtype and a.shape == b.shape and
                torch.equal(a.contiguous().view(-1).view(torch.uint8),
                            b.contiguous().view(-1).view(torch.uint8)))
        return [] if same else [f"{path}: tensors differ"]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{path}: keys {list(a)} != {list(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}.{i}")]
    if isinstance(a, float):
        same = a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))
        return [] if same else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def run(device="cpu", resume_on=None, *, load_options=None, saved_on=None, stop=4,
        scheduler="raise-batch-size", workdir=None):
    """See _run; hippynn's printout goes to workdir/hippynn.log and the runs' train.log."""
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="hippynn-restart-"))
    os.makedirs(workdir, exist_ok=True)
    deterministic = torch.are_deterministic_algorithms_enabled()
    if any(torch.device(d).type == "cuda" for d in (device, resume_on or device)):
        torch.use_deterministic_algorithms(True, warn_only=True)  # GPU sums in a fixed order
    try:
        with open(os.path.join(workdir, "hippynn.log"), "a") as log, \
                contextlib.redirect_stdout(log):
            return _run(device, resume_on, load_options=load_options, saved_on=saved_on,
                        stop=stop, scheduler=scheduler, workdir=workdir)
    finally:
        torch.use_deterministic_algorithms(deterministic)


def _run(device, resume_on, *, load_options, saved_on, stop, scheduler, workdir):
    """Trains on ``device``, stops after ``stop`` epochs, resumes on ``resume_on`` with
    ``rckpt.hippynn.load(..., **load_options)`` (default ``model_device=resume_on``); returns
    a dict: ``reference`` and ``resumed`` (fingerprints), ``differences`` (empty when
    identical), ``checkpoint`` (the file) and ``batch_sizes`` (the reference's, per epoch)."""
    resume_on = device if resume_on is None else resume_on
    if load_options is None:
        load_options = {"model_device": resume_on}
    path = os.path.join(workdir, "last.rckpt")
    save_options = {} if saved_on is None else {"origin": saved_on}

    # The run that never stopped (moved to resume_on after `stop` epochs if that differs).
    torch.manual_seed(0)
    reference = build(device, scheduler)
    batch_sizes = []
    record = lambda epoch, better: batch_sizes.append(reference[2].batch_size)  # noqa: E731
    if torch.device(resume_on) == torch.device(device):
        train(reference, os.path.join(workdir, "reference"), [record])
    else:
        seen = {}
        try:
            train(reference, os.path.join(workdir, "reference"), [record, stop_after(stop, seen)])
        except Stop:
            pass
        model, loss_module, evaluator = reference[0]
        if seen["better_model"]:  # what train_model does after the epoch's callbacks
            reference[3].best_model = copy.deepcopy(model.state_dict())
        set_devices(model, loss_module, evaluator, reference[2].optimizer, resume_on)
        train(reference, os.path.join(workdir, "reference"), [record])

    # The run that is stopped after `stop` epochs ...
    torch.manual_seed(0)
    first = build(device, scheduler)
    saver = rckpt.hippynn.EpochCheckpoint(path, first[0], first[2], first[3], **save_options)
    try:
        train(first, os.path.join(workdir, "first"), [saver, stop_after(stop, {})])
        raise AssertionError(f"the run was not stopped after {stop} epochs")
    except Stop:
        pass
    del first

    # ... and resumed by a new process: fresh objects, other generator states.
    torch.manual_seed(12345)
    training_modules, database, controller, _ = build(resume_on, scheduler)
    tracker = rckpt.hippynn.load(path, training_modules, controller, **load_options)
    resumed = (training_modules, database, controller, tracker)
    train(resumed, os.path.join(workdir, "resumed"),
          [rckpt.hippynn.EpochCheckpoint(path, training_modules, controller, tracker,
                                         **save_options)])
    want, got = fingerprint(reference), fingerprint(resumed)
    return {"reference": want, "resumed": got, "differences": differences(want, got),
            "checkpoint": path, "batch_sizes": batch_sizes}


def placement_arg(text):
    """"cpu", "cuda:0", or "cuda:1=cuda:0[,...]" (a tag map)."""
    if "=" not in text:
        return text
    return dict(pair.split("=", 1) for pair in text.split(","))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="train on this torch device")
    parser.add_argument("--resume-on", help="resume on this torch device (default: --device)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--model-device", help="rckpt.hippynn.load(model_device=...)")
    where.add_argument("--map-location", type=placement_arg,
                       help="rckpt.hippynn.load(map_location=...): a device or a=b,c=d")
    where.add_argument("--as-saved", action="store_true", help="neither: tensors as saved")
    parser.add_argument("--emulate-devices", type=int, default=0,
                        help="load through rckpt's host-emulated runtime with N devices")
    parser.add_argument("--saved-on", help="record the model's tensors as saved from this device")
    parser.add_argument("--stop-after", type=int, default=4, help="epochs before the stop (of 8)")
    parser.add_argument("--scheduler", choices=SCHEDULERS, default="raise-batch-size")
    parser.add_argument("--workdir", help="where the runs write (default: a new temporary one)")
    args = parser.parse_args(argv)
    resume_on = args.resume_on or args.device
    if (args.emulate_devices or args.saved_on) and {args.device, resume_on} != {"cpu"}:
        parser.error("--emulate-devices and --saved-on emulate devices on the CPU: "
                     "--device and --resume-on must be cpu")
    if not 1 <= args.stop_after < 8:
        parser.error(f"--stop-after: expected 1..7 (the run has 8 epochs), got {args.stop_after}")
    if args.model_device:
        options = {"model_device": args.model_device}
    elif args.map_location:
        options = {"map_location": args.map_location}
    elif args.as_saved:
        options = {}
    else:
        options = {"model_device": resume_on}
    if args.emulate_devices:
        options["emulate_devices"] = args.emulate_devices
    result = run(args.device, resume_on, load_options=options, saved_on=args.saved_on,
                 stop=args.stop_after, scheduler=args.scheduler, workdir=args.workdir)
    what = (f"{args.device} -> stop after epoch {args.stop_after} -> {resume_on} "
            f"({', '.join(f'{k}={v}' for k, v in options.items()) or 'as saved'}; "
            f"scheduler {args.scheduler}; batch sizes {result['batch_sizes']})")
    if result["differences"]:
        print(f"DIFFERENT: {what}:", *result["differences"][:20], sep="\n  ")
        return 1
    print(f"identical: {what}: weights, optimizer, controller, metric history, RNG")
    return 0


if __name__ == "__main__":
    sys.exit(main())
