"""The readout and its cross-entropy on a GPU: the models' form (the logits GEMM, the multiplier and F.cross_entropy,
compiled by torch.compile) against the fused op (deltamup/kernels/triton/cross_entropy.py: the GEMM, then one
kernel that writes the loss and the logits' gradient), in one run.

    python3 benchmarks/linear_cross_entropy.py            # on a GPU, from the repository root

At a batch of 16 × 1024 tokens, widths 256, 1024 and 2048, a 50,304-token vocabulary, x and W in bf16 (as under
autocast), a logits multiplier, some rows without a target:
- GPU time, the headline: the CUDA kernels of one call summed (torch.profiler); forward + backward is the figure
  that compares (the fused op does the gradient's work in its forward);
- wall time beside it (triton.testing.do_bench median), which includes host time;
- each form's error against the fp64 reference on the same inputs (‖x − ref‖/‖ref‖ of the loss, dx, dW).
Prints a Markdown table; --out also writes the rows as JSON. The whole model with each form:
benchmarks/model_throughput.py --variants ours-compile ours-compile+triton-loss.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

if not __package__:  # run as a file: the repository root that holds benchmarks/ goes on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.kernels import ab_table, keep_row, timings  # noqa: E402
from deltamup.kernels import linear_cross_entropy  # noqa: E402
from deltamup.kernels.check import rel_errors  # noqa: E402


def measure(N: int, D: int, V: int) -> dict[str, object]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, D, device="cuda", generator=gen).to(torch.bfloat16)
    w = (torch.randn(V, D, device="cuda", generator=gen) * D ** -0.5).to(torch.bfloat16)
    targets = torch.randint(0, V, (N,), device="cuda", generator=gen)
    targets[::97] = -100
    mult = torch.tensor(0.5, device="cuda")
    forms = {"compiled": torch.compile(lambda x, w: linear_cross_entropy(x, w, targets, mult, "torch"), dynamic=False),
             "triton": lambda x, w: linear_cross_entropy(x, w, targets, mult, "triton")}
    want = outputs(lambda x, w: linear_cross_entropy(x, w, targets, mult.double(), "torch"), x, w, torch.float64)
    row: dict[str, object] = {"N": N, "D": D, "V": V}
    for name, fn in forms.items():
        row[name] = {**timings(fn, [x, w]), "errors": rel_errors(outputs(fn, x, w, x.dtype), want)}
    return row


def outputs(fn, x: torch.Tensor, w: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The loss and its gradients at x and W, the inputs in `dtype`."""
    xi, wi = (t.detach().to(dtype).requires_grad_() for t in (x, w))
    loss = fn(xi, wi)
    loss.backward()
    return {"loss": loss.detach().reshape(1), "dx": xi.grad, "dw": wi.grad}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=16 * 1024)
    p.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 2048])
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("linear_cross_entropy: needs a CUDA GPU")
    rows = []
    for D in args.widths:
        keep_row(rows, measure(args.tokens, D, args.vocab), args.out)
    print(ab_table(rows, "N, D, V", lambda r: f"{r['N']}, {r['D']}, {r['V']}", "loss, dx, dW"))


if __name__ == "__main__":
    main()
