#!/usr/bin/env python3
"""Trains a tiny hippynn model for a few epochs on a small synthetic database
and keeps the files hippynn writes (best_checkpoint.pt, experiment_structure.pt,
best_model.pt). Run from this directory:
    pip install hippynn torch numpy      # hippynn 0.1.3 made the committed files
    python3 make_fixtures.py
Training runs in a scratch directory; only the small files are copied here.
"""
import os
import shutil
import tempfile

import numpy as np
import torch

import hippynn
from hippynn.databases import Database
from hippynn.experiment import SetupParams, assemble_for_training, setup_and_train
from hippynn.experiment.controllers import PatienceController, RaiseBatchSizeOnPlateau
from hippynn.graphs import inputs, loss, networks, targets

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n_sys, n_atoms = 40, 4
    species = rng.choice([1, 6], size=(n_sys, n_atoms)).astype(np.int64)
    positions = rng.uniform(0, 2.5, size=(n_sys, n_atoms, 3)).astype(np.float32)
    energy = positions.sum(axis=(1, 2))[:, None].astype(np.float32)

    species_node = inputs.SpeciesNode(db_name="Z")
    positions_node = inputs.PositionsNode(db_name="R")
    network = networks.Hipnn("hipnn_model", (species_node, positions_node), module_kwargs={
        "possible_species": [0, 1, 6], "n_features": 4, "n_sensitivities": 4,
        "dist_soft_min": 0.5, "dist_soft_max": 2.5, "dist_hard_max": 3.0,
        "n_interaction_layers": 1, "n_atom_layers": 1})
    henergy = targets.HEnergyNode("HEnergy", network, db_name="T")
    mse = loss.MSELoss.of_node(henergy)
    training_modules, db_info = assemble_for_training(mse, {"T-MSE": mse})

    work = tempfile.mkdtemp()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        database = Database(arr_dict={"Z": species, "R": positions, "T": energy}, seed=0,
                            test_size=0.2, valid_size=0.2, quiet=True, pin_memory=False,
                            **db_info)
        optimizer = torch.optim.Adam(training_modules.model.parameters(), lr=1e-3)
        scheduler = RaiseBatchSizeOnPlateau(optimizer=optimizer, max_batch_size=16, patience=2)
        controller = PatienceController(optimizer=optimizer, scheduler=scheduler, batch_size=8,
                                        eval_batch_size=8, max_epochs=3, termination_patience=5,
                                        stopping_key="T-MSE")
        setup_and_train(training_modules=training_modules, database=database,
                        setup_params=SetupParams(controller=controller, device="cpu"))
        for name in ["best_checkpoint.pt", "experiment_structure.pt", "best_model.pt"]:
            shutil.copy(name, os.path.join(HERE, name))
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(HERE, "VERSIONS.txt"), "w") as f:
        f.write(f"hippynn {hippynn.__version__}\ntorch {torch.__version__}\n"
                f"numpy {np.__version__}\n")


if __name__ == "__main__":
    main()
