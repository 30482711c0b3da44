"""The progress report ``progress=True`` gives a save or load: a bar or log lines."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from . import _core


class ProgressBar:
    """A progress callback: a one-line bar on a terminal, plain lines elsewhere.

    Called with (bytes done, bytes total). On a terminal (``stream.isatty()``)
    it redraws one bar in place, at most every ``interval`` seconds (default
    0.1) and once at the end. Elsewhere (a job's log, a pipe, a file) it
    writes whole lines, no carriage returns: one at most every ``interval``
    seconds (default 5) while the operation runs, and one when it ends, so a
    quick save leaves one line in the log and a long one a line every few
    seconds. Sizes use the binary units of the rckpt CLI (KiB, MiB, GiB).
    """

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30,
                 interval: float | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = interval if interval is not None else (0.1 if self.terminal else 5.0)
        self._start = time.monotonic()
        self._last = self._start if not self.terminal else 0.0
        self._finished = False

    def __call__(self, done: int, total: int) -> bool:
        if self._finished:
            return True
        now = time.monotonic()
        end = done >= total
        if not end and now - self._last < self.interval:
            return True
        self._last = now
        self._finished = end
        frac = done / total if total else 1.0
        elapsed = now - self._start
        rate = _core.human_bytes(int(done / max(elapsed, 1e-9)))
        sizes = f"{_core.human_bytes(done)} / {_core.human_bytes(total)}"
        if self.terminal:
            filled = int(frac * self.width)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r{self.label} [{bar}] {frac * 100:3.0f}% {sizes} {rate}/s")
            if end:
                self.stream.write("\n")
        elif end:
            self.stream.write(f"{self.label}: 100% {sizes} in {elapsed:.1f} s, {rate}/s\n")
        else:
            self.stream.write(f"{self.label}: {frac * 100:3.0f}% {sizes}, {rate}/s\n")
        self.stream.flush()
        return True
