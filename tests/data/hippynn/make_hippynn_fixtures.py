#!/usr/bin/env python3
"""Trains a tiny hippynn model and keeps the checkpoint files hippynn writes.

hippynn's own training routine (setup_and_train with SetupParams and a
PatienceController) runs a few epochs of a very small HIP-NN on a synthetic
database generated here, in a scratch folder; the files it writes there
(best_checkpoint.pt, experiment_structure.pt, best_model.pt) are copied into
this directory, together with expected.json: what torch itself reads from
those same files (tensor names, dtypes, shapes and an FNV-1a 64 checksum of
their bytes, the RNG state bytes, the controller scalars, the globals each
pickle names). The tests in tests/hippynn compare rckpt's import against it.
It also writes small plain-torch files with the pickle shapes the structure
file has (cyclic_objects.pt, operator_values.pt, object_keys.pt) and two that
must stay refused (operator_call.pt, operator_attrgetter.pt).

Run from anywhere with torch, numpy and hippynn installed:
    python3 -m venv --system-site-packages /tmp/hvenv   # or install torch too
    /tmp/hvenv/bin/pip install hippynn                  # pulls numpy
    /tmp/hvenv/bin/python make_hippynn_fixtures.py [--expected-only]
Seeds are fixed; rerunning rewrites every file (bytes may change with other
versions, expected.json always matches the files next to it). The versions
used are written into VERSIONS.txt.
"""
import io
import json
import os
import pickletools
import random
import shutil
import sys
import tempfile
import zipfile

os.environ.setdefault("HIPPYNN_USE_CUSTOM_KERNELS", "False")

import numpy as np
import torch

import hippynn
from hippynn.experiment import SetupParams, setup_and_train
from hippynn.experiment.controllers import PatienceController, RaiseBatchSizeOnPlateau
from hippynn.experiment.metric_tracker import MetricTracker
from hippynn.graphs import inputs, loss, networks, targets

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("best_checkpoint.pt", "experiment_structure.pt", "best_model.pt")
MAX_FILE_BYTES = 300 * 1024


def make_database(db_info):
    """40 molecules of 4 atoms (H, C, O) with a pairwise energy as target."""
    rng = np.random.RandomState(7)
    n_mol, n_atom = 40, 4
    species = rng.choice([1, 6, 8], size=(n_mol, n_atom)).astype(np.int64)
    pos = rng.uniform(0.0, 2.0, size=(n_mol, n_atom, 3)).astype(np.float32)
    diff = pos[:, :, None, :] - pos[:, None, :, :]
    r = np.sqrt((diff ** 2).sum(-1)) + np.eye(n_atom)[None]
    energy = (np.triu(np.exp(-r), 1).sum((1, 2)) + 0.1 * species.sum(1)).astype(np.float32)
    arrays = {"Z": species, "R": pos, "T": energy[:, None]}
    db = hippynn.databases.Database(arr_dict=arrays, seed=3, quiet=True, **db_info)
    db.make_trainvalidtest_split(test_size=0.2, valid_size=0.2)
    return db


def train(workdir):
    species = inputs.SpeciesNode(db_name="Z")
    positions = inputs.PositionsNode(db_name="R")
    network = networks.Hipnn(
        "hipnn", (species, positions),
        module_kwargs=dict(possible_species=[0, 1, 6, 8], n_features=4, n_sensitivities=3,
                           dist_soft_min=0.3, dist_soft_max=2.5, dist_hard_max=3.0,
                           n_interaction_layers=1, n_atom_layers=1))
    henergy = targets.HEnergyNode("HEnergy", network)
    mol_energy = henergy.mol_energy
    mol_energy.db_name = "T"
    rmse = loss.MSELoss.of_node(mol_energy) ** (1 / 2)
    mae = loss.MAELoss.of_node(mol_energy)
    validation_losses = {"T-RMSE": rmse, "T-MAE": mae, "Loss": rmse + mae}
    training_modules, db_info = hippynn.experiment.assemble_for_training(rmse + mae,
                                                                         validation_losses)
    database = make_database(db_info)
    optimizer = torch.optim.Adam(training_modules.model.parameters(), lr=1e-2)
    scheduler = RaiseBatchSizeOnPlateau(optimizer=optimizer, max_batch_size=16, patience=2)
    controller = PatienceController(optimizer=optimizer, scheduler=scheduler, batch_size=8,
                                    eval_batch_size=16, max_epochs=4, termination_patience=5,
                                    stopping_key="Loss")
    params = SetupParams(controller=controller, device="cpu")
    with hippynn.tools.active_directory(workdir, create=True):
        with hippynn.tools.log_terminal("training_log.txt", "wt"):
            setup_and_train(training_modules=training_modules, database=database,
                            setup_params=params)


# ---- expected values, read back by torch from the copied files ----

def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def tensor_info(t):
    t = t.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "fnv1a64": fnv1a64(raw), "device": str(t.device)}


def walk(obj, path, out):
    """Names tensors as rckpt does: key paths joined with '.', an object's
    __dict__ adds no component."""
    if isinstance(obj, torch.Tensor):
        out[".".join(path)] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, path + [str(k)], out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, path + [str(i)], out)
    elif isinstance(obj, MetricTracker):
        walk(vars(obj), path, out)


def rebuilt_tensors(path):
    """Every tensor object the pickle rebuilds (shared ones once), by hooking
    torch's rebuild functions during a full (trusted) load."""
    seen = []
    originals = {}
    import torch._utils as tu
    for name in ("_rebuild_tensor_v2", "_rebuild_tensor_v3"):
        if hasattr(tu, name):
            originals[name] = getattr(tu, name)

            def hook(*args, _orig=originals[name], **kwargs):
                t = _orig(*args, **kwargs)
                seen.append(t)
                return t
            setattr(tu, name, hook)
    try:
        torch.load(path, weights_only=False, map_location="cpu")
    finally:
        for name, f in originals.items():
            setattr(tu, name, f)
    return sorted((tensor_info(t) for t in seen),
                  key=lambda i: (i["dtype"], i["shape"], i["fnv1a64"]))


def pickle_globals(path):
    with zipfile.ZipFile(path) as z:
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        data = z.read(pkl)
    names, strings = set(), []
    for op, arg, _ in pickletools.genops(io.BytesIO(data)):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":
            names.add(strings[-2] + "." + strings[-1])
        elif op.name in ("GLOBAL", "INST"):
            names.add(arg.replace(" ", "."))
    return sorted(names)


def expected(folder):
    exp = {}
    state = torch.load(os.path.join(folder, "best_checkpoint.pt"), weights_only=False,
                       map_location="cpu")
    named = {}
    walk(state, [], named)
    rng = named.pop("torch_rng_state")
    ctrl = state["controller"]
    exp["best_checkpoint.pt"] = {
        "top_keys": list(state.keys()),
        "tensors": {k: tensor_info(v) for k, v in named.items()},
        "rng": {"torch_rng_state": {"nbytes": rng.numel(), "hex": rng.numpy().tobytes().hex()}},
        "controller": {k: v for k, v in ctrl.items() if k not in ("optimizer", "scheduler")},
        "optimizer_steps": {str(k): float(v["step"]) for k, v in ctrl["optimizer"]["state"].items()},
        "metric_tracker_epochs": len(state["metric_tracker"].epoch_best_metric_values),
        "rebuilt": rebuilt_tensors(os.path.join(folder, "best_checkpoint.pt")),
        "globals": pickle_globals(os.path.join(folder, "best_checkpoint.pt")),
    }
    model = torch.load(os.path.join(folder, "best_model.pt"), weights_only=True,
                       map_location="cpu")
    exp["best_model.pt"] = {"tensors": {k: tensor_info(v) for k, v in model.items()},
                            "globals": pickle_globals(os.path.join(folder, "best_model.pt"))}
    structure = os.path.join(folder, "experiment_structure.pt")
    exp["experiment_structure.pt"] = {
        "top_keys": list(torch.load(structure, weights_only=False, map_location="cpu").keys()),
        "rebuilt": rebuilt_tensors(structure),
        "globals": pickle_globals(structure),
    }
    return exp


# ---- regression fixtures of what hippynn's structure file needs (plain torch) ----

def write_pickle_shape_fixtures():
    """Small files with the pickle shapes experiment_structure.pt has: an
    object graph with cycles (graph nodes pointing at their parents and
    children), operator functions stored as values, dicts keyed by objects
    (GraphModule.names_dict); plus the refusals that must stay (calling an
    operator function, operator.attrgetter)."""
    import operator
    import types
    mod = types.ModuleType("mylib.graph")

    class Node:
        def __init__(self, name):
            self.name, self.parents, self.children = name, [], []

    class CallsPow:
        def __reduce__(self):
            return (operator.pow, (2, 3))
    for cls in (Node, CallsPow):
        cls.__module__, cls.__qualname__ = mod.__name__, cls.__name__
        setattr(mod, cls.__name__, cls)
    sys.modules.setdefault("mylib", types.ModuleType("mylib"))
    sys.modules[mod.__name__] = mod

    a, b, c = Node("a"), Node("b"), Node("c")
    a.children, b.parents, c.parents, b.children = [b, c], [a], [a, b], [c]
    a.weight = torch.arange(4, dtype=torch.float32)
    torch.save({"nodes": [a, b, c], "root": a}, os.path.join(HERE, "cyclic_objects.pt"))
    torch.save({"fn": operator.pow, "ops": [operator.add, operator.mul],
                "w": torch.arange(3, dtype=torch.float64)},
               os.path.join(HERE, "operator_values.pt"))
    keys = [Node("k0"), Node("k1")]
    torch.save({"names": {keys[0]: "k0", keys[1]: "k1"}, "by_int": {1: "one"},
                "w": torch.ones(2, dtype=torch.int32)},
               os.path.join(HERE, "object_keys.pt"))
    torch.save({"x": CallsPow()}, os.path.join(HERE, "operator_call.pt"))
    torch.save({"getter": operator.attrgetter("system")},
               os.path.join(HERE, "operator_attrgetter.pt"))


def main():
    write_pickle_shape_fixtures()
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    torch.set_default_dtype(torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        work = os.path.join(tmp, "run")
        if "--expected-only" not in sys.argv:  # keep the files, redo expected.json
            train(work)
        for f in FILES if "--expected-only" not in sys.argv else ():
            size = os.path.getsize(os.path.join(work, f))
            if size > MAX_FILE_BYTES:
                sys.exit(f"{f} is {size} bytes, over {MAX_FILE_BYTES}: shrink the network")
            shutil.copyfile(os.path.join(work, f), os.path.join(HERE, f))
    exp = expected(HERE)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(HERE, "VERSIONS.txt"), "w") as f:
        f.write(f"hippynn {hippynn.__version__}\ntorch {torch.__version__}\n"
                f"numpy {np.__version__}\npython {sys.version.split()[0]}\n")
    for f in FILES + ("expected.json",):
        print(f, os.path.getsize(os.path.join(HERE, f)))


if __name__ == "__main__":
    main()
