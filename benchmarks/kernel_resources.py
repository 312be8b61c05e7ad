"""What each Triton pass compiles to on a Hopper GPU, from a machine without one: registers, stack (spills), shared
memory, the CTAs an H200 SM can hold, and SASS instruction counts, for every candidate config the launcher would time.

    python3 benchmarks/kernel_resources.py --out benchmarks/kernel-resources.md      # the benchmark's shapes
    python3 benchmarks/kernel_resources.py --only 3 --pass chunk_wy_bwd_kernel        # one shape, one pass

The GPU runs Triton 3.6; to compile with that version here, install it beside the package's and put it first:
`pip install --no-deps --target /tmp/triton-3.6 triton==3.6.0`, then `PYTHONPATH=/tmp/triton-3.6 python3 …`.
Static only: a kernel's time is not in this table (benchmarks/kernels.py measures it), but what limits it often is —
registers that cap the CTAs an SM holds, local-memory traffic from spills, shared memory over the 227 KB a CTA can
have. Each shape runs the op's forward and backward (benchmarks/kernels.py's shapes, bf16, the models' form: q and
k normalised before the op) with `tuning.compiling()`: every launch compiles its candidates, nothing runs.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver

if not __package__:  # run as a file: the repository root that holds benchmarks/ goes on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.kernels import SHAPES, Shape, label  # noqa: E402
from deltamup import kernels  # noqa: E402
from deltamup.kernels.triton import tuning  # noqa: E402

# Hopper (sm_90) per SM: 64K 32-bit registers, allocated per warp in units of 256; 228 KB of shared memory, 227 KB
# at most a CTA, 1 KB reserved per CTA; 64 warps and 32 CTAs at most.
REGISTERS, REG_UNIT, SMEM_SM, SMEM_CTA, SMEM_RESERVED, MAX_WARPS, MAX_CTAS = 65536, 256, 233472, 232448, 1024, 64, 32
SMS = 132  # an H200's SMs
TENSOR_CORE_OPS = ("HGMMA", "HMMA")  # warpgroup (4 warps) and warp-level matrix multiplies
LOCAL_OPS = ("LDL", "STL")  # local-memory loads and stores: spills


class CompileOnlyDriver:
    """The Triton driver's device queries answered for a GPU that is not there: `warmup` compiles for `target`."""

    def __init__(self, target: GPUTarget) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")


def compile_shape(s: Shape) -> list[tuple[str, dict[str, int], object, int | None]]:
    """(pass, config, compiled kernel, programs its launch runs) of every candidate the op's forward and backward
    launch at shape s (bf16, q and k as the model passes them: normalised before the op)."""
    Tn = s.T * s.n_h
    x = [torch.randn(s.B, s.T, s.H, s.K), torch.randn(s.B, Tn, s.H, s.K), torch.randn(s.B, Tn, s.H, s.V),
         torch.randn(s.B, s.T, s.H), torch.rand(s.B, Tn, s.H)]
    q, k, v, g, beta = (t.to(torch.bfloat16).requires_grad_() for t in x)
    with tuning.compiling() as compiled:
        if s.n_h == 1:
            o = kernels.chunk_gated_delta_rule(q, k, v, g, beta, backend="triton")[0]
        else:
            o = kernels.chunk_gated_delta_product(q, k, v, g, beta, s.n_h, backend="triton")[0]
        o.backward(torch.zeros_like(o))
    return [(c.kernel, c.config, c.binary, c.programs) for c in compiled]


def import_fla() -> None:
    """fla's kernels, imported before the compile-only driver is set (fla asks the driver about the device as it is
    imported) and with this folder and the repository root off the path (benchmarks/kernels.py and kernels/ would
    shadow the PyPI package `kernels` that transformers imports for fla)."""
    ours = {Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]}
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() not in ours]
    try:
        importlib.import_module("fla.ops.gated_delta_rule.wy_fast")
    finally:
        sys.path[:] = saved


def fla_counterparts(s: Shape) -> list[tuple[str, dict[str, int], object]]:
    """(kernel, config, compiled kernel) of fla 0.6.0's counterparts of the two passes ours lose most time in
    against fla's (benchmarks/kernels.md), every config of their autotuners: the fused K Kᵀ and UT solve and the
    UT transform's backward, with the tiles fla takes on an H200 (BC = 16; BK = BV = 64 where K, V ≥ 64)."""
    import triton.runtime.jit as jit
    from fla.ops.gated_delta_rule import chunk_fwd, wy_fast

    B, T, H, K, V = s.B, s.T, s.H, s.K, s.V
    bf = dict(dtype=torch.bfloat16)
    k, v, beta = torch.empty(B, T, H, K, **bf), torch.empty(B, T, H, V, **bf), torch.empty(B, T, H, **bf)
    g, A = torch.empty(B, T, H), torch.empty(B, T, H, 64, **bf)
    grads = (torch.empty_like(k), torch.empty_like(v), torch.empty_like(k), torch.empty_like(v),
             torch.empty_like(beta), torch.empty_like(g))
    BK, BV = (min(64, triton.next_power_of_2(n)) for n in (K, V))
    calls = {chunk_fwd.chunk_gated_delta_rule_fwd_kkt_solve_kernel: ((k, g, beta, A, None, None, T),
                                                                     dict(H=H, HV=H, K=K, BT=64, BC=16)),
             wy_fast.prepare_wy_repr_bwd_kernel: ((k, v, beta, g, A, *grads, None, None, T),
                                                  dict(H=H, HV=H, K=K, V=V, BT=64, BK=BK, BV=BV))}
    out = []
    for fn, (args, constexprs) in calls.items():
        configs = []
        while not isinstance(fn, jit.JITFunction):  # through fla's heuristics and autotuner
            configs = getattr(fn, "configs", None) or configs
            fn = fn.fn
        for c in configs:
            cfg = {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
            binary = fn.warmup(*args, grid=(1,), **constexprs, USE_G=True, IS_VARLEN=False, **cfg)
            out.append((f"fla {fn.__name__}", cfg, binary, None))
    return out


def resources(binary, tools: Path) -> dict[str, int]:
    """Registers, stack bytes, shared memory and SASS counts of a compiled kernel (cuobjdump on its cubin)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(binary.asm["cubin"])
        f.flush()
        usage = subprocess.run([tools / "cuobjdump", "--dump-resource-usage", f.name], capture_output=True,
                               text=True, check=True).stdout
        sass = subprocess.run([tools / "cuobjdump", "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    regs, stack = (int(v) for v in re.search(r"REG:(\d+) STACK:(\d+)", usage).groups())
    ops = collections.Counter(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+)", sass, re.M))
    return dict(regs=regs, stack=stack, smem=binary.metadata.shared, warps=binary.metadata.num_warps,
                sass=sum(ops.values()), mma=sum(ops[o] for o in TENSOR_CORE_OPS),
                local=sum(ops[o] for o in LOCAL_OPS))


def ctas_per_sm(r: dict[str, int]) -> int:
    """CTAs of this kernel one H200 SM holds at once (0: its shared memory is over a CTA's 227 KB)."""
    if r["smem"] > SMEM_CTA:
        return 0
    per_warp = -(-r["regs"] * 32 // REG_UNIT) * REG_UNIT
    by_regs = REGISTERS // per_warp // r["warps"]
    by_smem = SMEM_SM // (r["smem"] + SMEM_RESERVED)
    return min(by_regs, by_smem, MAX_WARPS // r["warps"], MAX_CTAS)


def waves(programs: int | None, ctas: int) -> str:
    """How many rounds an H200's SMs take to run `programs` at `ctas` an SM ("–" where unknown or unfit)."""
    return str(-(-programs // (ctas * SMS))) if programs and ctas else "–"


def table(rows: list[dict]) -> list[str]:
    head = ("pass", "config", "registers", "stack (B)", "shared (KB)", "CTAs / SM", "programs", "waves",
            "tensor-core ops", "local ld/st", "SASS ops")
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        ctas = ctas_per_sm(r)
        out.append(f"| `{r['pass']}` | {r['config']} | {r['regs']} | {r['stack']} | {r['smem'] / 1024:.1f} | "
                   f"{ctas if ctas else 'does not fit'} | {r['programs'] or '–'} | {waves(r['programs'], ctas)} | "
                   f"{r['mma']} | {r['local']} | {r['sass']} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", type=int, nargs="*", help=f"indices into the {len(SHAPES)} shapes")
    ap.add_argument("--pass", dest="passes", nargs="*", help="only these passes (kernel names)")
    ap.add_argument("--fla", action="store_true", help="also fla's counterparts of the solve and the UT transform's "
                    "backward (gated delta rule shapes; fla must be installed)")
    ap.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90, Hopper)")
    ap.add_argument("--out", help="markdown file to write")
    a = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET") == "1":
        sys.exit("kernel_resources: TRITON_INTERPRET=1 runs kernels in the interpreter; unset it to compile them")
    bad = [i for i in a.only or [] if not 0 <= i < len(SHAPES)]
    if bad:
        sys.exit(f"kernel_resources: no shape {bad[0]}; there are {len(SHAPES)} (0–{len(SHAPES) - 1})")
    if a.fla and importlib.util.find_spec("fla") is None:
        sys.exit("kernel_resources: --fla needs fla installed (pip install flash-linear-attention==0.6.0)")
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (tools / "cuobjdump").exists():
        sys.exit(f"kernel_resources: no cuobjdump in {tools}; this Triton has no NVIDIA backend")
    if a.fla:
        import_fla()
    driver.set_active(CompileOnlyDriver(GPUTarget("cuda", a.arch, 32)))
    shapes = [SHAPES[i] for i in (a.only if a.only else range(len(SHAPES)))]
    lines = [f"# Triton passes compiled for sm_{a.arch}: registers, spills, shared memory "
             f"({datetime.date.today().isoformat()})", "",
             f"Triton {triton.__version__}, torch {torch.__version__}, compiled on a machine without a GPU. Command:",
             "", "    python3 benchmarks/kernel_resources.py " + " ".join(sys.argv[1:]), "",
             "Every candidate config of every pass the op's forward and backward launch (bf16, q and k normalised "
             "before the op). CTAs / SM: what an H200 SM holds at once by registers, shared memory and warps; "
             f"programs: the launch's grid; waves: the rounds {SMS} SMs take to run them at that many an SM. "
             "Stack and local ld/st: spills to local memory. Tensor-core ops: HGMMA (warpgroup) and HMMA "
             "(warp) instructions.", ""]
    for s in shapes:
        seen: set[tuple[str, str]] = set()
        rows = []
        compiled = compile_shape(s) + (fla_counterparts(s) if a.fla and s.n_h == 1 else [])
        for name, cfg, binary, programs in compiled:
            key = (name, tuning.config_text(cfg))
            if key in seen or (a.passes and name not in a.passes):
                continue
            seen.add(key)
            rows.append(dict(resources(binary, tools), **{"pass": name, "config": key[1], "programs": programs}))
        lines += [f"## {label(s)}", "", *table(rows), ""]
        print("\n".join(lines[-len(rows) - 5:]), flush=True)
        if a.out:  # after every shape: a run cut short keeps what it compiled
            Path(a.out).write_text("\n".join(lines))


if __name__ == "__main__":
    main()
