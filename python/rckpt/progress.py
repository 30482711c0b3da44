"""The progress bar ``progress=True`` draws for a save or load."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from . import _core


class ProgressBar:
    """A progress callback that draws a one-line bar on a terminal.

    Called with (bytes done, bytes total); draws at most every ``interval``
    seconds and once at the end, and only when ``stream`` is a terminal.
    Sizes use the binary units of the rckpt CLI (KiB, MiB, GiB).
    """

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30,
                 interval: float = 0.1) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.interval = interval
        self._last = 0.0
        self._start = time.monotonic()
        self._enabled = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int) -> bool:
        if not self._enabled:
            return True
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return True
        self._last = now
        frac = done / total if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        rate = done / max(now - self._start, 1e-9)
        self.stream.write(f"\r{self.label} [{bar}] {frac * 100:3.0f}% "
                          f"{_core.human_bytes(done)} / {_core.human_bytes(total)} "
                          f"{_core.human_bytes(int(rate))}/s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
        return True
