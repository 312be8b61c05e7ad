"""The Triton chunk kernels on a GPU: GPU time against fla 0.6.0 in the same run, and correctness against fp64.

    python3 benchmarks/kernels.py --out benchmarks/kernels.md          # on a GPU, from the repository root
    python3 benchmarks/kernels.py --only 1 3 --no-fla --profile        # two shapes, ours only, time per kernel

For every shape, in its own process (fla can leave the CUDA context broken, e.g. an illegal memory access at K = 32):
- errors ‖x − ref‖/‖ref‖ of o and of every gradient against the fp64 chunked PyTorch path on the GPU: ours in bf16
  (bar 1e-2) and in fp32 on a short sequence with the same head dims (bar 1e-4), fla in bf16;
- GPU time: the CUDA kernels of one call summed (torch.profiler, mean of REPS calls), forward (inputs requiring
  grad: what a training step runs, storing what the backward reads), forward + backward (every input gradient) and
  forward alone (under torch.no_grad: evaluation, generation) — the headline, since at these shapes fla's wall time
  is mostly host work;
- wall time: the median of triton.testing.do_bench, which includes host time (Python, launches).
bf16 inputs, q/k L2 norm in kernel, β ∈ [0, 2], log-sigmoid gates. fla 0.6.0 refuses its gated backward on Hopper
with Triton < 3.7.1 (fla issue 640); its guard is bypassed here, so fla's fwd+bwd times the work and its gradient
errors say whether that work is right.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from deltamup import kernels
from deltamup.kernels.triton import tuning

NAMES = ("o", "dq", "dk", "dv", "dg", "dbeta")
REPS = 20  # profiled calls per measurement
BARS = {"ours bf16": 1e-2, "ours fp32": 1e-4}


@dataclass(frozen=True)
class Shape:
    B: int
    T: int
    H: int
    K: int
    V: int
    n_h: int = 1  # DeltaProduct Householder steps; 1 is the plain gated delta rule

    def __str__(self) -> str:
        s = f"{self.B}, {self.T}, {self.H}, {self.K}, {self.V}"
        return s + (f", n_h = {self.n_h}" if self.n_h > 1 else "")


# The model's head shapes at widths 256 … 1536 (K = 0.75·d/6, V = 2K, 6 heads, batch 8 × 2048), fla's standard shape
# and DeltaProduct n_h = 2, 3 at width 1024.
SHAPES = (Shape(8, 2048, 6, 32, 64), Shape(8, 2048, 6, 64, 128), Shape(8, 2048, 6, 96, 192),
          Shape(8, 2048, 6, 128, 256), Shape(8, 2048, 6, 192, 384), Shape(4, 4096, 16, 128, 128),
          Shape(8, 2048, 6, 128, 256, 2), Shape(8, 2048, 6, 128, 256, 3))
WIDTH = {32: 256, 64: 512, 96: 768, 128: 1024, 192: 1536}  # model width of the K of a 6-head shape


def label(s: Shape) -> str:
    """The shape with what it stands for, e.g. '8, 2048, 6, 64, 128 (width 512)'."""
    if s.H == 6 and s.n_h == 1 and s.K in WIDTH:
        return f"{s} (width {WIDTH[s.K]})"
    return f"{s} (fla's standard)" if s == Shape(4, 4096, 16, 128, 128) else str(s)


def make_inputs(s: Shape, dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    """q [B,T,H,K], k/v/beta with T·n_h steps, g [B,T,H] (log-sigmoid), β ∈ [0, 2], on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *sh: torch.randn(*sh, device="cuda", generator=gen)  # noqa: E731
    Tn = s.T * s.n_h
    x = [r(s.B, s.T, s.H, s.K), r(s.B, Tn, s.H, s.K), r(s.B, Tn, s.H, s.V),
         torch.nn.functional.logsigmoid(r(s.B, s.T, s.H) + 3),
         2 * torch.rand(s.B, Tn, s.H, device="cuda", generator=gen)]
    return [t.to(dtype) for t in x]


def ours(s: Shape, backend: str = "triton") -> Callable:
    """This project's op for the shape on `backend` ("torch": the chunked PyTorch form, the fp64 reference)."""
    if s.n_h == 1:
        return lambda q, k, v, g, b: kernels.chunk_gated_delta_rule(q, k, v, g, b, use_qk_l2norm_in_kernel=True,
                                                                    backend=backend)[0]
    return lambda q, k, v, g, b: kernels.chunk_gated_delta_product(q, k, v, g, b, s.n_h, use_qk_l2norm_in_kernel=True,
                                                                   backend=backend)[0]


def fla_fn(s: Shape) -> Callable:
    """fla 0.6.0's op for the shape, its Hopper guard on the gated backward bypassed (fla issue 640)."""
    import fla.ops.common.chunk_o

    fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True
    if s.n_h == 1:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule

        return lambda q, k, v, g, b: chunk_gated_delta_rule(q, k, v, g, b, use_qk_l2norm_in_kernel=True)[0]
    from fla.ops.gated_delta_product import chunk_gated_delta_product

    return lambda q, k, v, g, b: chunk_gated_delta_product(q, k, v, g, b, s.n_h, use_qk_l2norm_in_kernel=True)[0]


def outputs_and_grads(fn: Callable, x: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    """o and the gradients of every input for a fixed random output gradient, inputs cast to dtype."""
    leaves = [t.detach().to(dtype).requires_grad_() for t in x]
    o = fn(*leaves)
    gen = torch.Generator(device="cuda").manual_seed(1)
    do = torch.randn(o.shape, device="cuda", generator=gen).to(torch.bfloat16).to(o.dtype)
    return [o.detach(), *torch.autograd.grad(o, leaves, do)]


def rel_errors(got: list[torch.Tensor], want: list[torch.Tensor]) -> dict[str, float]:
    return {n: ((a.double() - b).norm() / b.norm()).item() for n, a, b in zip(NAMES, got, want)}


def cuda_times(run: Callable[[], object], reps: int = REPS) -> list[tuple[str, float]]:
    """CUDA ms per call of `run`, summed by kernel name (first 60 characters), largest first (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            run()
        torch.cuda.synchronize()
    times: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name[:60]] = times.get(e.name[:60], 0.0) + e.time_range.elapsed_us() / 1e3 / reps
    return sorted(times.items(), key=lambda kv: -kv[1])


def timings(fn: Callable, x: list[torch.Tensor]) -> dict[str, object]:
    """GPU ms (kernels summed), wall ms (do_bench median) and the CUDA time per kernel of the forward, of forward +
    backward and of the forward alone (no_grad)."""
    import triton.testing

    leaves = [t.detach().requires_grad_() for t in x]
    do = torch.randn_like(fn(*leaves))

    def alone() -> torch.Tensor:
        with torch.no_grad():
            return fn(*leaves)
    calls = {"fwd": lambda: fn(*leaves), "fwd+bwd": lambda: torch.autograd.grad(fn(*leaves), leaves, do),
             "fwd alone": alone}
    out: dict[str, object] = {}
    for name, call in calls.items():  # wall first: it also warms up (autotuning, first launches)
        out[f"wall {name}"] = triton.testing.do_bench(call, warmup=50, rep=200, return_mode="median")
        per_kernel = cuda_times(call)
        out[f"gpu {name}"] = sum(t for _, t in per_kernel)
        out[f"kernels {name}"] = per_kernel[:14]
    return out


def keep_row(rows: list[dict], row: dict, out: str | None, forms: tuple[str, str] = ("compiled", "triton")) -> None:
    """An A/B benchmark's row (benchmarks/short_conv.py, linear_cross_entropy.py): appended, its shape and the two
    forms' forward + backward GPU ms printed as one JSON line, and all rows so far written to `out` (JSON) when given,
    so that a run cut short keeps what it measured."""
    rows.append(row)
    print(json.dumps({k: v for k, v in row.items() if k not in forms} | {f: row[f]["gpu fwd+bwd"] for f in forms}),
          flush=True)
    if out:
        Path(out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "rows": rows}, indent=1))


def ab_table(rows: list[dict], shape: str, shape_of: Callable[[dict], str], outputs: str) -> str:
    """An A/B benchmark's Markdown table (rows as keep_row keeps them, forms "compiled" and "triton"): GPU ms of each
    form forward and forward + backward with the ratio triton / compiled, wall ms beside them, and each form's errors
    against fp64 (`outputs` names them, e.g. "y, dx, dw")."""
    lines = [f"| {shape} | fwd GPU ms compiled / triton | ratio | fwd+bwd GPU ms compiled / triton | ratio | "
             f"fwd+bwd wall ms (incl. host) compiled / triton | error {outputs} (compiled; triton) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        a, b = r["compiled"], r["triton"]
        cells = [shape_of(r)]
        for key in ("gpu fwd", "gpu fwd+bwd"):
            cells += [f"{a[key]:.3f} / {b[key]:.3f}", f"{b[key] / a[key]:.2f}"]
        cells.append(f"{a['wall fwd+bwd']:.3f} / {b['wall fwd+bwd']:.3f}")
        cells.append("; ".join(", ".join(f"{e:.1e}" for e in f["errors"].values()) for f in (a, b)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def attempt(what: Callable, *args: object) -> object:
    """what(*args), or its failure as one 'crash: …' text (one failing part must not stop the others)."""
    try:
        return what(*args)
    except Exception as e:
        traceback.print_exc()
        return f"crash: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"


def measure(s: Shape, with_fla: bool) -> None:
    """Child process for one shape: prints one JSON line after our part and another after fla's."""
    x = make_inputs(s, torch.bfloat16, seed=2)
    want = outputs_and_grads(ours(s, "torch"), x, torch.float64)
    short = Shape(1, 200, 2, s.K, s.V, s.n_h)
    xs = make_inputs(short, torch.float32, seed=3)
    want_short = outputs_and_grads(ours(short, "torch"), xs, torch.float64)
    res: dict[str, object] = {"errors": {
        "ours bf16": attempt(lambda: rel_errors(outputs_and_grads(ours(s), x, torch.bfloat16), want)),
        "ours fp32": attempt(lambda: rel_errors(outputs_and_grads(ours(s), xs, torch.float32), want_short))}}
    res["ours"] = attempt(lambda: timings(ours(s), make_inputs(s, torch.bfloat16)))
    res["ours configs"] = tuning.chosen()
    print(json.dumps(res), flush=True)
    if not with_fla:
        return
    res["errors"]["fla bf16"] = attempt(lambda: rel_errors(outputs_and_grads(fla_fn(s), x, torch.bfloat16), want))
    res["fla"] = attempt(lambda: timings(fla_fn(s), make_inputs(s, torch.bfloat16)))
    torch.cuda.synchronize()
    print(json.dumps(res), flush=True)


def compile_only(s: Shape, part: str) -> None:
    """Child process that only compiles (fills Triton's on-disk cache) ours in bf16 and fp32 (part "ours") or fla's
    autotuned kernels (part "fla"). The parent runs these for every shape and both parts at once, so compilation
    uses the CPU cores in parallel."""
    import triton.testing

    if part == "ours":
        fns = [(ours(s), make_inputs(s, torch.bfloat16), torch.bfloat16),
               (ours(s), make_inputs(Shape(1, 200, 2, s.K, s.V, s.n_h), torch.float32), torch.float32)]
    else:
        # fla's autotuner here only compiles and runs each config once (timing it while the other shapes' children
        # share the GPU would be noise) and keeps no result: the measuring child, alone on the GPU, times the
        # configs from the compile cache and picks fla's best
        os.environ["FLA_CACHE_RESULTS"] = "0"
        triton.testing.do_bench = lambda fn, *args, quantiles=None, **kwargs: (fn(), [0.0] * len(quantiles or [0]))[1]
        fns = [(fla_fn(s), make_inputs(s, torch.bfloat16), torch.bfloat16)]
    t0 = time.time()
    for fn, x, dtype in fns:
        attempt(outputs_and_grads, fn, x, dtype)
        with torch.no_grad():  # the forward alone compiles apart (ours: no h, v_new stored)
            attempt(fn, *x)
    torch.cuda.synchronize()
    print(f"compiled {part} for {s} in {time.time() - t0:.0f} s", flush=True)


def run_child(i: int, with_fla: bool) -> dict:
    """The last JSON line a child process for SHAPES[i] printed (its other output passes through)."""
    cmd = [sys.executable, __file__, "--child", str(i)] + ([] if with_fla else ["--no-fla"])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    res: dict = {"errors": {}, "ours": f"crash: child exited {proc.returncode}"}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            res = json.loads(line)
        else:
            print(line, flush=True)
    if proc.returncode and with_fla and "fla" not in res:
        res["fla"] = f"crash: process died (exit {proc.returncode})"
    return res


def fmt_ms(t: object, key: str) -> str:
    return f"{t[key]:.3f}" if isinstance(t, dict) and key in t else "–"


def ratio(a: object, b: object, key: str) -> str:
    return f"{a[key] / b[key]:.2f}" if all(isinstance(t, dict) and key in t for t in (a, b)) else "–"


def worst(errors: object) -> str:
    """The largest relative error over o and the gradients, or the crash text."""
    return f"{max(errors.values()):.1e}" if isinstance(errors, dict) else str(errors)


def passes(res: dict) -> bool:
    """Whether ours is within its bars in bf16 and fp32."""
    errs = res["errors"]
    return all(isinstance(errs.get(k), dict) and max(errs[k].values()) < bar for k, bar in BARS.items())


def row(s: Shape, res: dict) -> str:
    """One markdown row: GPU ms ours / fla and their ratio (fwd, fwd+bwd, fwd alone), the worst errors, wall ms."""
    o, f = res.get("ours"), res.get("fla", "not run")
    fla_cell = lambda key: f if isinstance(f, str) and key == "gpu fwd" else fmt_ms(f, key)  # noqa: E731
    cells = [label(s)]
    for key in ("gpu fwd", "gpu fwd+bwd", "gpu fwd alone"):
        cells += [f"{fmt_ms(o, key)} / {fla_cell(key)}", ratio(o, f, key)]
    errs = res["errors"]
    cells += [worst(errs.get("ours bf16", "–")) + ("" if passes(res) else " **FAIL**"),
              worst(errs.get("ours fp32", "–")), worst(errs.get("fla bf16", "–"))]
    cells += [f"{fmt_ms(o, key)} / {fmt_ms(f, key)}" for key in ("wall fwd", "wall fwd+bwd")]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| shape (B, T, H, K, V) | GPU ms fwd, ours / fla | ratio | GPU ms fwd+bwd, ours / fla | ratio | "
          "GPU ms fwd alone (no grad), ours / fla | ratio | max error ours bf16 | ours fp32 | fla bf16 | "
          "wall ms fwd, ours / fla (includes host time) | wall ms fwd+bwd, ours / fla (includes host time) |\n"
          + "| --- " * 12 + "|")


def details(s: Shape, res: dict) -> list[str]:
    """Per-gradient errors and the largest kernels of each side (forward, and forward + backward), as markdown list
    items."""
    lines = [f"- {s}: " + "; ".join(f"{k}: " + (" ".join(f"{n} {v:.1e}" for n, v in e.items())
                                               if isinstance(e, dict) else str(e))
                                    for k, e in res["errors"].items())]
    for side in ("ours", "fla"):
        t = res.get(side)
        if isinstance(t, dict):
            for call in ("fwd", "fwd+bwd", "fwd alone"):
                if f"kernels {call}" not in t:
                    continue
                lines.append(f"  - {side} {call} kernels (ms): "
                             + "; ".join(f"`{n}` {ms:.3f}" for n, ms in t[f"kernels {call}"]))
        if res.get(f"{side} configs"):
            lines.append(f"  - {side}: the configs its launches took: {res[f'{side} configs']}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the markdown report here (rewritten after every shape)")
    p.add_argument("--only", type=int, nargs="*", help="indices into SHAPES")
    p.add_argument("--no-fla", action="store_true", help="ours only")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--compile-only", choices=("ours", "fla"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        if args.compile_only:
            compile_only(SHAPES[args.child], args.compile_only)
        else:
            measure(SHAPES[args.child], not args.no_fla)
        return
    import triton

    todo = args.only if args.only else list(range(len(SHAPES)))
    t0 = time.time()
    parts = ("ours",) + (() if args.no_fla else ("fla",))
    for proc in [subprocess.Popen([sys.executable, __file__, "--child", str(i), "--compile-only", part])
                 for i in todo for part in parts]:
        proc.wait()
    print(f"compiled in parallel in {time.time() - t0:.0f} s", flush=True)
    try:
        import fla
        fla_version = fla.__version__
    except ImportError:
        fla_version = "not installed"
    head = [f"# Triton chunked gated delta rule vs fla: GPU time ({datetime.date.today()})", "",
            f"GPU: {torch.cuda.get_device_name()}; Python {platform.python_version()}, torch {torch.__version__}, "
            f"Triton {triton.__version__}, fla {fla_version}.",
            f"Command: `python3 benchmarks/kernels.py {' '.join(sys.argv[1:])}` (repository root).", "",
            "GPU ms: the CUDA kernels of one call summed (torch.profiler, mean of "
            f"{REPS} calls); fwd: inputs requiring grad (a training step's forward, storing what the backward "
            "reads); fwd alone: under torch.no_grad (evaluation). Ratio: ours / fla. Errors: max over o and the "
            "five gradients of ‖x − ref‖/‖ref‖ against "
            "fp64 (bars: bf16 1e-2, fp32 1e-4; ours fp32 on B 1, T 200, H 2 with the same head dims). fla's gated "
            "backward is refused on Hopper with Triton < 3.7.1 (fla issue 640): its guard is bypassed, so fla's "
            "fwd+bwd times the work and its bf16 error says whether that gradient is right. Wall ms: "
            "triton.testing.do_bench median, which includes host time (Python, launches).", "", HEADER]
    rows: list[str] = []
    notes: list[str] = []

    def text() -> str:
        return "\n".join(head + rows + ["", "Per gradient and per kernel:", ""] + notes) + "\n"

    for i in todo:
        s = SHAPES[i]
        print(f"== {s}", flush=True)
        res = run_child(i, not args.no_fla)
        rows.append(row(s, res))
        notes += details(s, res)
        print(rows[-1], flush=True)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text())
    print(text(), flush=True)


if __name__ == "__main__":
    main()
