"""Which launch configs the forward kernels would pick from a wider space than tuning.py offers (GPU only).

For every launch of one forward call (bf16, the model's head shape at a width), each config of the pass's candidate
list and of a wider space (num_warps 2 and 4 × num_stages 2–4 around each candidate, with its own tile sizes) is timed
with the launcher's own timer, then the call goes on with the product's choice. Printed per kernel: the product's
best candidate and the space's best, in ms, with each one's registers and spilled registers per thread (spills at
large K would say the state blocks do not fit the register file), and the configs that beat the product's by ≥ 5%.
A change to tuning.py that this motivates is then measured with benchmarks/kernels.py against fla in one run.

    python3 studies/kernel-checks/config_space.py --widths 512 1024
"""
from __future__ import annotations

import argparse
import itertools
from typing import Any

import torch
import torch.nn.functional as F
from triton.runtime.errors import OutOfResources

from deltamup.kernels.triton import chunk_fwd, tuning

WARPS = (2, 4)
STAGES = (2, 3, 4)
HEADS = 6


def wider(configs: list[dict[str, int]]) -> list[dict[str, int]]:
    """Every candidate with each num_warps and num_stages of the space, without repeats, candidates first."""
    out: list[dict[str, int]] = []
    for c, w, s in itertools.chain(((c, c["num_warps"], c["num_stages"]) for c in configs),
                                   ((c, w, s) for c in configs for w in WARPS for s in STAGES)):
        cfg = {**c, "num_warps": w, "num_stages": s}
        if cfg not in out:
            out.append(cfg)
    return out


def timed_launch(rows: list[dict[str, Any]]):
    """A replacement for tuning.launch that times the wider space first (recording rows), then launches as usual."""
    def launch(kernel, grid, args, kwargs, configs, fallbacks=tuning.SMEM_FALLBACKS, then=None):
        grid_of = grid if callable(grid) else (lambda meta: grid)
        for i, cfg in enumerate(wider(list(configs))):
            run = lambda cfg=cfg: kernel[grid_of({**kwargs, **cfg})](*args, **kwargs, **cfg)  # noqa: E731
            try:
                compiled = run()  # the compiled kernel: its registers and spills per thread
                ms = tuning._cuda_ms(run)
            except OutOfResources:
                compiled, ms = None, float("nan")
            rows.append(dict(kernel=kernel.fn.__name__, config=tuning.config_text(cfg), candidate=i < len(configs),
                             ms=ms, regs=getattr(compiled, "n_regs", None), spills=getattr(compiled, "n_spills", None)))
        tuning.launch(kernel, grid, args, kwargs, configs, fallbacks, then=then)
    return launch


def print_table(rows: list[dict[str, Any]]) -> None:
    """Per kernel: the product's best candidate, the space's best and the configs ≥ 5% faster than the former."""
    print("| kernel | product's best (ms) | space's best (ms) | configs ≥ 5% faster than the product's best |")
    print("| --- | --- | --- | --- |")
    for name in dict.fromkeys(r["kernel"] for r in rows):
        mine = [r for r in rows if r["kernel"] == name and r["ms"] == r["ms"]]
        best_c = min((r for r in mine if r["candidate"]), key=lambda r: r["ms"])
        best = min(mine, key=lambda r: r["ms"])
        faster = sorted((r for r in mine if r["ms"] < 0.95 * best_c["ms"]), key=lambda r: r["ms"])
        print(f"| `{name}` | {best_c['ms']:.4f} ({best_c['config']}{resources(best_c)}) | {best['ms']:.4f} "
              f"({best['config']}{resources(best)}) | "
              + ("; ".join(f"{r['config']} {r['ms']:.4f}" for r in faster[:6]) or "none") + " |", flush=True)


def resources(row: dict[str, Any]) -> str:
    """', 168 regs, 0 spills' for a compiled config (registers and spilled registers per thread), '' without."""
    return f", {row['regs']} regs, {row['spills']} spills" if row["regs"] is not None else ""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[512, 1024])
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("config_space.py: needs a GPU (the interpreter has no configs to time)")
    for width in args.widths:
        K = 3 * width // (4 * HEADS)
        V = 2 * K
        B, T = 8, 2048
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k = (F.normalize(torch.randn(B, T, HEADS, K, device="cuda", generator=gen), dim=-1).bfloat16()
                for _ in range(2))
        v = torch.randn(B, T, HEADS, V, device="cuda", generator=gen).bfloat16()
        g = F.logsigmoid(torch.randn(B, T, HEADS, device="cuda", generator=gen) + 3)
        beta = torch.rand(B, T, HEADS, device="cuda", generator=gen).bfloat16()
        rows: list[dict[str, Any]] = []
        chunk_fwd.launch = timed_launch(rows)
        chunk_fwd.chunk_fwd(q, k, v, g, beta, K ** -0.5, None, False)
        torch.cuda.synchronize()
        print(f"\nwidth {width}: B, T, H, K, V = {B}, {T}, {HEADS}, {K}, {V}; {torch.cuda.get_device_name()}")
        print_table(rows)


if __name__ == "__main__":
    main()
