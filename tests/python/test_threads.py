"""The GIL is released while rckpt reads and writes: Python threads keep
running; concurrent loads of one file are safe."""

import threading
import time

import torch

import rckpt


def big_state():
    return {"model": {f"w{i}": torch.randn(1024, 1024) for i in range(48)}}  # 192 MiB


def test_second_thread_runs_during_save_and_load(tmp):
    state = big_state()
    path = tmp / "big.rckpt"
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    # A progress callback that is never called would not need the GIL;
    # measure with none so only the engine runs.
    for op in ("save", "load"):
        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.01)
        t0 = time.perf_counter()
        if op == "save":
            rckpt.save(path, state, codec="zstd", threads=2)
        else:
            rckpt.load(path, threads=2)
        t1 = time.perf_counter()
        stop.set()
        t.join()
        stop.clear()
        during = [x for x in ticks if t0 < x < t1]
        # With the GIL held for the whole call the spinner could not tick.
        assert len(during) >= max(3, int((t1 - t0) / 0.001) // 50), (op, len(during), t1 - t0)
        ticks.clear()


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
