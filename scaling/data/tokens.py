"""Token files, memory-mapped, and random-access batches from them.

A token file is a flat array of token ids: uint16 (nanoGPT's .bin convention) or uint32. A split is a list of
[start, end) intervals of one such array; batches are windows that lie inside one interval, drawn with numpy
fancy indexing (no Python loop per token) from a generator seeded by the caller.

Validation split (`holdout`): the array is cut into G equal segments and the last `val_fraction` of each segment
is held out, with G = clamp(n·val_fraction // 16384, 1, 32): small data hold out one tail, large data hold out up to
32 spans of ≥ 16 Ki tokens spread over the whole file (the default corpus is ordered by source, so a single tail
would be one package). The split depends only on n and val_fraction.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

MIN_VAL_SPAN = 16384
MAX_VAL_SEGMENTS = 32
DTYPES = {"uint16": np.uint16, "uint32": np.uint32}


def open_tokens(path: str | Path, dtype: str = "uint16") -> np.memmap:
    """Memory-map a token file read-only."""
    if dtype not in DTYPES:
        raise ValueError(f"token dtype must be uint16 or uint32, got {dtype!r}")
    path = Path(path)
    size = path.stat().st_size
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    if size == 0 or size % itemsize:
        raise ValueError(f"{path}: {size} bytes is not a whole number of {dtype} tokens")
    return np.memmap(path, dtype=DTYPES[dtype], mode="r")


def write_tokens(path: str | Path, chunks: Iterator[np.ndarray], dtype: str) -> int:
    """Append each chunk of ids to a new file as `dtype`; returns the token count."""
    n = 0
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(np.ascontiguousarray(chunk, dtype=DTYPES[dtype]).tobytes())
            n += len(chunk)
    return n


Intervals = list[tuple[int, int]]


def holdout(n: int, val_fraction: float) -> tuple[Intervals, Intervals]:
    """(train, val) intervals of an array of n tokens; see the module docstring."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    segments = int(min(max(n * val_fraction // MIN_VAL_SPAN, 1), MAX_VAL_SEGMENTS))
    bounds = np.linspace(0, n, segments + 1).astype(np.int64)
    train, val = [], []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        cut = b - max(1, round((b - a) * val_fraction))
        train.append((a, cut))
        val.append((cut, b))
    return train, val


@dataclass
class Split:
    """Intervals of one memory-mapped token array."""

    tokens: np.ndarray
    intervals: Intervals

    @property
    def size(self) -> int:
        return sum(b - a for a, b in self.intervals)

    def windows(self, batch_size: int, seq_len: int, rng: np.random.Generator) -> tuple[Tensor, Tensor]:
        """(inputs, next-token targets) [B, T] int64 from uniformly drawn windows of T + 1 tokens."""
        starts_per = np.array([max(0, b - a - seq_len) for a, b in self.intervals], dtype=np.int64)
        total = int(starts_per.sum())
        if total == 0:
            longest = max(b - a for a, b in self.intervals)
            raise ValueError(f"seq_len {seq_len} does not fit: the longest span of this split is {longest} tokens")
        cum = np.cumsum(starts_per)
        u = rng.integers(0, total, size=batch_size)
        which = np.searchsorted(cum, u, side="right")
        begin = np.array([a for a, _ in self.intervals], dtype=np.int64)[which]
        starts = begin + u - (cum[which] - starts_per[which])
        window = np.asarray(self.tokens[starts[:, None] + np.arange(seq_len + 1)], dtype=np.int64)
        window = torch.from_numpy(window)
        return window[:, :-1], window[:, 1:]

    def batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[tuple[Tensor, Tensor]]:
        rng = np.random.default_rng(seed)
        while True:
            yield self.windows(batch_size, seq_len, rng)
