"""The short convolution (causal depthwise, K = 4, then SiLU) on a GPU: the models' form (K shifted products,
compiled by torch.compile) against the Triton kernels (deltamup/kernels/triton/short_conv.py), in one run.

    python3 benchmarks/short_conv.py                      # on a GPU, from the repository root

At the channel counts of the models' q, k and v convolutions at widths 256, 1024 and 2048 (0.75·d for q and k,
1.5·d for v), batch 16 × 1024 tokens, x bf16 and the weight fp32 as under autocast: GPU time (the CUDA kernels of
one call summed, torch.profiler) of the forward and of forward + backward (dx and dw), wall time beside it
(triton.testing.do_bench median: includes host time), and each form's error against the fp64 reference
(‖x − ref‖/‖ref‖ of y, dx, dw). Prints a Markdown table; --out also writes the rows as JSON. The whole model's share
is in benchmarks/model-throughput.md: there the compiled form also fuses the q/k L2 norm after the convolution.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

if not __package__:  # run as a file: the repository root that holds benchmarks/ goes on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.kernels import timings  # noqa: E402
from deltamup.kernels.reference import short_conv_silu  # noqa: E402
from deltamup.kernels.triton.short_conv import short_conv_silu_triton  # noqa: E402

CHANNELS = (192, 384, 768, 1536, 3072)  # q/k and v at widths 256, 1024, 2048


def errors(fn, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> dict[str, float]:
    """‖· − ref‖/‖ref‖ of y, dx, dw against the fp64 reference on the same (bf16-rounded) inputs."""
    out = {}
    for key, f, dtype in (("got", fn, x.dtype), ("want", short_conv_silu, torch.float64)):
        xi = x.detach().to(dtype).requires_grad_()
        wi = w.detach().to(torch.float64 if key == "want" else w.dtype).requires_grad_()
        y = f(xi, wi)
        y.backward(dy.to(y.dtype))
        out[key] = {"y": y.detach().double(), "dx": xi.grad.double(), "dw": wi.grad.double()}
    return {n: ((out["got"][n] - ref).norm() / ref.norm()).item() for n, ref in out["want"].items()}


def measure(C: int, B: int, T: int, K: int) -> dict[str, object]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(B, T, C, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(C, K, device="cuda", generator=gen) * K ** -0.5
    dy = torch.randn(B, T, C, device="cuda", generator=gen).to(torch.bfloat16)
    forms = {"compiled": torch.compile(short_conv_silu, dynamic=False), "triton": short_conv_silu_triton}
    row: dict[str, object] = {"B": B, "T": T, "C": C, "K": K}
    for name, fn in forms.items():
        row[name] = {**timings(fn, [x, w]), "errors": errors(fn, x, w, dy)}
    return row


def table(rows: list[dict]) -> str:
    lines = ["| B, T, C (K) | fwd GPU ms compiled / triton | ratio | fwd+bwd GPU ms compiled / triton | ratio | "
             "fwd+bwd wall ms (incl. host) compiled / triton | max error y, dx, dw (compiled; triton) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        a, b = r["compiled"], r["triton"]
        err = "; ".join(", ".join(f"{e:.1e}" for e in f["errors"].values()) for f in (a, b))
        lines.append(f"| {r['B']}, {r['T']}, {r['C']} ({r['K']}) | {a['gpu fwd']:.3f} / {b['gpu fwd']:.3f} | "
                     f"{b['gpu fwd'] / a['gpu fwd']:.2f} | {a['gpu fwd+bwd']:.3f} / {b['gpu fwd+bwd']:.3f} | "
                     f"{b['gpu fwd+bwd'] / a['gpu fwd+bwd']:.2f} | {a['wall fwd+bwd']:.3f} / "
                     f"{b['wall fwd+bwd']:.3f} | {err} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--kernel-size", type=int, default=4)
    p.add_argument("--channels", type=int, nargs="+", default=list(CHANNELS))
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("short_conv: needs a CUDA GPU")
    rows = []
    for C in args.channels:
        rows.append(measure(C, args.batch, args.seq_len, args.kernel_size))
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("compiled", "triton")}
                         | {f: rows[-1][f]["gpu fwd+bwd"] for f in ("compiled", "triton")}), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                                  "rows": rows}, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
