"""Plain-text output and checked output folders, for the CLI and the library alike (imports nothing of deltamup)."""
from __future__ import annotations

import math
import os
from pathlib import Path


def writable_dir(path: str) -> Path:
    """The directory, created if needed; ValueError if it cannot be written (a write is tried: also a full disk or a
    read-only filesystem is found before any work)."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create output directory {out}: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise ValueError(f"output directory {out} is not writable")
    _probe(out)
    return out


def writable_file(path: str, flag: str = "--out") -> Path:
    """A file path to write later: its folder exists and takes a write, and it is not a folder itself."""
    file = Path(path)
    folder = file.parent
    if file.is_dir():
        raise ValueError(f"{flag}: {file} is a directory, not a file")
    if not folder.is_dir():
        raise ValueError(f"{flag}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{flag}: folder {folder} is not writable")
    _probe(folder)
    return file


def _probe(folder: Path) -> None:
    """Writes and removes one byte in `folder`: ValueError naming the reason when that fails."""
    probe = folder / f".write-probe-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"\0")
    except OSError as e:
        raise ValueError(f"cannot write in {folder}: {e.strerror}") from None
    finally:
        probe.unlink(missing_ok=True)


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
