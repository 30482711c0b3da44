"""Resumes a checkpoint of examples/libtorch's `train` in Python, trains on to a step and saves
the run in Python's own layout, with rckpt.capture_rng(): the C++ example resumes that file.

    python resume_in_python.py CHECKPOINT OUT --optimizer adam|adamw|sgd --until STEP

test_interop.py runs it with a second Python whose torch is not the libtorch the examples
link (Debian's torch 1.13), so both layouts of Python's optimizer state are read and written.
"""

import argparse

import torch

import rckpt
from interop_common import Net, make_optimizer, train


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("out")
    parser.add_argument("--optimizer", required=True, choices=["adam", "adamw", "sgd"])
    parser.add_argument("--until", type=int, required=True)
    args = parser.parse_args()
    ck = rckpt.load(args.checkpoint)
    net = Net()
    net.load_state_dict(ck["model"])
    opt = make_optimizer(args.optimizer, net)
    opt.load_state_dict(ck["optimizer"])
    rckpt.restore_rng(ck.rng)
    step, loss = train(net, opt, ck["controller"]["step"], args.until)
    rckpt.save(args.out, {"model": net.state_dict(), "optimizer": opt.state_dict(),
                          "controller": {"step": step, "loss": loss}},
               rng=rckpt.capture_rng())
    print(f"torch {torch.__version__}: resumed {args.checkpoint}, trained to step {step}, "
          f"saved {args.out}")


if __name__ == "__main__":
    main()
