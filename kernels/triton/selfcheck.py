"""Every candidate launch config of every pass against the recurrence in fp64, on this machine
(`deltamup kernels check`); the short convolution's kernels against their PyTorch form in fp64 likewise.

The launcher (tuning.launch) times each pass's candidates on a GPU and keeps the fastest. On Hopper with Triton 3.6 a
config can compile to wrong results where another is right (docs/kernels.md), and which one depends on the GPU and
the Triton version: this runs each pass with each of its candidates in turn, every other pass at its first, and
compares the output, the final state and every gradient with the token-by-token recurrence in fp64. On a CPU the
interpreter ignores warps and stages, so there it checks the kernels, not the configs: candidates that differ only
in those are one computation, run once and reported for each.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from triton.runtime.errors import OutOfResources

from .. import short_conv_silu
from ..check import outputs, random_inputs, rel_errors
from ..delta_product import gated_delta_product
from ..reference import recurrent_gated_delta_rule
from . import chunk_bwd, chunk_fwd, short_conv, tuning
from .function import chunk_gated_delta_product_triton, chunk_gated_delta_rule_triton

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1e-2, torch.float16: 1e-2}  # the kernel tests' bars
PASSES = tuple(name for module in (chunk_fwd, chunk_bwd) for name, f in vars(module).items()
               if name.endswith("_kernel") and hasattr(f, "fn"))  # @triton.jit, compiled or interpreted
CONV_PASSES = tuple(name for name, f in vars(short_conv).items() if name.endswith("_kernel") and hasattr(f, "fn"))
GPU_ONLY = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})  # launch options the interpreter ignores


@dataclass(frozen=True)
class Result:
    """One pass run with one of its candidates: the largest relative error over the outputs and which output it is.
    A config that does not fit this GPU's shared memory has no error (nan): the launcher never runs it. In the
    interpreter, `run_as` is the earlier candidate whose run this one shares (the two differ only in GPU_ONLY)."""
    kernel: str
    candidate: int
    config: str
    error: float
    worst: str
    run_as: int | None = None

    @property
    def fits(self) -> bool:
        return not math.isnan(self.error)

    def off(self, tolerance: float) -> bool:
        """Runs and is at or above `tolerance` of fp64 (a config that does not fit is never launched: not off)."""
        return self.fits and not self.error < tolerance


def check(K: int, V: int, dtype: torch.dtype = torch.bfloat16, shape: tuple[int, int, int] = (2, 300, 2),
          kernel: str | None = None, device: str | None = None, seed: int = 6, states: bool = True,
          householder: int = 1, gated: bool = True, norm: bool = False, forward_only: bool = False) -> list[Result]:
    """Each candidate of each pass (or only of `kernel`) at head dims K, V, inputs of `dtype`, (B, T, H) = shape
    (T = 300: several chunks and a ragged last one), random gates, β ∈ [0, 2]; with `states`, an initial state and
    the final one too (the model trains without either: states False checks the kernels it compiles). With
    `householder` n > 1, DeltaProduct_n (T tokens of n micro-rows: its passes compile apart from n = 1) against the
    same recurrence over the interleaved micro-rows. `gated` False: no decay gate (plain DeltaNet's passes, compiled
    apart from the gated ones). `norm`: q and k normalised inside the passes (use_qk_l2norm_in_kernel without a
    gradient, also compiled apart): the forward's outputs against the recurrence on normalised q, k (with a gradient
    the norm runs before the passes, whose candidates the check without `norm` covers). `forward_only` (implied by
    `norm`): no input needs a gradient, so the forward stores nothing for a backward (chunk_fwd's save; its passes
    compile apart) and only its outputs are checked."""
    if kernel is not None and kernel not in PASSES:
        raise ValueError(f"no pass named {kernel!r}; the passes: {', '.join(PASSES)}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, T, H = shape
    x = random_inputs(B, T * householder, H, K, V, "random" if gated else "none", seed, device)
    x["q"] = x["q"][:, :T].contiguous()  # q and g per token
    x["g"] = x["g"][:, :T].contiguous() if gated else None
    if householder == 1:
        rule, reference = chunk_gated_delta_rule_triton, recurrent_gated_delta_rule
    else:
        rule = functools.partial(chunk_gated_delta_product_triton, num_householder=householder)
        reference = functools.partial(gated_delta_product, recurrent_gated_delta_rule, num_householder=householder)
    grads = not (norm or forward_only)
    want = outputs(reference, x, torch.float64, states, states, norm, grads=grads)
    with tuning.pinned() as pin:  # which passes launch, and their candidates
        outputs(rule, x, dtype, states, states, norm, grads=grads)
    names = [kernel] if kernel is not None else list(pin.seen)
    if kernel is not None and kernel not in pin.seen:
        raise ValueError(f"{kernel} does not run at K {K}, V {V}; the passes that do: {', '.join(pin.seen)}")

    def errors(name: str, i: int) -> dict[str, float]:
        with tuning.pinned(name, i):
            return rel_errors(outputs(rule, x, dtype, states, states, norm, grads=grads), want)
    return [result for name in names for result in _each_candidate(name, pin.seen[name], errors)]


def check_short_conv(channels: int, group: int, dtype: torch.dtype = torch.bfloat16, shape: tuple[int, int] = (2, 300),
                     kernel: str | None = None, device: str | None = None, seed: int = 6,
                     taps: int = 4) -> list[Result]:
    """Each candidate of each short-convolution kernel (or only of `kernel`) on x [B, T, channels] of `dtype`
    ((B, T) = shape), `taps` wide (the kernel size), the weight fp32, each group of `group` channels L2-normalized
    (0: none), against the PyTorch form in fp64: out, dx and dw."""
    if kernel is not None and kernel not in CONV_PASSES:
        raise ValueError(f"no short-convolution kernel named {kernel!r}; the kernels: {', '.join(CONV_PASSES)}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, channels, generator=gen, dtype=torch.float64)
    w = torch.randn(channels, taps, generator=gen, dtype=torch.float64) / 2
    dout = torch.randn(*shape, channels, generator=gen, dtype=torch.float64)

    def run(form, x_dtype: torch.dtype, w_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        xi = x.to(device, x_dtype, copy=True).requires_grad_()
        wi = w.to(device, w_dtype, copy=True).requires_grad_()
        y = form(xi, wi)
        y.backward(dout.to(device, x_dtype))
        return {"out": y.detach(), "dx": xi.grad, "dw": wi.grad}

    want = run(lambda x, w: short_conv_silu(x, w, "torch", group), torch.float64, torch.float64)

    def errors(name: str, i: int) -> dict[str, float]:
        with tuning.pinned(name, i):
            return rel_errors(run(lambda x, w: short_conv_silu(x, w, "triton", group), dtype, torch.float32), want)
    return [result for name in ([kernel] if kernel is not None else CONV_PASSES)
            for result in _each_candidate(name, short_conv.CONFIGS[name], errors)]


def run_as(configs: Sequence[dict[str, int]]) -> list[int]:
    """For each candidate, the first candidate that computes what it computes on this machine: itself on a GPU; in
    Triton's interpreter, the first that differs from it at most in GPU_ONLY."""
    if not tuning.INTERPRETED:
        return list(range(len(configs)))
    keys = [tuple(sorted((k, v) for k, v in c.items() if k not in GPU_ONLY)) for c in configs]
    return [keys.index(key) for key in keys]


def _each_candidate(name: str, configs: Sequence[dict[str, int]],
                    errors: Callable[[str, int], dict[str, float]]) -> list[Result]:
    """A Result per candidate of pass `name` from `errors(name, i)` (each output's error with candidate i pinned);
    a candidate that computes what an earlier one did (run_as) shares its run where that one ran."""
    results: list[Result] = []
    for i, (config, j) in enumerate(zip(configs, run_as(configs))):
        text = tuning.config_text(config)
        if j < i and results[j].fits:
            results.append(Result(name, i, text, results[j].error, results[j].worst, run_as=j))
            continue
        try:
            errs = errors(name, i)
        except OutOfResources:
            results.append(Result(name, i, text, math.nan, "–"))
            continue
        worst = max(errs, key=errs.get)
        results.append(Result(name, i, text, errs[worst], worst))
    return results
