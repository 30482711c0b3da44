"""Runs the one-process gloo job of test_distributed_import.py many times under
CPU load and counts the runs whose exit aborted:

    PYTHONPATH=build/python python tests/python/stress_process_group_exit.py [--runs 100]
        [--busy 2] [--child process_group_child.py]

An abort is the child killed by SIGABRT ("terminate called without an active
exception"): gloo's worker thread releasing a finished collective's tensors
while the interpreter shuts down. Each run gets its own temporary directory
(checkpoint and rendezvous file); ``--busy`` processes spin for the whole
run, as a loaded machine's other work would. Prints one line per failed run
and a summary; the exit status is 0 only when every run succeeded. Not a
test of the suite (it takes minutes): the measurement docs/DISTRIBUTED.md
("From Python") reports.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import rckpt

HERE = os.path.dirname(os.path.abspath(__file__))
SPIN = "while True:\n    pass\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--busy", type=int, default=2, help="processes spinning meanwhile")
    parser.add_argument("--child", default=os.path.join(HERE, "process_group_child.py"),
                        help="the job to run: a script that takes a directory")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(rckpt.__file__)))
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    outcomes: dict[str, int] = {"ok": 0, "aborted": 0, "failed": 0}
    t0 = time.monotonic()
    try:
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="rckpt-pg-exit-") as directory:
                r = subprocess.run([sys.executable, args.child, directory], env=env,
                                   cwd=directory, capture_output=True, text=True, timeout=600)
            if (i + 1) % 10 == 0:
                print(f"{i + 1} runs, {time.monotonic() - t0:.0f} s", flush=True)
            if r.returncode == 0:
                outcomes["ok"] += 1
                continue
            kind = "aborted" if r.returncode == -signal.SIGABRT else "failed"
            outcomes[kind] += 1
            tail = r.stderr.strip().splitlines()[-3:]
            print(f"run {i + 1}: {kind} (exit status {r.returncode}): {' | '.join(tail)}",
                  flush=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    import torch
    print(f"{args.runs} runs of {os.path.basename(args.child)} with {args.busy} busy processes "
          f"(torch {torch.__version__}, python {sys.version.split()[0]}, "
          f"{time.monotonic() - t0:.0f} s): {outcomes['ok']} ok, {outcomes['aborted']} aborted, "
          f"{outcomes['failed']} failed otherwise")
    return 0 if outcomes["ok"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
