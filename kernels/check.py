"""Any form of the gated delta rule against the recurrence in fp64: random inputs, the outputs and gradients of a
fixed random loss, and their relative errors. Used by the tests and by `deltamup kernels check`."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

Rule = Callable[..., tuple[Tensor, Tensor | None]]


def random_inputs(B: int, T: int, H: int, K: int, V: int, gate: str = "random", seed: int = 0,
                  device: str | torch.device = "cpu") -> dict[str, Tensor | None]:
    """fp64 q, k (unit rows) [B, T, H, K], v [B, T, H, V], g [B, T, H] (gate 'random': log-sigmoid around −0.13,
    'zero': exactly 0, 'none': absent), β ∈ [0, 2] [B, T, H] and an initial state h0 [B, H, K, V], on `device`."""
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    g = {"random": F.logsigmoid(r(B, T, H) + 2), "zero": torch.zeros(B, T, H), "none": None}[gate]
    x = dict(q=r(B, T, H, K), k=F.normalize(r(B, T, H, K), dim=-1), v=r(B, T, H, V), g=g,
             beta=2 * torch.rand(B, T, H, generator=gen, dtype=torch.float64), h0=r(B, H, K, V))
    return {n: (t.to(device, torch.float64) if t is not None else None) for n, t in x.items()}


def outputs(rule: Rule, x: dict[str, Tensor | None], dtype: torch.dtype, use_h0: bool = True, final: bool = True,
            l2: bool = False, grads: bool = True) -> dict[str, Tensor]:
    """o, the final state (when `final`) and, with `grads`, the gradients of every input of a fixed random loss of
    them, with the inputs cast to `dtype` (without `grads`: a forward under no_grad)."""
    leaves = {n: (t.detach().to(dtype).clone().requires_grad_(grads) if t is not None else None)
              for n, t in x.items()}
    with torch.set_grad_enabled(grads):
        o, ht = rule(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"],
                     initial_state=leaves["h0"] if use_h0 else None, output_final_state=final,
                     use_qk_l2norm_in_kernel=l2)
    if not grads:
        return {n: t for n, t in {"o": o, "ht": ht}.items() if t is not None}
    gen = torch.Generator().manual_seed(1)
    loss = (o * torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o)).sum()
    if final:
        loss = loss + (ht * torch.randn(ht.shape, generator=gen, dtype=torch.float64).to(ht)).sum()
    loss.backward()
    out = {"o": o, "ht": ht}
    out.update({f"d{n}": t.grad for n, t in leaves.items() if t is not None and t.grad is not None})
    return {n: t for n, t in out.items() if t is not None}


def rel_errors(got: dict[str, Tensor], want: dict[str, Tensor]) -> dict[str, float]:
    """‖got − want‖ / ‖want‖ of each output (the same names in both)."""
    if got.keys() != want.keys():
        raise ValueError(f"outputs differ: {sorted(got)} against {sorted(want)}")
    return {n: ((got[n].double() - want[n]).norm() / want[n].norm()).item() for n in want}
