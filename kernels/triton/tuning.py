"""Host side of the Triton chunk kernels: tile sizes, the operand precision, the candidate configs of each pass and
the launcher that times them once per kernel and shape on a GPU and keeps the fastest (the first that fits on a CPU,
where the interpreter runs them)."""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import triton
from torch._subclasses.fake_tensor import is_fake
from torch.library import wrap_triton
from torch.utils._python_dispatch import _disable_current_modes
from triton.runtime.errors import OutOfResources

# num_warps/num_stages of the parallel passes (per chunk) and of the output-like passes (per chunk and V block): the
# validated default first (what the interpreter, fp32 inputs and narrow heads run), then the candidates launch times
# on a GPU. Each one is a compilation per shape. Every candidate is checked against fp64 on the GPU by
# tests/test_triton_kernels.py::test_every_candidate_config_is_correct (GPU only): 4 warps instead of 8 make the
# parallel passes 1.3–1.6× faster at K ≥ 64 (benchmarks/kernels.md).
# Rule: narrow heads (is_narrow, a tile under 64 wide) run only the first. Why: on Hopper with Triton 3.6, 4 warps
# end in an illegal memory access at K = 16, and half-precision operands give wrong outputs and gradients at V = 32
# (studies/kernel-checks/diag_half.py); the closest upstream report is triton-lang/triton issue 11366 (Hopper wgmma,
# 32-wide dot tiles, 4 warps). Guarded by tests/test_triton_kernels.py::test_narrow_heads_run_the_one_validated_form.
PAR_CONFIGS = (dict(num_warps=8, num_stages=2), dict(num_warps=4, num_stages=2))
# The UT solve's kernel: the register form's first two (8 warps: the validated default; 4) and the solve from A's
# 16×16 blocks (BLOCKWISE: solve.py's solve_tril_blocks, A through a scratch buffer), sixteen 16×16 products where
# the register form spends four 64×64 ones, no [64, 64] tile live after A's store, no spills
# (benchmarks/kernel-resources.md), at 1 and 2 warps (2 and 4 stages). On an H100 at the eight benchmark shapes
# (benchmarks/logs/kernels-h100-blockwise-2026-12-05.log) the launcher kept it in every training forward that is not
# narrow: at K = 64 and 128 its 1-warp candidate took 0.033 and 0.038 ms, the register form's best 0.045 and 0.052.
# With q and k normalised inside (the forward alone) the register form's 4 warps tie with it (0.058 against 0.057
# ms at K = 128). The register form's 2-warp candidates (the H200's fastest before: 0.054 ms against 0.068 with 4
# warps at K = 64) and the blockwise one's 4 warps never came within 5% of the best there and are not offered.
SOLVE_CONFIGS = PAR_CONFIGS + tuple(dict(c, BLOCKWISE=True) for c in (
    dict(num_warps=2, num_stages=2), dict(num_warps=2, num_stages=4), dict(num_warps=1, num_stages=2)))
# The output-like passes also try 2 warps: chunk_o_fwd at K = 128 takes 0.073 ms with 2, 0.080 with 4 (config_space.py).
OUT_CONFIGS = (dict(num_warps=4, num_stages=2), dict(num_warps=2, num_stages=2))
SMEM_FALLBACKS = (dict(num_warps=4, num_stages=1),)  # tried only where no candidate fits the shared memory
NARROW_K = 32


# The narrowest K/V tile of the parallel passes: K = 16 runs in 32-wide tiles, masked. With 16-wide tiles Triton 3.6
# on Hopper computes dk wrong (rel. error 0.24; the CPU interpreter is right), most likely the Hopper miscompile of
# dots fla-org/flash-linear-attention reports in issues 640 (fixed in Triton 3.7.1) and 984. Guarded on a GPU by
# tests/test_triton_kernels.py::test_rule_matches_reference (K = 16 cases; studies/kernel-checks/).
MIN_PARALLEL_TILE = 32


def state_blocks(K: int) -> tuple[int, int]:
    """(BK, NKB) of the sequential passes: the [K, BV] state column block is held as NKB ≤ 4 row blocks of BK rows
    (64 up to K = 256, wider beyond)."""
    BK = min(pow2(K), max(64, pow2(triton.cdiv(K, 4))))
    return BK, triton.cdiv(K, BK)


def state_configs(K: int, BK: int, V: int, BH: int) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Candidates and shared-memory fallbacks (BV, num_warps, num_stages) of the sequential passes. First the
    heuristic's choice: BV = 32, or 16 for wide K blocks and when fewer than 256 programs (B·H·V/32) would run; then,
    for heads that are not narrow, BV 16 and 64 where the first is not already, each also with 3 and 4 stages
    (launch times them on a GPU; on an H200 64 wins at V ≥ 256; at width 512 BV 64 with 4 stages takes 0.043 ms
    against 0.071 for the best 2-stage candidate, at width 1536 BV 64 with 3 stages 0.222 against 0.292 for the best
    2- or 4-stage one: studies/kernel-checks/config_space.py; 8 warps never won and is not tried). Fallbacks: one
    stage."""
    BV = min(32 if BK <= 64 else 16, pow2(V))
    if BH * triton.cdiv(V, BV) < 256:
        BV = min(16, BV)
    widths = [BV] + [b for b in (16, 64) if not is_narrow(K, V) and b != BV and b <= pow2(V) and BK * b <= 64 * 64]
    configs = [dict(BV=b, num_warps=4, num_stages=st) for st in (2, 3, 4) for b in widths]
    configs = configs[:1] if is_narrow(K, V) else configs
    fallbacks = [dict(BV=BV, num_warps=w, num_stages=1) for w in (4, 8)]
    return configs, fallbacks


def fused_output_configs(configs: Sequence[dict[str, int]]) -> list[dict[str, int]]:
    """The forward state pass's candidates that compute the output as well (FUSE_O, chunk_fwd.py): its BV-64
    candidates at 2 and 3 stages, timed by launch against the state pass plus the output pass. On an H200 (bf16) the
    fused walk at BV 64, 4 warps, 3 stages took 0.90–0.95 of the forward at widths 512, 1024 and fla's standard
    shape and 1.04 at 768; at 1536 three stages do not fit and two took 1.11; BV 32 and 8 warps never won
    (studies/kernel-checks/README.md). Empty where `configs` has no BV 64 (narrow heads among them)."""
    return [dict(c, FUSE_O=True) for c in configs if c["BV"] == 64 and c["num_stages"] in (2, 3)]


def one_stage_output_configs(configs: Sequence[dict[str, int]]) -> list[dict[str, int]]:
    """The forward state pass's BV-64 candidate with FUSE_O at one stage (no loads in flight across chunks), where 2
    and more stages take enough shared memory that an SM holds one program of the pass: at K ≥ 96 the fused walk
    takes 152–297 KB at 2 and 3 stages, at one stage 24–64 KB, and an SM holds two (registers allow two). At width
    1024 (48 heads, V 256: 192 programs) that is one wave on 132 SMs instead of two (docs/kernels.md); compiled for
    sm_90 no spills at K ≤ 128 (benchmarks/kernel-resources.md). Offered with FUSE_U and FUSE_W (fused_wu_configs),
    which is how it won, for DeltaProduct's forward alone on an H100."""
    return [dict(c, num_stages=1, FUSE_O=True) for c in configs if c["BV"] == 64 and c["num_stages"] == 2]


def fused_wu_configs(configs: Sequence[dict[str, int]]) -> list[dict[str, int]]:
    """The forward state pass's candidates that form the UT transform's products themselves (chunk_fwd.py): FUSE_U,
    u = T (β ⊙ V) in the walk, off the recurrence's critical path, so that the per-chunk pass before it reads and
    writes no V-wide u blocks (two thirds of that pass's bytes at V = 2K), and FUSE_W, v_new = T (β ⊙ (V − e^G ⊙
    K h)), one more product on the critical path and no w read (nor written, in a forward without SAVE). Each of the
    BV-64 candidates at 2 and 3 stages, alone and with FUSE_O, and the one-stage FUSE_O one, with both; launch times
    them with the w/u pass before them. (FUSE_U without FUSE_W never came within 5% of the best on an H100.) Empty
    where `configs` has no BV 64."""
    base = [c for c in [*configs, *fused_output_configs(configs)] if c["BV"] == 64 and c["num_stages"] in (2, 3)]
    return [dict(c, FUSE_U=True, FUSE_W=True) for c in base + one_stage_output_configs(configs)]


def forward_state_candidates(configs: Sequence[dict[str, int]], save: bool = True) -> list[dict[str, int]]:
    """The forward state pass's candidates: the sequential pass's first (`configs`[0], state_configs: the validated
    default), the FUSE_O ones and the FUSE_U + FUSE_W ones; only those with FUSE_O where the forward saves nothing
    for a backward (without h and v_new stored there is no output pass). On an H100 at the eight benchmark shapes,
    training forward and forward alone, the launcher kept FUSE_O (3 stages), FUSE_U + FUSE_W (2, 3) or all three
    (1, 2, 3) every time; the split pass's other candidates, FUSE_U without FUSE_W and the one-stage FUSE_O without
    them never came within 5% of the best (benchmarks/logs/kernels-h100-blockwise-2026-12-05.log) and are not
    offered."""
    every = [configs[0], *fused_output_configs(configs), *fused_wu_configs(configs)]
    return every if save else [c for c in every if c.get("FUSE_O")]


def is_narrow(K: int, V: int) -> bool:
    """Whether a parallel tile is under 64 wide (K or V ≤ NARROW_K): the shapes where Triton 3.6 on Hopper breaks
    half-precision dots and 4-warp configs, which therefore run one validated form (precision, candidates)."""
    return min(K, V) <= NARROW_K


def candidates(configs: Sequence[dict[str, int]], K: int, V: int) -> Sequence[dict[str, int]]:
    """`configs`, or only its first (validated) one for narrow heads."""
    return configs[:1] if is_narrow(K, V) else configs


def parallel_tiles(K: int, V: int) -> tuple[int, int]:
    """(BK, BV) of the parallel passes: the next power of two, at least MIN_PARALLEL_TILE, at most 64."""
    return min(64, pow2(K, MIN_PARALLEL_TILE)), min(64, pow2(V, MIN_PARALLEL_TILE))


def pow2(n: int, lo: int = 16) -> int:
    """The next power of two ≥ max(n, lo)."""
    return max(lo, triton.next_power_of_2(n))


def precision(dtype: torch.dtype, K: int, V: int) -> str:
    """How the per-chunk and output passes multiply (mm's PREC): "ieee" (exact fp32 operands) for fp32 inputs; for
    half-precision inputs "half" (operands in the inputs' dtype, as fla), or "tf32" (fp32 operands) for narrow heads.
    On Hopper with Triton 3.6 half operands on 32-wide tiles crash (illegal memory access at K = 32) or compute wrong
    values (rel. error ≈ 1 in o at K = 64, V = 32, and in dk, dv, dg, dβ at K = 128, V = 32;
    studies/kernel-checks/); fp32 operands are correct there. The state passes multiply in the inputs' dtype either
    way. Guarded by tests/test_triton_kernels.py (test_narrow_heads_run_the_one_validated_form,
    test_half_precision_path)."""
    if dtype == torch.float32:
        return "ieee"
    return "tf32" if is_narrow(K, V) else "half"


def solve_precision(prec: str) -> str:
    """input_precision of the UT solve's [C, C] products (solve.py): exact fp32 for fp32 inputs, tf32 otherwise (as
    fla's solve; T is then multiplied in bf16/fp16 or at tf32 anyway)."""
    return "ieee" if prec == "ieee" else "tf32"


def dot_operand_dtype(dtype: torch.dtype, K: int, V: int) -> torch.dtype:
    """dtype of the tensors that only dots read: the saved per-chunk [C, C] matrices T = (I + A)^{-1} and Aqk, and
    the backward's v_new gradient and dw. The inputs' dtype where the dots take their operands in it (precision
    "half": stored rounded as the dot would round them, nothing is lost, half the bytes moved), fp32 otherwise."""
    return dtype if precision(dtype, K, V) == "half" else torch.float32


Grid = tuple[int, ...] | Callable[[dict[str, Any]], tuple[int, ...]]
_chosen: dict[tuple, dict[str, int]] = {}
# Candidates `deltamup kernels check` found off fp64 on this machine, kept from the launcher: "pass@config" entries
# (config_text) separated by ";" in this variable, which a sweep's --warm-kernels sets for its trials' processes.
EXCLUDE_ENV = "DELTAMUP_EXCLUDE_CONFIGS"
# Or listed one per line in the file this variable names, read when a pass first chooses its config: a sweep names
# the file before Ray starts (its processes inherit the name) and writes it once its kernel check is done, before
# its trials launch, so that the check runs beside Ray's start and the compile warm-up (cli/sweep.py). No file yet:
# nothing excluded by it.
EXCLUDE_FILE_ENV = "DELTAMUP_EXCLUDE_CONFIGS_FILE"


@functools.cache
def _excluded(text: str) -> frozenset[str]:
    return frozenset(e.strip() for e in text.split(";") if e.strip())


def _excluded_in_file(path: str) -> frozenset[str]:
    try:
        return _excluded(Path(path).read_text().replace("\n", ";")) if path else frozenset()
    except FileNotFoundError:
        return frozenset()


def allowed(name: str, configs: Sequence[dict[str, int]]) -> Sequence[dict[str, int]]:
    """`configs` of pass `name` without those EXCLUDE_ENV or the file EXCLUDE_FILE_ENV names; the first alone where
    they name them all (the validated default of every pass: tests/test_triton_kernels.py)."""
    excluded = _excluded(os.environ.get(EXCLUDE_ENV, "")) | _excluded_in_file(os.environ.get(EXCLUDE_FILE_ENV, ""))
    if not excluded:
        return configs
    kept = [c for c in configs if f"{name}@{config_text(c)}" not in excluded]
    return kept or configs[:1]


def exclude(entries: Sequence[str]) -> None:
    """Adds "pass@config" `entries` to EXCLUDE_ENV in this process's environment, which the processes it starts
    (a sweep's local Ray instance) inherit."""
    before = [e for e in os.environ.get(EXCLUDE_ENV, "").split(";") if e]
    os.environ[EXCLUDE_ENV] = ";".join(sorted(set(before) | set(entries)))


@dataclass
class Pin:
    """While active (`pinned`): the pass named `kernel` launches its candidate `index` (its last where it has fewer),
    every other pass its first (or, where that does not fit the shared memory, its fallbacks); nothing is timed or
    remembered. `seen`: each pass launched, with its candidates;
    `launched`: the configs each pass launched with, in order."""
    kernel: str | None
    index: int
    seen: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    launched: dict[str, list[dict[str, int]]] = field(default_factory=dict)


_pin: Pin | None = None


@contextmanager
def pinned(kernel: str | None = None, index: int = 0) -> Iterator[Pin]:
    """Within: `kernel`'s launches take its candidate `index`, the other passes their first (selfcheck.py checks
    each candidate this way); kernel None: every pass its first."""
    global _pin
    outer, _pin = _pin, Pin(kernel, index)
    try:
        yield _pin
    finally:
        _pin = outer


# How an op whose body launches Triton kernels is registered. As a torch.library.triton_op, Inductor launches its
# kernels from the code it generates for a compiled model; as custom_ops (Python bodies the graph calls through the
# dispatcher, about 0.1 ms of host time each) the short convolutions left the GPU idle 22% of a training step
# (benchmarks/short-conv.md). The interpreter cannot run on the fake tensors a triton_op is traced with, so under
# TRITON_INTERPRET=1 the ops are custom_ops.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's CPU interpreter (chosen before triton's import)
register_op = torch.library.custom_op if INTERPRETED else torch.library.triton_op


def launch(kernel: Any, grid: Grid, args: Sequence[Any], kwargs: dict[str, Any], configs: Sequence[dict[str, int]],
           fallbacks: Sequence[dict[str, int]] = SMEM_FALLBACKS,
           then: Callable[[dict[str, int], Sequence[Any]], None] | None = None,
           before: Callable[[dict[str, int], Sequence[Any]], None] | None = None) -> None:
    """Launch `kernel` with the fastest of `configs` (num_warps, num_stages and any constexpr tile sizes; `grid` is a
    function of the merged keyword arguments where a config sets one), or with the first of `fallbacks` that fits
    where none of them fits the shared memory. On a GPU with half-precision inputs every config that fits is timed
    once per kernel, constexprs, dtypes and grid size (rounded to powers of two: a kernel timed so must not update
    its inputs in place); on a CPU (the interpreter), for fp32 inputs, under CUDA-graph capture, or with
    DELTAMUP_AUTOTUNE=0, the first config that fits is taken; inside `pinned`, the pinned one; inside `compiling`,
    every config is compiled and none launched.
    Inside a torch.library.triton_op that torch.compile traces (fake tensors; the launch becomes a node of the
    graph that Inductor's own code launches): the config chosen as above on random tensors of the traced sizes
    (the first where the sizes are symbolic).
    Candidates named in EXCLUDE_ENV or EXCLUDE_FILE_ENV's file are left out. DELTAMUP_AUTOTUNE_LOG=1 prints the
    times. `then(config, args)` runs after each launch with the config it took and the launch's args (random ones
    when timing for a trace): the work that config leaves to another pass, timed with it; `before(config, args)`
    likewise runs before each launch: the work a pass before it does for that config."""
    grid_of = grid if callable(grid) else (lambda meta: grid)
    name = kernel.fn.__name__ if hasattr(kernel, "fn") else id(kernel)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    traced = any(is_fake(t) for t in tensors)  # inside a triton_op that torch.compile traces
    traceable = wrap_triton(kernel) if traced else kernel

    def run(cfg: dict[str, int]) -> None:
        if before is not None:
            before(cfg, args)
        traceable[grid_of({**kwargs, **cfg})](*args, **kwargs, **cfg)
        if then is not None:
            then(cfg, args)
    if _pin is not None:
        _launch_pinned(_pin, name, configs, fallbacks, run)
        return
    if _compiled is not None:
        for cfg in configs:
            merged = {**kwargs, **cfg}
            if before is not None:
                before(cfg, args)
            sizes = grid_of(merged)
            _compiled.append(Compiled(name, cfg, kernel.warmup(*args, grid=sizes, **merged), math.prod(sizes)))
            if then is not None:
                then(cfg, args)
        return
    sizes = grid_of({**kwargs, **configs[0]})
    if traced and not all(isinstance(n, int) for n in sizes):  # symbolic sizes: nothing to time
        run(allowed(name, configs)[0])
        return
    key = (name, tuple(sorted((k, v) for k, v in kwargs.items() if isinstance(v, (int, bool, str)))),
           tuple(t.dtype for t in tensors), tuple(triton.next_power_of_2(n) for n in sizes))
    if traced:  # fake tensors of static sizes: the choice made on random tensors of those sizes
        if key not in _chosen:
            with _disable_current_modes():
                launch(kernel, grid, [_random_like(a) for a in args], kwargs, configs, fallbacks, then, before)
        run(_chosen[key])
        return
    if key in _chosen:
        run(_chosen[key])
        return
    configs = allowed(key[0], configs)
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

    times: list[tuple[float, dict[str, int]]] = []
    for cfg in configs:
        if fits(cfg):
            if not tune:
                _chosen[key] = cfg
                return
            times.append((_cuda_ms(lambda cfg=cfg: run(cfg)), cfg))
    if not times:
        for cfg in fallbacks:
            if fits(cfg):
                _chosen[key] = cfg
                return
        raise errors[-1]
    best = min(times, key=lambda tc: tc[0])[1]
    if os.environ.get("DELTAMUP_AUTOTUNE_LOG") == "1":
        print(f"autotune {key[0]} {dict(key[1])} grid {key[3]}: "
              + "; ".join(f"{config_text(c)} {t:.3f} ms" for t, c in times) + f" -> {config_text(best)}", flush=True)
    _chosen[key] = best
    run(best)


def _random_like(a: Any) -> Any:
    """A real tensor of a fake one's size, dtype and device (random floats, integer zeros); anything else as is."""
    if not isinstance(a, torch.Tensor):
        return a
    if a.dtype.is_floating_point:
        return torch.randn(a.shape, dtype=a.dtype, device=a.device)
    return torch.zeros(a.shape, dtype=a.dtype, device=a.device)


def _launch_pinned(pin: Pin, name: str, configs: Sequence[dict[str, int]], fallbacks: Sequence[dict[str, int]],
                   run: Callable[[dict[str, int]], None]) -> None:
    """A launch inside `pinned`: the pinned pass's chosen candidate alone (one that does not fit the shared memory
    raises, for the caller to report), any other pass's first candidate, then its fallbacks (K ≥ 384), as launch."""
    pin.seen.setdefault(name, list(configs))
    order = [configs[min(pin.index, len(configs) - 1)]] if name == pin.kernel else [configs[0], *fallbacks]
    for i, cfg in enumerate(order):
        try:
            run(cfg)
        except OutOfResources:
            if i == len(order) - 1:
                raise
            continue
        pin.launched.setdefault(name, []).append(cfg)
        return


@dataclass
class Compiled:
    """One candidate compiled inside `compiling`: the pass, its config, Triton's compiled kernel (asm, metadata) and
    the programs its launch would run (the grid's size)."""
    kernel: str
    config: dict[str, int]
    binary: Any
    programs: int


_compiled: list[Compiled] | None = None


@contextmanager
def compiling() -> Iterator[list[Compiled]]:
    """Within: `launch` compiles every candidate of every pass, and of the passes each one leaves to `before` and
    `then`, for the active Triton driver's target, and runs nothing (outputs stay as allocated); yields the list it
    fills, in launch order. benchmarks/kernel_resources.py compiles so for a GPU the machine does not have."""
    global _compiled
    outer, _compiled = _compiled, []
    try:
        yield _compiled
    finally:
        _compiled = outer


# GPU clock cycles (about 2.5 ms on an H200) the GPU spins before each timed round, so that the host has queued
# the round's launches by the time it starts
HOST_AHEAD_CYCLES = 5_000_000


def _cuda_ms(fn: Callable[[], None], reps: int = 5, rounds: int = 3) -> float:
    """The fastest of `rounds` averages of `reps` back-to-back calls, in CUDA ms (after one warm-up call). Each round
    waits behind a GPU spin (HOST_AHEAD_CYCLES) while the host queues it, so the events time the kernels back to back
    and not the host's launch gaps, which would favour a candidate with fewer launches (a FUSE_O state pass against
    the state pass plus the output pass, whose kernels take 0.03–0.1 ms at the model's shapes)."""
    fn()
    best = float("inf")
    spin = getattr(torch.cuda, "_sleep", None)
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if spin is not None:
            spin(HOST_AHEAD_CYCLES)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    return best


def chosen() -> str:
    """Every config this process's launches took, "pass config" per distinct pair, sorted and joined by "; "
    (e.g. "chunk_state_fwd_kernel BV=64,warps=4,stages=3,FUSE_O=True; …"): which kernels a run's numbers came from."""
    return "; ".join(sorted({f"{key[0]} {config_text(cfg)}" for key, cfg in _chosen.items()}))


def forget() -> None:
    """Drop every config chosen so far: the next launches time their candidates again, and `chosen()` then names
    only what they took (a benchmark's variants each reporting their own)."""
    _chosen.clear()


def config_text(cfg: dict[str, int]) -> str:
    """A config as the autotuner's log prints it, e.g. "BV=64,warps=4,stages=2"."""
    return ",".join(f"{k.replace('num_', '')}={v}" for k, v in cfg.items())
