"""safetensors peers: load_file (every byte touched, since the tensors may be
lazily mapped), and load_file followed by model.load_state_dict into an
existing model. Reads the safetensors file rckpt-bench wrote."""
import os
import sys

from peer_common import emit, median_seconds, parse_args, read_header, tensor_bytes, warm

NAMES = ["safetensors.load_file+touch", "safetensors.load_file+load_state_dict"]


def main():
    args = parse_args(__doc__)
    try:
        import torch
        from safetensors.torch import load_file
    except Exception as e:  # noqa: BLE001 - any import failure means "not installed here"
        for n in NAMES:
            emit(n, skipped=f"safetensors.torch is not importable: {e!r}")
        return
    from torch_peer import model_like, touch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    header, _ = read_header(args.safetensors)
    nbytes = tensor_bytes(header)
    warm(args.safetensors)

    def load_touch():
        touch(load_file(args.safetensors).values())

    emit("safetensors.load_file+touch", median_seconds(args.warmup, args.reps, load_touch), nbytes)
    model = model_like(torch, load_file(args.safetensors))

    def into_model():
        model.load_state_dict(load_file(args.safetensors))

    emit("safetensors.load_file+load_state_dict", median_seconds(args.warmup, args.reps, into_model),
         nbytes)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
