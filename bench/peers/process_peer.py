"""One peer load in a fresh process, for rckpt-bench's whole-process cases.

rckpt-bench starts this script once per repetition, so every load runs in a
new interpreter as a restarting training process does. Interpreter start and
imports are not timed (they are reported separately); the timed region is
the load and, for loaders that map the file, a read of every byte on one
thread (as the in-process peers do). Prints one JSON line (peer_common.emit).

  process_peer.py --case NAME --file PATH [--threads N]
  process_peer.py --write-pt OUT --safetensors IN     (torch.save, untimed)
"""
import argparse
import inspect
import os
import sys
import time

from peer_common import emit, fsync_file, read_header, tensor_bytes

CASES = ["torch.load", "torch.load(mmap=True)+touch", "safetensors.load_file+touch"]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--case", choices=CASES)
    p.add_argument("--file")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--write-pt")
    p.add_argument("--safetensors")
    args = p.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "not installed here"
        emit(args.case or "torch.save", skipped=f"torch is not importable: {e!r}")
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    from torch_peer import load_tensors, touch

    if args.write_pt:
        state, _ = load_tensors(torch, args.safetensors)
        torch.save(state, args.write_pt)
        fsync_file(args.write_pt)
        return
    if args.case == "safetensors.load_file+touch":
        try:
            from safetensors.torch import load_file
        except Exception as e:  # noqa: BLE001
            emit(args.case, skipped=f"safetensors is not importable: {e!r}")
            return
        nbytes = tensor_bytes(read_header(args.file)[0])
        t0 = time.perf_counter()
        touch(load_file(args.file).values())
        emit(args.case, time.perf_counter() - t0, nbytes)
        return
    kwargs = {"weights_only": True} if "weights_only" in inspect.signature(torch.load).parameters else {}
    if args.case == "torch.load(mmap=True)+touch":
        if "mmap" not in inspect.signature(torch.load).parameters:
            emit(args.case, skipped=f"torch {torch.__version__} has no torch.load(mmap=True) (added in 2.1)")
            return
        kwargs["mmap"] = True
    t0 = time.perf_counter()
    sd = torch.load(args.file, **kwargs)
    if "mmap" in kwargs:
        touch(sd.values())
    seconds = time.perf_counter() - t0
    emit(args.case, seconds, sum(t.numel() * t.element_size() for t in sd.values()))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
