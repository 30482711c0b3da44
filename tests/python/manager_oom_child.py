"""A CheckpointManager whose newest step does not fit in the memory left: saves
step 1 (16 KiB) and step 2 (64 MiB) into DIRECTORY (a local directory or an
s3:// prefix, reached through the AWS_* environment), caps the process's
address space a little above what it uses, loads, and prints one JSON line:
{"loaded": step or null, "error": the exception's class name or null,
"message": ...}. Run with MALLOC_ARENA_MAX=1, so that a thread's first
allocation does not reserve an arena of its own under the cap.

    manager_oom_child.py DIRECTORY
"""

import json
import resource
import sys

import torch

import rckpt


def address_space_bytes():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


def main(directory):
    m = rckpt.CheckpointManager(directory, keep=None, async_save=False)
    m.save(1, {"model": {"w": torch.zeros(4096)}})
    m.save(2, {"model": {"w": torch.ones(16 << 20)}})
    m.steps()  # what the load needs of the listing and its transport, before the cap
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes() + (32 << 20), hard))
    out: dict = {"loaded": None, "error": None, "message": None}
    try:
        m.load(threads=1)
        out["loaded"] = m.loaded_step
    except Exception as e:  # noqa: BLE001  (reported to the test)
        out.update(error=type(e).__name__, message=str(e))
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
