"""The short convolution (causal depthwise, K = 4, then SiLU, for q and k then the L2 norm per head) on a GPU: the
models' form (K shifted products and the norm, compiled by torch.compile) against the Triton kernels
(deltamup/kernels/triton/short_conv.py), in one run.

    python3 benchmarks/short_conv.py                      # on a GPU, from the repository root

At the models' q/k and v convolutions at widths 256, 1024 and 2048 (0.75·d channels normalized per head of
0.125·d for q and k, 1.5·d for v), batch 16 × 1024 tokens, x bf16 and the weight fp32 as under autocast:
- GPU time, the headline: the CUDA kernels of one call summed (torch.profiler), forward and forward + backward;
- wall time beside it (triton.testing.do_bench median), which includes host time;
- each form's error against the fp64 reference (‖x − ref‖/‖ref‖ of y, dx, dw);
- the config each Triton pass took at the shape (the rows' "triton configs": which backward form won).
Prints a Markdown table; --out also writes the rows as JSON. The whole model with each form:
benchmarks/model_throughput.py --variants ours-compile ours-compile+triton-conv.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

if not __package__:  # run as a file: the repository root that holds benchmarks/ goes on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.kernels import ab_table, keep_row, timings  # noqa: E402
from deltamup.kernels import short_conv_silu  # noqa: E402
from deltamup.kernels.check import rel_errors  # noqa: E402
from deltamup.kernels.triton import tuning  # noqa: E402

SHAPES = ((192, 32), (384, 0), (768, 128), (1536, 0), (1536, 256), (3072, 0))  # (channels, norm group): q/k, v


def errors(fn, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, group: int) -> dict[str, float]:
    """‖· − ref‖/‖ref‖ of y, dx, dw against the fp64 reference on the same (bf16-rounded) inputs."""
    out = {}
    reference = (lambda x, w: short_conv_silu(x, w, "torch", group))
    for key, f, dtype in (("got", fn, x.dtype), ("want", reference, torch.float64)):
        xi = x.detach().to(dtype).requires_grad_()
        wi = w.detach().to(torch.float64 if key == "want" else w.dtype).requires_grad_()
        y = f(xi, wi)
        y.backward(dy.to(y.dtype))
        out[key] = {"y": y.detach(), "dx": xi.grad, "dw": wi.grad}
    return rel_errors(out["got"], out["want"])


def measure(C: int, group: int, B: int, T: int, K: int) -> dict[str, object]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(B, T, C, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(C, K, device="cuda", generator=gen) * K ** -0.5
    dy = torch.randn(B, T, C, device="cuda", generator=gen).to(torch.bfloat16)
    forms = {"compiled": torch.compile(lambda x, w: short_conv_silu(x, w, "torch", group), dynamic=False),
             "triton": lambda x, w: short_conv_silu(x, w, "triton", group)}
    row: dict[str, object] = {"B": B, "T": T, "C": C, "group": group, "K": K}
    tuning.forget()  # the configs this shape's launches take, and no other's
    for name, fn in forms.items():
        row[name] = {**timings(fn, [x, w]), "errors": errors(fn, x, w, dy, group)}
    row["triton configs"] = tuning.chosen()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--kernel-size", type=int, default=4)
    p.add_argument("--shapes", nargs="+", default=[f"{c}:{g}" for c, g in SHAPES],
                   help="CHANNELS:NORM_GROUP each (0: no norm)")
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("short_conv: needs a CUDA GPU")
    rows = []
    for shape in args.shapes:
        C, group = (int(n) for n in shape.split(":"))
        keep_row(rows, measure(C, group, args.batch, args.seq_len, args.kernel_size), args.out)
    print(ab_table(rows, "B, T, C (K; norm group)", lambda r: f"{r['B']}, {r['T']}, {r['C']} ({r['K']}; "
                                                              f"{r['group'] or '–'})", "y, dx, dw"))


if __name__ == "__main__":
    main()
