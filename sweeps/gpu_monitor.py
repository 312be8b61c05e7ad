"""GPU utilisation over a sweep: a driver thread that samples nvidia-smi into DIR/gpu.csv.

Each line: unix time, GPU index, utilisation % (the share of the last sample period in which a kernel ran),
memory used MiB. Only GPUs of the driver's machine are seen (on a cluster, run the driver on a GPU node).
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

QUERY = ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


def sample() -> list[tuple[str, float, float]]:
    """(index, utilisation %, memory MiB) per GPU now; [] when nvidia-smi is missing or fails."""
    try:
        text = subprocess.run(QUERY, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            rows.append((parts[0], float(parts[1]), float(parts[2])))
        except (IndexError, ValueError):
            continue
    return rows


def memory_total_mib() -> float | None:
    """Memory of this machine's first GPU (MiB) from nvidia-smi, without starting CUDA here; None without one."""
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10, check=True).stdout
        return float(text.split()[0])
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


class GpuMonitor:
    """`with GpuMonitor(path):` samples every `interval` seconds while the block runs (no-op without GPUs)."""

    def __init__(self, path: Path, interval: float = 1.0) -> None:
        self.path, self.interval = Path(path), interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-monitor", daemon=True)
        self.active = shutil.which("nvidia-smi") is not None and bool(sample())

    def __enter__(self) -> GpuMonitor:
        if self.active:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.active:
            self._thread.join()

    def _run(self) -> None:
        with open(self.path, "a") as f:
            while not self._stop.wait(self.interval):
                now = time.time()
                f.writelines(f"{now:.3f},{i},{u:g},{m:g}\n" for i, u, m in sample())
                f.flush()
