"""The GIL is released while rckpt reads and writes: another Python thread
runs inside a save and inside a load; concurrent loads of one file are safe."""

import sys
import threading

import torch

import rckpt


def _other_thread_runs_during(operation):
    """Runs operation(progress) while a second Python thread waits to do a
    piece of work until the operation's first progress report. Returns the
    reports as (done, total, whether the other thread's work was already
    done), and the other thread's record.

    The switch interval is set so long that CPython never takes the GIL away
    from a running thread: the other thread can only run where the GIL is
    given up. The reports themselves never give it up (they append to a list
    and set an event nobody holds), so a report that finds the other thread's
    work done proves the thread ran between two reports, inside the
    operation, while the library held no GIL. Were the GIL held for the whole
    call, the other thread would run only after the call returned and no
    report would see its work."""
    started = threading.Event()
    reports = []
    record = {}

    def other():
        started.wait()
        record["reports_before"] = len(reports)
        record["done"] = True

    def progress(done, total):
        reports.append((done, total, "done" in record))
        started.set()
        return True

    thread = threading.Thread(target=other)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        thread.start()
        operation(progress)
    finally:
        sys.setswitchinterval(interval)
        started.set()
        thread.join()
    return reports, record


def _assert_ran_inside(op, reports, record):
    assert len(reports) >= 3, (op, reports)
    # The other thread waited for the first report, so it did its work after
    # it; and a later report saw that work done: both inside the operation.
    assert record.get("reports_before", 0) >= 1, (op, record)
    seen = [(done, total) for done, total, other_done in reports if other_done]
    assert seen, (op, "no report saw the other thread's work", reports)


def test_another_python_thread_runs_inside_save_and_load(tmp):
    # Compressible data in many chunks, so the engine works between reports.
    state = {"model": {f"w{i}": torch.randn(1024, 1024) for i in range(16)}}  # 64 MiB
    path = tmp / "big.rckpt"
    reports, record = _other_thread_runs_during(
        lambda progress: rckpt.save(path, state, codec="zstd", chunk_bytes=1 << 20, threads=1,
                                    progress=progress))
    _assert_ran_inside("save", reports, record)

    loaded = {}
    reports, record = _other_thread_runs_during(
        lambda progress: loaded.update(ck=rckpt.load(path, threads=1, progress=progress)))
    _assert_ran_inside("load", reports, record)
    assert torch.equal(loaded["ck"]["model"]["w3"], state["model"]["w3"])


def test_concurrent_loads_of_one_file(tmp):
    state = {"model": {f"w{i}": torch.randn(256, 256) for i in range(16)}}
    path = tmp / "c.rckpt"
    rckpt.save(path, state, codec="zstd")
    errors, results = [], []

    def worker():
        try:
            for _ in range(5):
                ck = rckpt.load(path, threads=1)
                results.append(all(torch.equal(ck["model"][k], v) for k, v in state["model"].items()))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results == [True] * 20
