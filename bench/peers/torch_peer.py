"""PyTorch peers: torch.load (plain, and mmap=True with every byte touched),
and torch.load followed by model.load_state_dict into an existing model.

The checkpoint is written once with torch.save from the same tensors
rckpt-bench saved (read from its safetensors file), outside the timed region.
"""
import os
import sys

from peer_common import emit, fsync_file, median_seconds, parse_args, read_header, tensor_bytes, warm

NAMES = ["torch.load", "torch.load(mmap=True)+touch", "torch.load+load_state_dict"]


def load_tensors(torch, path):
    header, start = read_header(path)
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16}
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    out = {}
    for name, v in header.items():
        b, e = v["data_offsets"]
        t = torch.frombuffer(blob, dtype=dtypes[v["dtype"]], count=(e - b) // (4 if v["dtype"] == "F32" else 2),
                             offset=start + b) if e > b else torch.empty(0, dtype=dtypes[v["dtype"]])
        out[name] = t.reshape(v["shape"]).clone()
    return out, tensor_bytes(header)


def model_like(torch, state):
    """A module whose state_dict keys are exactly `state`'s keys, with
    parameters that already exist and have been written (pre-touched)."""
    root = torch.nn.Module()
    for name, t in state.items():
        parts = name.split(".")
        m = root
        for p in parts[:-1]:
            if not hasattr(m, p):
                m.add_module(p, torch.nn.Module())
            m = getattr(m, p)
        m.register_parameter(parts[-1], torch.nn.Parameter(torch.zeros_like(t), requires_grad=False))
    return root


def touch(tensors):
    """Reads every byte (a sum per tensor) on one thread: the touch is ours,
    not the peer's work, and on a loaded machine multi-threaded reductions of
    small tensors cost far more in thread hand-offs than in reading."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = 0.0
        for t in tensors:
            s += float(t.sum())
        return s
    finally:
        torch.set_num_threads(threads)


def main():
    args = parse_args(__doc__)
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "not installed here"
        for n in NAMES:
            emit(n, skipped=f"torch is not importable: {e!r}")
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    state, nbytes = load_tensors(torch, args.safetensors)
    pt = os.path.join(args.workdir, "peer.pt")
    torch.save(state, pt)
    fsync_file(pt)
    warm(pt)
    model = model_like(torch, state)
    del state

    def plain():
        torch.load(pt, weights_only=True)

    emit("torch.load", median_seconds(args.warmup, args.reps, plain), nbytes)

    def mmap_touch():
        sd = torch.load(pt, mmap=True, weights_only=True)
        touch(sd.values())

    emit("torch.load(mmap=True)+touch", median_seconds(args.warmup, args.reps, mmap_touch), nbytes)

    def into_model():
        model.load_state_dict(torch.load(pt, weights_only=True))

    emit("torch.load+load_state_dict", median_seconds(args.warmup, args.reps, into_model), nbytes)
    os.remove(pt)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
