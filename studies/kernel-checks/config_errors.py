"""Which launch config of which pass is wrong (GPU only): every candidate of one pass at a time, the others at their
first, errors of the output, final state and every gradient against the fp64 recurrence.

tests/test_triton_kernels.py::test_every_candidate_config_is_correct runs the i-th candidate of every pass at once;
when it fails, this names the pass and the config.

    python3 studies/kernel-checks/config_errors.py --shapes 2,300,2,128,256 2,300,2,192,384
"""
from __future__ import annotations

import argparse
from typing import Any

import torch
import torch.nn.functional as F

from deltamup.kernels.reference import recurrent_gated_delta_rule
from deltamup.kernels.triton import chunk_bwd, chunk_fwd, chunk_gated_delta_rule_triton, tuning

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU (interpreter, fp32) only checks the script
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


def inputs(B: int, T: int, H: int, K: int, V: int, seed: int = 6) -> dict[str, torch.Tensor]:
    """fp64 inputs on DEVICE: random log-sigmoid gates, unit keys, β ∈ [0, 2], a random initial state."""
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    x = dict(q=r(B, T, H, K), k=F.normalize(r(B, T, H, K), dim=-1), v=r(B, T, H, V), g=F.logsigmoid(r(B, T, H) + 2),
             beta=2 * torch.rand(B, T, H, generator=gen, dtype=torch.float64), h0=r(B, H, K, V))
    return {n: t.to(DEVICE) for n, t in x.items()}


def outputs(rule, x: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """o, the final state and the gradients of a fixed random loss of both."""
    leaves = {n: t.detach().to(dtype).clone().requires_grad_() for n, t in x.items()}
    o, ht = rule(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"], initial_state=leaves["h0"],
                 output_final_state=True)
    gen = torch.Generator().manual_seed(1)
    loss = sum((t * torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t)).sum() for t in (o, ht))
    loss.backward()
    return {"o": o, "ht": ht, **{f"d{n}": t.grad for n, t in leaves.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["2,300,2,128,256", "2,300,2,192,384", "8,2048,6,128,256"],
                   help="B,T,H,K,V")
    shapes = [tuple(int(v) for v in s.split(",")) for s in p.parse_args().shapes]
    print("| shape | kernel | candidate | config | max error | worst |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shape in shapes:
        x = inputs(*shape)
        want = outputs(recurrent_gated_delta_rule, x, torch.float64)
        seen: dict[str, list[dict[str, Any]]] = {}

        def record(kernel, grid, args, kwargs, configs, fallbacks=tuning.SMEM_FALLBACKS, restore=()):
            seen.setdefault(kernel.fn.__name__, list(configs))
            tuning.launch(kernel, grid, args, kwargs, configs[:1], fallbacks, restore)

        for module in (chunk_fwd, chunk_bwd):
            module.launch = record
        outputs(chunk_gated_delta_rule_triton, x, DTYPE)
        for name, configs in seen.items():
            for i, cfg in enumerate(configs):
                def pick(kernel, grid, args, kwargs, cands, fallbacks=tuning.SMEM_FALLBACKS, restore=(), name=name, i=i):
                    chosen = cands[i:i + 1] if kernel.fn.__name__ == name else cands[:1]
                    tuning.launch(kernel, grid, args, kwargs, chosen, fallbacks, restore)

                for module in (chunk_fwd, chunk_bwd):
                    module.launch = pick
                tuning._chosen.clear()
                got = outputs(chunk_gated_delta_rule_triton, x, DTYPE)
                errs = {n: ((got[n].double() - want[n]).norm() / want[n].norm()).item() for n in want}
                worst = max(errs, key=errs.get)
                print(f"| {','.join(map(str, shape))} | `{name}` | {i} | {tuning._fmt(cfg)} | {errs[worst]:.2e} | "
                      f"{worst} |", flush=True)


if __name__ == "__main__":
    main()
