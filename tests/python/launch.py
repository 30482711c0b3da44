"""Starts N processes of a Python script as torchrun does on one node, for
torches whose own launcher does not run here (torch 1.13 on Python 3.11):

    python launch.py N script.py ARGS...

Each gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a free
port) and RCKPT_TEST_LAUNCH=1. When one exits with an error, the others are
terminated, as torchrun's agent does; the exit status is the first
failure's, or 0.

end_gloo_job() is how the test jobs on gloo groups end (under either
launcher).
"""

import os
import signal
import socket
import subprocess
import sys
import time


def end_gloo_job():
    """Ends a process of a gloo job that succeeded: destroys the default group
    and exits with status 0 without the interpreter's finalisation.

    The destroy ends gloo's worker threads while the interpreter is whole:
    a worker that lets go of a finished collective's tensors during the
    shutdown takes the GIL there and aborts the process ("terminate called
    without an active exception", status -6) after everything succeeded, a
    torch bug (docs/DISTRIBUTED.md, "From Python"). The threads outlive the
    destroy while something still holds the group (a DeviceMesh, DTensors
    on it), and DCP's own collectives leave tensors behind as
    rckpt.distributed's do not: hence no finalisation at all. The job's
    output must be flushed. A job that failed leaves with os._exit(1) and
    no destroy: the other ranks may wait in a collective, and so would the
    destroy.
    """
    import torch.distributed as dist
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    n, script = int(argv[1]), argv[2:]
    port = free_port()
    procs = []
    for rank in range(n):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RCKPT_TEST_LAUNCH="1")
        procs.append(subprocess.Popen([sys.executable, *script], env=env))
    failed = 0
    while any(p.poll() is None for p in procs):
        bad = [p.returncode for p in procs if p.returncode not in (None, 0)]
        if bad and not failed:
            failed = bad[0]
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        time.sleep(0.05)
    bad = [p.returncode for p in procs if p.returncode != 0]
    return failed or (bad[0] if bad else 0)


if __name__ == "__main__":
    sys.exit(1 if (rc := main(sys.argv)) < 0 else rc)
