"""Plain-text output and checked output folders, for the CLI and the library alike (imports nothing of deltamup)."""
from __future__ import annotations

import math
import os
from pathlib import Path


def writable_dir(path: str) -> Path:
    """The directory, created if needed; ValueError if it cannot be written."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create output directory {out}: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise ValueError(f"output directory {out} is not writable")
    return out


def print_table(rows: list[dict], columns: list[str] | None = None) -> None:
    """A plain aligned text table."""
    if not rows:
        return
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def duration(seconds: float) -> str:
    """'12s', '3m05s' or '1h02m'; '?' for a time that is not finite."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
