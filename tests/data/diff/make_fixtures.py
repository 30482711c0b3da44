"""Writes the fixtures of `rckpt diff`'s state comparison under tests/data/diff/.

Run with torch 2.x (torch.distributed.checkpoint), safetensors and this
build's rckpt package (the committed files were made with torch 2.15 on CPU,
safetensors 0.8):

    PYTHONPATH=build/python python tests/data/diff/make_fixtures.py tests/data/diff

One small model state (a Linear and a BatchNorm1d, known values), written
four ways:

- state_dict.pt: torch.save(model.state_dict()), an OrderedDict with torch's
  _metadata attribute;
- state_dict.safetensors: safetensors.torch.save_file of the same tensors
  (no tree, no metadata);
- dcp/: dcp.save({"model": state_dict, "epoch": 3, "note": "x"}) with DCP's
  FileSystemWriter (.metadata and one .distcp file);
- writer.rckpt: the same dcp.save with rckpt.dcp.Writer, a collective .rckpt
  whose tree is {"common": state, "ranks": [...]}.

tests/tools/diff_test.cc checks that the default diff finds each pair
identical and --strict finds the container differences.
"""

import os
import shutil
import sys

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import save_file

import rckpt.dcp


def model_state():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    with torch.no_grad():
        for i, t in enumerate(model.state_dict().values()):
            if t.is_floating_point():
                t.copy_(torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape) / (i + 1))
    return model.state_dict()


def main(out):
    os.makedirs(out, exist_ok=True)
    sd = model_state()
    torch.save(sd, os.path.join(out, "state_dict.pt"))
    save_file(dict(sd), os.path.join(out, "state_dict.safetensors"))
    state = {"model": dict(sd), "epoch": 3, "note": "x"}
    shutil.rmtree(os.path.join(out, "dcp"), ignore_errors=True)
    dcp.save(state, checkpoint_id=os.path.join(out, "dcp"), no_dist=True)
    dcp.save(state, storage_writer=rckpt.dcp.Writer(os.path.join(out, "writer.rckpt")),
             no_dist=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
