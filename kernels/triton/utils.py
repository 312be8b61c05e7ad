"""Shared pieces of the Triton chunk kernels: tile addressing, gates, decay masks, dots and a launcher that falls
back to smaller pipelines when a config runs out of shared memory.

Layout everywhere: a [B, T, H, D] tensor is read per (b, h) as rows t with stride H·D; [B, T, H] per-token scalars
with stride H. One program handles one chunk of C = 64 rows (or walks all chunks, for the state passes).
DeltaProduct_NH runs over T = T_tok·NH micro-rows: k, v, β and the intermediates have a row per micro-row, while
q, o, do, dq ([B, T_tok, H, ·]) and g, dg ([B, T_tok, H]) are read and written through row_map / tile with NH
(micro-row r is token r // NH, held only at one phase PH of r % NH: NH − 1 for q/o/do/dq, 0 for g/dg).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

CHUNK = 64


@triton.jit
def row_map(t0, T, C: tl.constexpr, NH: tl.constexpr, PH: tl.constexpr):
    """Micro-rows t0.. of a chunk (T of them in all) as rows of a tensor with one row per token of NH micro-rows:
    the token index r // NH and whether that tensor holds micro-row r (r < T and r % NH == PH). NH = 1 (the plain
    rule, one token a row) is the identity: rows t0.. and r < T."""
    rows = t0 + tl.arange(0, C)
    if NH == 1:
        idx = rows
        keep = rows < T
    else:
        idx = rows // NH
        keep = (rows < T) & (rows % NH == PH)
    return idx, keep


@triton.jit
def tok_base(i_b, i_h, T, H, NH: tl.constexpr):
    """Offset of (b, token 0, h) in a [B, T / NH, H] tensor (T micro-rows, NH per token)."""
    if NH == 1:
        base = i_b * T * H + i_h
    else:
        base = i_b * (T // NH) * H + i_h
    return base


@triton.jit
def tile(t0, T, H, D, d0, C: tl.constexpr, BD: tl.constexpr, NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """Offsets and mask of the [C, BD] tile of micro-rows t0.. and columns d0.. of a [T / NH, H, D] slice: each
    micro-row r addresses token r // NH and is masked unless r % NH == PH (see row_map; NH = 1: rows t0.. of a
    [T, H, D] slice)."""
    rows, keep = row_map(t0, T, C, NH, PH)
    cols = d0 + tl.arange(0, BD)
    offs = rows[:, None] * (H * D) + cols[None, :]
    mask = keep[:, None] & (cols[None, :] < D)
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
def mm(a, b, ref_ptr, PREC: tl.constexpr):
    """a @ b with fp32 accumulation. PREC (see precision): "half", operands in ref_ptr's dtype (an input's, bf16 or
    fp16, as fla's kernels); "ieee", exact fp32 operands (fp32 inputs); "tf32", fp32 operands at tf32."""
    if PREC == "half":
        dt = ref_ptr.dtype.element_ty
        out = tl.dot(a.to(dt), b.to(dt))
    else:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PREC)
    return out


@triton.jit
def state_block(i_k, rv, K, V, BK: tl.constexpr):
    """Offsets and mask of rows i_k·BK.. and columns rv of a [K, V] state."""
    rk = i_k * BK + tl.arange(0, BK)
    return rk[:, None] * V + rv[None, :], (rk[:, None] < K) & (rv[None, :] < V)


@triton.jit
def load_state(base, i_k, rv, K, V, BK: tl.constexpr):
    """The [BK, BV] block of rows i_k·BK.. and columns rv of the [K, V] state at `base`, as stored."""
    p, m = state_block(i_k, rv, K, V, BK)
    return tl.load(base + p, mask=m, other=0.0)


@triton.jit
def store_state(base, b_s, i_k, rv, K, V, BK: tl.constexpr):
    """Store the fp32 block b_s [BK, BV] at rows i_k·BK.. and columns rv of the [K, V] state at `base`."""
    p, m = state_block(i_k, rv, K, V, BK)
    tl.store(base + p, b_s.to(base.dtype.element_ty), mask=m)


@triton.jit
def dot_rows(x, t0, T, H, K, i_k, b_s, C: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
             NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """X[chunk, K block i_k] @ b_s → [C, BV] fp32, for X [T, H, K] at `x` (or [T / NH, H, K], rows mapped as in
    tile) and b_s [BK, BV] (cast to X's dtype)."""
    p, m = tile(t0, T, H, K, i_k * BK, C, BK, NH, PH)
    b_x = tl.load(x + p, mask=m, other=0.0)
    return _dot_as(b_x, b_s, PREC)


@triton.jit
def dot_trans(x, t0, T, H, K, i_k, b_r, C: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
              NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """X[chunk, K block i_k]ᵀ @ b_r → [BK, BV] fp32, for X [T, H, K] at `x` (or [T / NH, H, K], rows mapped as in
    tile) and b_r [C, BV] (cast to X's dtype)."""
    p, m = tile(t0, T, H, K, i_k * BK, C, BK, NH, PH)
    b_x = tl.load(x + p, mask=m, other=0.0)
    return _dot_as(tl.trans(b_x), b_r, PREC)


@triton.jit
def _dot_as(a, b, PREC: tl.constexpr):
    """a @ b with b cast to a's dtype (the state passes: operands in the inputs' dtype; PREC as in mm)."""
    if PREC == "half":
        out = tl.dot(a, b.to(a.dtype))
    else:
        out = tl.dot(a, b.to(a.dtype), input_precision=PREC)
    return out


@triton.jit
def load_states(base, rv, K, V, BK: tl.constexpr, BV: tl.constexpr, NKB: tl.constexpr, LOAD: tl.constexpr):
    """A [K, BV] state column block as four fp32 [BK, BV] row blocks: the first NKB loaded from `base` if LOAD,
    the rest (and all of them otherwise) zeros."""
    b1 = tl.zeros([BK, BV], dtype=tl.float32)
    b2 = tl.zeros([BK, BV], dtype=tl.float32)
    b3 = tl.zeros([BK, BV], dtype=tl.float32)
    b4 = tl.zeros([BK, BV], dtype=tl.float32)
    if LOAD:
        b1 += load_state(base, 0, rv, K, V, BK).to(tl.float32)
        if NKB > 1:
            b2 += load_state(base, 1, rv, K, V, BK).to(tl.float32)
        if NKB > 2:
            b3 += load_state(base, 2, rv, K, V, BK).to(tl.float32)
        if NKB > 3:
            b4 += load_state(base, 3, rv, K, V, BK).to(tl.float32)
    return b1, b2, b3, b4


@triton.jit
def store_states(base, b1, b2, b3, b4, rv, K, V, BK: tl.constexpr, NKB: tl.constexpr):
    """Store the first NKB row blocks of a state column block (see load_states) at `base`."""
    store_state(base, b1, 0, rv, K, V, BK)
    if NKB > 1:
        store_state(base, b2, 1, rv, K, V, BK)
    if NKB > 2:
        store_state(base, b3, 2, rv, K, V, BK)
    if NKB > 3:
        store_state(base, b4, 3, rv, K, V, BK)


@triton.jit
def dot_rows_states(x, t0, T, H, K, b1, b2, b3, b4, C: tl.constexpr, BK: tl.constexpr, NKB: tl.constexpr,
                    PREC: tl.constexpr):
    """X[chunk] @ S → [C, BV] fp32, for X [T, H, K] at `x` and the state column block S given as row blocks."""
    acc = dot_rows(x, t0, T, H, K, 0, b1, C, BK, PREC)
    if NKB > 1:
        acc += dot_rows(x, t0, T, H, K, 1, b2, C, BK, PREC)
    if NKB > 2:
        acc += dot_rows(x, t0, T, H, K, 2, b3, C, BK, PREC)
    if NKB > 3:
        acc += dot_rows(x, t0, T, H, K, 3, b4, C, BK, PREC)
    return acc


@triton.jit
def add_trans_states(b1, b2, b3, b4, decay, x, t0, T, H, K, b_r, C: tl.constexpr, BK: tl.constexpr,
                     NKB: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr = 1, PH: tl.constexpr = 0):
    """decay · S + X[chunk]ᵀ b_r for the state column block S (row blocks b1..b4), X [T, H, K] at `x` (or
    [T / NH, H, K], rows mapped as in tile), b_r [C, BV]; blocks beyond NKB come back unchanged."""
    b1 = b1 * decay + dot_trans(x, t0, T, H, K, 0, b_r, C, BK, PREC, NH, PH)
    if NKB > 1:
        b2 = b2 * decay + dot_trans(x, t0, T, H, K, 1, b_r, C, BK, PREC, NH, PH)
    if NKB > 2:
        b3 = b3 * decay + dot_trans(x, t0, T, H, K, 2, b_r, C, BK, PREC, NH, PH)
    if NKB > 3:
        b4 = b4 * decay + dot_trans(x, t0, T, H, K, 3, b_r, C, BK, PREC, NH, PH)
    return b1, b2, b3, b4


def state_blocks(K: int) -> tuple[int, int]:
    """(BK, NKB) of the sequential passes: the [K, BV] state column block is held as NKB ≤ 4 row blocks of BK rows
    (64 up to K = 256, wider beyond)."""
    BK = min(pow2(K), max(64, pow2(triton.cdiv(K, 4))))
    return BK, triton.cdiv(K, BK)


def state_configs(K: int, BK: int, V: int, BH: int) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Candidates and shared-memory fallbacks (BV, num_warps, num_stages) of the sequential passes. First the
    heuristic's choice: BV = 32, or 16 for wide K blocks and when fewer than 256 programs (B·H·V/32) would run; then,
    above NARROW_K, BV 16 and 64 and 8 warps for 64 (launch times them on a GPU). Fallbacks: one stage."""
    BV = min(32 if BK <= 64 else 16, pow2(V))
    if BH * triton.cdiv(V, BV) < 256:
        BV = min(16, BV)
    widths = [BV] + [b for b in (16, 64) if K > NARROW_K and b != BV and b <= pow2(V) and BK * b <= 64 * 64]
    configs = [dict(BV=b, num_warps=4, num_stages=2) for b in widths]
    if 64 in widths:
        configs.append(dict(BV=64, num_warps=8, num_stages=2))
    return configs, [dict(BV=BV, num_warps=w, num_stages=1) for w in (4, 8)]


# num_warps/num_stages of the parallel passes (per chunk) and of the output-like passes (per chunk and V block): the
# earlier fixed choice first (what the interpreter, fp32 inputs and K ≤ NARROW_K run), then the candidates launch
# times on a GPU. Each one is a compilation per shape: keep these short. On the H200 (Triton 3.6) 4 warps instead of
# 8 made the parallel passes 1.3–1.6× faster at K ≥ 64 (benchmarks/kernels-2026-11-29.md, session 4), but at K = 16
# the new candidates ended in an illegal memory access where the first ones ran (fla's kernels crash there too), so
# narrow heads keep the first. (At K = 32 the crash stayed with the first configs: see precision.)
PAR_CONFIGS = tuple(dict(num_warps=w, num_stages=s) for w, s in ((8, 2), (4, 2), (8, 1)))
OUT_CONFIGS = tuple(dict(num_warps=w, num_stages=s) for w, s in ((4, 2), (8, 2)))
SMEM_FALLBACKS = (dict(num_warps=4, num_stages=1),)  # tried only where no candidate fits the shared memory
NARROW_K = 32


def candidates(configs: Sequence[dict[str, int]], K: int) -> Sequence[dict[str, int]]:
    """`configs`, or only its first (validated) one for head dims K ≤ NARROW_K."""
    return configs if K > NARROW_K else configs[:1]


# The narrowest K/V tile of the parallel passes. With 16-wide tiles (K = 16) an H200 (Triton 3.6) computed dk wrong
# (rel. error 0.24; the CPU interpreter is right): most likely the Hopper miscompile of dots on transposed
# accumulators that fla hit (fla issues 640, 984). With 32-wide tiles (K = 16 masked) tests/test_triton_kernels.py
# passes in full on the H200 (results/gpu-tests-h200-2026-11-29/pytest.log).
MIN_PARALLEL_TILE = 32


def parallel_tiles(K: int, V: int) -> tuple[int, int]:
    """(BK, BV) of the parallel passes: the next power of two, at least MIN_PARALLEL_TILE, at most 64."""
    return min(64, pow2(K, MIN_PARALLEL_TILE)), min(64, pow2(V, MIN_PARALLEL_TILE))


def pow2(n: int, lo: int = 16) -> int:
    """The next power of two ≥ max(n, lo)."""
    return max(lo, triton.next_power_of_2(n))


def precision(dtype: torch.dtype, K: int) -> str:
    """How the parallel passes multiply (mm's PREC): "ieee" (exact fp32 operands) for fp32 inputs; for half-precision
    inputs "half" (operands in the inputs' dtype, as fla), or "tf32" (fp32 operands) for K ≤ NARROW_K, where the H200
    (Triton 3.6) hit an illegal memory access at K = 32 with half operands (session 4) but ran fp32 operands
    correctly in sessions 2 and 3. The state passes multiply in the inputs' dtype either way."""
    if dtype == torch.float32:
        return "ieee"
    return "tf32" if K <= NARROW_K else "half"


Grid = tuple[int, ...] | Callable[[dict[str, Any]], tuple[int, ...]]
_chosen: dict[tuple, dict[str, int]] = {}


def launch(kernel: Any, grid: Grid, args: Sequence[Any], kwargs: dict[str, Any], configs: Sequence[dict[str, int]],
           fallbacks: Sequence[dict[str, int]] = SMEM_FALLBACKS, restore: Sequence[torch.Tensor] = ()) -> None:
    """Launch `kernel` with the fastest of `configs` (num_warps, num_stages and any constexpr tile sizes; `grid` is a
    function of the merged keyword arguments where a config sets one), or with the first of `fallbacks` that fits
    where none of them fits the shared memory. On a GPU with half-precision inputs every config that fits is timed
    once per kernel, constexprs, dtypes and grid size (rounded to powers of two), restoring the tensors in `restore`
    (those the kernel updates in place) afterwards; on a CPU (the interpreter), for fp32 inputs, under CUDA-graph
    capture, or with DELTAMUP_AUTOTUNE=0, the first config that fits is taken. DELTAMUP_AUTOTUNE_LOG=1 prints the
    times."""
    grid_of = grid if callable(grid) else (lambda meta: grid)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    key = (kernel.fn.__name__ if hasattr(kernel, "fn") else id(kernel),
           tuple(sorted((k, v) for k, v in kwargs.items() if isinstance(v, (int, bool, str)))),
           tuple(t.dtype for t in tensors), tuple(triton.next_power_of_2(n) for n in grid_of({**kwargs, **configs[0]})))
    run = lambda cfg: kernel[grid_of({**kwargs, **cfg})](*args, **kwargs, **cfg)  # noqa: E731
    if key in _chosen:
        run(_chosen[key])
        return
    tune = (tensors[0].is_cuda and any(t.dtype in (torch.bfloat16, torch.float16) for t in tensors)
            and len(configs) > 1 and os.environ.get("DELTAMUP_AUTOTUNE", "1") != "0"
            and not torch.cuda.is_current_stream_capturing())
    errors: list[OutOfResources] = []

    def fits(cfg: dict[str, int]) -> bool:
        try:
            run(cfg)
        except OutOfResources as e:
            errors.append(e)
            return False
        return True

    saved = [t.clone() for t in restore] if tune else []
    times: list[tuple[float, dict[str, int]]] = []
    for cfg in configs:
        if fits(cfg):
            if not tune:
                _chosen[key] = cfg
                return
            times.append((_cuda_ms(lambda: run(cfg)), cfg))
    if not times:
        for cfg in fallbacks:
            if fits(cfg):
                _chosen[key] = cfg
                return
        raise errors[-1]
    best = min(times, key=lambda tc: tc[0])[1]
    if os.environ.get("DELTAMUP_AUTOTUNE_LOG") == "1":
        print(f"autotune {key[0]} {dict(key[1])} grid {key[3]}: "
              + "; ".join(f"{_fmt(c)} {t:.3f} ms" for t, c in times) + f" -> {_fmt(best)}", flush=True)
    for t, s in zip(restore, saved):
        t.copy_(s)
    _chosen[key] = best
    run(best)


def _cuda_ms(fn: Callable[[], None], reps: int = 5, rounds: int = 3) -> float:
    """The fastest of `rounds` averages of `reps` back-to-back calls, in CUDA ms (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    return best


def _fmt(cfg: dict[str, int]) -> str:
    return ",".join(f"{k.replace('num_', '')}={v}" for k, v in cfg.items())
