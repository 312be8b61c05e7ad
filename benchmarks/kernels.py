"""Correctness and speed of the Triton chunk kernels on a GPU, against an fp64 reference and fla 0.6.0.

    python3 -m kernels.bench --out benchmarks/kernels-DATE.md
    python3 -m kernels.bench --no-fla --fla-table benchmarks/kernels-DATE.md --out NEW.md   # fla from an earlier run

For every shape: relative errors (‖x − ref‖/‖ref‖) of o and of each gradient, bf16 against the fp64 chunked PyTorch
path on the GPU (bar 1e-2), and fp32 on a short sequence with the same head dims (bar 1e-4); then fwd and fwd+bwd
median times (triton.testing.do_bench) of ours and of fla on the same bf16 inputs (q/k L2 norm in kernel, β ∈ [0, 2]).
fla's gated backward is refused on Hopper with Triton < 3.7.1 (fla issue 640); its guard is bypassed here, so its
fwd+bwd times the work, not a correct gradient (its errors are printed too). One table goes to stdout and --out.
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

import torch
import triton
import triton.testing

from deltamup import kernels

NAMES = ("o", "dq", "dk", "dv", "dg", "dbeta")


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


SHAPES = (Shape(8, 2048, 6, 32, 64), Shape(8, 2048, 6, 64, 128), Shape(8, 2048, 6, 128, 256),
          Shape(8, 2048, 6, 192, 384), Shape(4, 4096, 16, 128, 128), Shape(8, 2048, 6, 128, 256, 2),
          Shape(8, 2048, 6, 128, 256, 3), Shape(8, 2048, 6, 384, 384),
          Shape(8, 2048, 6, 16, 32),   # the smallest head dim the kernels take (its parallel tiles are 32 wide)
          Shape(2, 2048, 4, 512, 512))  # the largest the kernels issue asks for (fla asserts K ≤ 256)


def make_inputs(s: Shape, dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    """q [B,T,H,K], k/v/beta with T·n_h steps, g [B,T,H] (log-sigmoid), β ∈ [0, 2], on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *sh: torch.randn(*sh, device="cuda", generator=gen)  # noqa: E731
    Tn = s.T * s.n_h
    x = [r(s.B, s.T, s.H, s.K), r(s.B, Tn, s.H, s.K), r(s.B, Tn, s.H, s.V),
         torch.nn.functional.logsigmoid(r(s.B, s.T, s.H) + 3), 2 * torch.rand(s.B, Tn, s.H, device="cuda",
                                                                                generator=gen)]
    return [t.to(dtype) for t in x]


def ours(s: Shape, backend: str = "triton") -> Callable:
    """This project's op for the shape on `backend` ("torch": the chunked PyTorch form, the fp64 reference)."""
    if s.n_h == 1:
        return lambda q, k, v, g, b: kernels.chunk_gated_delta_rule(q, k, v, g, b, use_qk_l2norm_in_kernel=True,
                                                                    backend=backend)[0]
    return lambda q, k, v, g, b: kernels.chunk_gated_delta_product(q, k, v, g, b, s.n_h, use_qk_l2norm_in_kernel=True,
                                                                   backend=backend)[0]


def fla_fn(s: Shape) -> Callable:
    import fla.ops.common.chunk_o

    fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True  # bypass fla's Hopper guard: times work, not a correct grad
    if s.n_h == 1:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule

        return lambda q, k, v, g, b: chunk_gated_delta_rule(q, k, v, g, b, use_qk_l2norm_in_kernel=True)[0]
    from fla.ops.gated_delta_product import chunk_gated_delta_product

    return lambda q, k, v, g, b: chunk_gated_delta_product(q, k, v, g, b, s.n_h, use_qk_l2norm_in_kernel=True)[0]


def outputs_and_grads(fn: Callable, x: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    leaves = [t.detach().to(dtype).requires_grad_() for t in x]
    o = fn(*leaves)
    gen = torch.Generator(device="cuda").manual_seed(1)
    do = torch.randn(o.shape, device="cuda", generator=gen).to(torch.bfloat16).to(o.dtype)
    return [o.detach(), *torch.autograd.grad(o, leaves, do)]


def rel_errors(got: list[torch.Tensor], want: list[torch.Tensor]) -> dict[str, float]:
    return {n: ((a.double() - b).norm() / b.norm()).item() for n, a, b in zip(NAMES, got, want)}


def check(s: Shape, fn: Callable, dtype: torch.dtype) -> dict[str, float]:
    x = make_inputs(s, dtype, seed=2)
    want = outputs_and_grads(ours(s, "torch"), x, torch.float64)
    return rel_errors(outputs_and_grads(fn, x, dtype), want)


def timings(fn: Callable, x: list[torch.Tensor]) -> tuple[float, float]:
    """Median ms of the forward (inputs requiring grad) and of forward + backward."""
    leaves = [t.detach().requires_grad_() for t in x]
    do = torch.randn_like(fn(*leaves))
    fwd = triton.testing.do_bench(lambda: fn(*leaves), warmup=25, rep=100, return_mode="median")
    both = triton.testing.do_bench(lambda: torch.autograd.grad(fn(*leaves), leaves, do), warmup=25, rep=100,
                                   return_mode="median")
    return fwd, both


def cuda_times(run: Callable[[], object], reps: int = 5) -> list[tuple[str, float]]:
    """CUDA ms per call of `run`, summed by kernel name (first 60 characters), largest first (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            run()
        torch.cuda.synchronize()
    times: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name[:60]] = times.get(e.name[:60], 0.0) + e.time_range.elapsed_us() / 1e3 / reps
    return sorted(times.items(), key=lambda kv: -kv[1])


def kernel_profile(fn: Callable, x: list[torch.Tensor], reps: int = 5) -> str:
    """CUDA time per kernel name (ms per fwd+bwd, largest first), as one line."""
    leaves = [t.detach().requires_grad_() for t in x]
    do = torch.randn_like(fn(*leaves))
    top = cuda_times(lambda: torch.autograd.grad(fn(*leaves), leaves, do), reps)
    return f"total {sum(t for _, t in top):.3f} ms: " + "; ".join(f"{n} {t:.3f}" for n, t in top[:14])


def work(s: Shape) -> tuple[float, float, float, float]:
    """(fwd bytes, fwd+bwd bytes, fwd FLOPs, fwd+bwd FLOPs): inputs and outputs once in bf16; FLOPs of the chunked
    algorithm's matrix products over T·n_h steps (fwd 6C²K + 4C²V + 6CKV per chunk, fwd+bwd counted as 3× fwd)."""
    C, Tn, BH = 64, s.T * s.n_h, s.B * s.H
    io = 2 * BH * (s.T * s.K + Tn * (s.K + s.V + 1) + s.T + s.T * s.V)
    chunks = BH * triton.cdiv(Tn, C)
    fl = chunks * (6 * C * C * s.K + 4 * C * C * s.V + 6 * C * s.K * s.V)
    return io, 2 * io, fl, 3 * fl


def ceilings() -> tuple[float, float]:
    """Measured bf16 matmul TFLOP/s (8192³) and device copy GB/s (read + write)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = triton.testing.do_bench(lambda: a @ a, return_mode="median")
    x = torch.empty(2 ** 30, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    ms_c = triton.testing.do_bench(lambda: y.copy_(x), return_mode="median")
    return 2 * 8192 ** 3 / ms / 1e9, 2 * 2 ** 30 / ms_c / 1e6


def fmt_err(e: dict[str, float] | str) -> str:
    return e if isinstance(e, str) else " ".join(f"{n} {v:.1e}" for n, v in e.items())


def measure(s: Shape, with_fla: bool, profile: bool = False) -> None:
    """Child process for one shape: prints one JSON line after our part and another after fla's (fla can leave the
    CUDA context broken, e.g. an illegal memory access at K = 32, so each shape runs in its own process). With
    profile, also one line of CUDA time per kernel of ours and one of fla's (kernel time without the host's: where
    do_bench's time is above it, launches, not the GPU, bound the op)."""
    if profile:
        os.environ["DELTAMUP_AUTOTUNE_LOG"] = "1"  # every candidate config's time (kernels/triton/tuning.py)
    res: dict[str, object] = {"errors": {}}
    for label, dtype, short in (("ours bf16", torch.bfloat16, s),
                                ("ours fp32", torch.float32, Shape(1, 200, 2, s.K, s.V, s.n_h))):
        try:
            res["errors"][label] = check(short, ours(s), dtype)
        except Exception as e:  # one failing check must not stop the rest
            traceback.print_exc()
            res["errors"][label] = f"crash: {type(e).__name__}: {str(e)[:200]}"
    x = make_inputs(s, torch.bfloat16)
    try:
        res["ours"] = timings(ours(s), x)
    except Exception as e:
        traceback.print_exc()
        res["ours"] = f"crash: {type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(res), flush=True)
    if profile:  # after the result line: a profiler failure cannot lose it
        try:
            print(f"profile {s}: {kernel_profile(ours(s), x)}", flush=True)
        except Exception as e:
            print(f"profile {s}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    if not with_fla:
        return
    try:
        res["errors"]["fla bf16"] = check(s, fla_fn(s), torch.bfloat16)
    except Exception as e:
        res["errors"]["fla bf16"] = f"crash: {type(e).__name__}: {str(e)[:200]}"
    try:
        res["fla"] = timings(fla_fn(s), x)
        torch.cuda.synchronize()
    except Exception as e:
        res["fla"] = f"crash: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:100]}"
    print(json.dumps(res), flush=True)
    if profile and not isinstance(res["fla"], str):  # timings, not a crash text
        try:
            print(f"profile fla {s}: {kernel_profile(fla_fn(s), x)}", flush=True)
        except Exception as e:
            print(f"profile fla {s}: {type(e).__name__}: {str(e)[:200]}", flush=True)


def warm(s: Shape, part: str) -> None:
    """Child process that only compiles (fills Triton's on-disk cache) ours in bf16 and fp32 (part "ours": every
    config launch tries) or fla's autotuned kernels (part "fla"). The parent runs these for all shapes and both parts
    at once, so compilation uses the CPU cores in parallel."""
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
        try:
            outputs_and_grads(fn, x, dtype)
            torch.cuda.synchronize()
        except Exception as e:
            print(f"warm-up {s}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    print(f"compiled {part} for {s} in {time.time() - t0:.0f} s", flush=True)


def run_child(i: int, with_fla: bool, profile: bool) -> dict:
    """The last JSON line a child process for SHAPES[i] printed (its log passes through)."""
    cmd = ([sys.executable, __file__, "--child", str(i)] + ([] if with_fla else ["--no-fla"])
           + (["--profile"] if profile else []))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    res: dict = {"errors": {}, "ours": f"crash: child exited {proc.returncode}"}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            res = json.loads(line)
        else:
            print(line, flush=True)
    if proc.returncode and "fla" not in res and with_fla:
        res["fla"] = f"crash: process died (exit {proc.returncode})"
    return res


def earlier_fla(path: str) -> dict[str, list[float] | str]:
    """fla's (fwd, fwd+bwd) ms, or its crash text, per shape from the markdown table of an earlier run of this
    script (columns: shape, ours fwd, ours fwd+bwd, fla fwd, fla fwd+bwd, ...)."""
    shapes = {str(s) for s in SHAPES}
    out: dict[str, list[float] | str] = {}
    with open(path) as f:
        for line in f:
            if out and not line.startswith("|"):
                break  # the first table only (later tables of the file have other columns)
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 5 and cells[0] in shapes:
                try:
                    out[cells[0]] = [float(cells[3]), float(cells[4])]
                except ValueError:
                    out[cells[0]] = cells[3]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--only", type=int, nargs="*", help="indices into SHAPES")
    p.add_argument("--no-fla", action="store_true")
    p.add_argument("--fla-table", help="with --no-fla: take fla's columns from this earlier output of the script")
    p.add_argument("--profile", action="store_true",
                   help="print CUDA time per kernel of ours and fla's (torch.profiler) and every config ours tried")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--warm", choices=("ours", "fla"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        if args.warm:
            warm(SHAPES[args.child], args.warm)
        else:
            measure(SHAPES[args.child], not args.no_fla, args.profile)
        return
    if args.fla_table and not args.no_fla:
        raise SystemExit("--fla-table only goes with --no-fla")
    fla_earlier = earlier_fla(args.fla_table) if args.fla_table else {}
    todo = args.only if args.only else list(range(len(SHAPES)))
    t0 = time.time()
    warmers = [subprocess.Popen([sys.executable, __file__, "--child", str(i), "--warm", part])
               for i in todo for part in ("ours",) + (() if args.no_fla else ("fla",))]
    for w in warmers:
        w.wait()
    print(f"compiled in parallel in {time.time() - t0:.0f} s", flush=True)
    try:
        import fla
        fla_version = fla.__version__
    except ImportError:
        fla_version = None
    tflops_peak, gbs_peak = ceilings()
    header = [
        f"# Triton chunked gated delta rule vs fla ({datetime.date.today()})", "",
        f"GPU: {torch.cuda.get_device_name()}; Python {platform.python_version()}, torch {torch.__version__}, "
        f"Triton {triton.__version__}, fla {fla_version}.",
        f"Ceilings measured in this run: bf16 8192³ matmul {tflops_peak:.0f} TFLOP/s, device copy {gbs_peak:.0f} GB/s.",
        f"Command: `python3 -m kernels.bench {' '.join(sys.argv[1:])}` (on the GPU machine, from the repository root).",
        *([f"fla was not run here: its columns come from `{args.fla_table}`, an earlier run of this script (see its "
           "header for when and where); ratios compare this run's ours with those."] if args.fla_table else []),
        "bf16 inputs, q/k L2 norm in kernel, β ∈ [0, 2], log-sigmoid gates; median ms of triton.testing.do_bench. "
        "fwd runs with inputs requiring grad; fwd+bwd computes every input gradient. fla's gated backward is refused "
        "on Hopper with Triton < 3.7.1 (fla issue 640): its guard is bypassed, so fla's fwd+bwd times the work, not a "
        "correct gradient. GB/s and TFLOP/s are ours, fwd+bwd (bytes: inputs and outputs once; FLOPs: the chunked "
        "algorithm's products, fwd+bwd counted as 3× fwd).", "",
        "| shape (B, T, H, K, V) | ours fwd ms | ours fwd+bwd ms | fla fwd ms | fla fwd+bwd ms | ratio fwd | "
        "ratio fwd+bwd | GB/s | TFLOP/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows: list[str] = []
    notes: list[str] = []

    def text() -> str:
        return "\n".join(header + rows + ["", "Relative errors (‖x − ref‖/‖ref‖ vs fp64; bf16 bar 1e-2, fp32 bar "
                                           "1e-4; ours fp32 on B 1, T 200, H 2 with the same head dims):", ""]
                         + notes) + "\n"

    for i in todo:
        s = SHAPES[i]
        print(f"== {s}", flush=True)
        res = run_child(i, not args.no_fla, args.profile)
        errs = res["errors"]
        ok = all(isinstance(errs.get(k), dict) and max(errs[k].values()) < (1e-2 if "bf16" in k else 1e-4)
                 for k in ("ours bf16", "ours fp32"))
        notes.append(f"- {s}: " + "; ".join(f"{k}: {fmt_err(v)}" for k, v in errs.items())
                     + ("" if ok else " **FAIL**"))
        cells = [str(s)]
        ours_t, fla_t = res.get("ours"), res.get("fla", fla_earlier.get(str(s), "–"))
        cells += [f"{t:.3f}" for t in ours_t] if isinstance(ours_t, list) else [ours_t, "–"]
        cells += [f"{t:.3f}" for t in fla_t] if isinstance(fla_t, list) else [fla_t, "–"]
        if isinstance(ours_t, list) and isinstance(fla_t, list):
            cells += [f"{ours_t[0] / fla_t[0]:.2f}", f"{ours_t[1] / fla_t[1]:.2f}"]
        else:
            cells += ["–", "–"]
        if isinstance(ours_t, list):
            _, io_b, _, fl_b = work(s)
            gbs, tfl = io_b / ours_t[1] / 1e6, fl_b / ours_t[1] / 1e9
            cells += [f"{gbs:.0f} ({100 * gbs / gbs_peak:.1f}%)", f"{tfl:.1f} ({100 * tfl / tflops_peak:.1f}%)"]
        else:
            cells += ["–", "–"]
        rows.append("| " + " | ".join(cells) + " |")
        print(rows[-1], "\n" + notes[-1], flush=True)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text())
    print(text(), flush=True)


if __name__ == "__main__":
    main()
