"""Shared pieces of the Triton chunk kernels: tile addressing, gates, decay masks, dots and a launcher that falls
back to smaller pipelines when a config runs out of shared memory.

Layout everywhere: a [B, T, H, D] tensor is read per (b, h) as rows t with stride H·D; [B, T, H] per-token scalars
with stride H. One program handles one chunk of C = 64 tokens (or walks all chunks, for the state passes).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

CHUNK = 64


@triton.jit
def tile(t0, T, H, D, d0, C: tl.constexpr, BD: tl.constexpr):
    """Offsets and mask of the [C, BD] tile of rows t0.. and columns d0.. of a [T, H, D] slice."""
    rows = t0 + tl.arange(0, C)
    cols = d0 + tl.arange(0, BD)
    offs = rows[:, None] * (H * D) + cols[None, :]
    mask = (rows[:, None] < T) & (cols[None, :] < D)
    return offs, mask


@triton.jit
def load_gates(G_base, t0, T, H, C: tl.constexpr):
    """Cumulative log-gates G [C] of a chunk (padded rows carry the last valid value) and that last value gl."""
    rows = t0 + tl.arange(0, C)
    last = tl.minimum(t0 + C, T) - 1
    gl = tl.load(G_base + last * H)
    G = tl.load(G_base + rows * H, mask=rows < T, other=0.0)
    G = tl.where(rows < T, G, gl)
    return G, gl


@triton.jit
def decay(G, C: tl.constexpr, STRICT: tl.constexpr):
    """e^{G_i − G_j} on the causal part (i > j if STRICT else i ≥ j), 0 elsewhere; [C, C] fp32."""
    r = tl.arange(0, C)
    if STRICT:
        m = r[:, None] > r[None, :]
    else:
        m = r[:, None] >= r[None, :]
    return tl.where(m, tl.exp(tl.where(m, G[:, None] - G[None, :], 0.0)), 0.0)


@triton.jit
def mm(a, b, ref_ptr, F32: tl.constexpr, PREC: tl.constexpr):
    """a @ b with fp32 accumulation; operands in fp32 if F32 (tf32/ieee by PREC) else in ref_ptr's dtype."""
    if F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PREC)
    else:
        dt = ref_ptr.dtype.element_ty
        return tl.dot(a.to(dt), b.to(dt), input_precision=PREC)


def pow2(n: int, lo: int = 16) -> int:
    """The next power of two ≥ max(n, lo)."""
    return max(lo, triton.next_power_of_2(n))


def precision(dtype: torch.dtype) -> str:
    """Dot precision: exact fp32 for fp32 inputs, tf32 where fp32 operands meet half-precision inputs."""
    return "ieee" if dtype == torch.float32 else "tf32"


_chosen: dict[tuple, dict[str, int]] = {}


def launch(kernel: Any, grid: tuple[int, ...], args: Sequence[Any], kwargs: dict[str, Any],
           configs: Sequence[dict[str, int]]) -> None:
    """Launch `kernel` with the first of `configs` (num_warps/num_stages) that fits the device's shared memory."""
    key = (kernel.fn.__name__ if hasattr(kernel, "fn") else id(kernel),
           tuple(sorted((k, v) for k, v in kwargs.items() if isinstance(v, (int, bool, str)))),
           tuple(a.dtype for a in args if isinstance(a, torch.Tensor)))
    if key in _chosen:
        kernel[grid](*args, **kwargs, **_chosen[key])
        return
    for i, cfg in enumerate(configs):
        try:
            kernel[grid](*args, **kwargs, **cfg)
        except OutOfResources:
            if i == len(configs) - 1:
                raise
            continue
        _chosen[key] = cfg
        return
