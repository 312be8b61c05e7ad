"""A one-line progress bar on stderr: done/total, percent, rate and time left, redrawn at most 5 times a second."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, desc: str, unit: str = "", enabled: bool = True) -> None:
        self.total, self.desc, self.unit, self.enabled = max(total, 1), desc, unit, enabled
        self.done, self.start, self.shown = 0, time.perf_counter(), 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self.shown > 0.2 or self.done >= self.total):
            self.shown = now
            rate = self.done / max(now - self.start, 1e-9)
            left = (self.total - self.done) / rate if rate > 0 else 0.0
            bar = "#" * int(20 * min(self.done / self.total, 1))
            sys.stderr.write(f"\r{self.desc} [{bar:<20}] {self.done:,}/{self.total:,} {self.unit} "
                             f"{100 * self.done / self.total:5.1f}%  {rate:,.0f} {self.unit}/s  {left:4.0f}s left ")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write(f"\r{self.desc}: {self.done:,} {self.unit} in {time.perf_counter() - self.start:.1f}s"
                             + " " * 40 + "\n")
            sys.stderr.flush()
