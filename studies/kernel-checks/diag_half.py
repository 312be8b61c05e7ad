"""Which kernel configs compute correctly with half-precision inputs on the GPU: the measurement behind the
narrow-head rule (kernels/triton/tuning.py, is_narrow: K or V ≤ 32 takes fp32 operands and the first config only).

Each variant runs in its own process (an illegal access poisons the CUDA context) with CUDA_LAUNCH_BLOCKING=1, so
the traceback names the launch that failed; output, final state and every gradient are compared with the chunked
PyTorch form in fp64. One JSON line per variant, then a table.
    python3 studies/kernel-checks/diag_half.py [--only NAME ...]"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple


class Variant(NamedTuple):
    """One run of the kernels, each in its own process."""
    dtype: str
    shape: tuple[int, int, int, int, int]  # B, T, H, K, V
    with_state: bool                       # initial state in, final state out
    warps: int | None                      # the parallel passes' num_warps (None: tuning's table)
    state_bv: int | None                   # the sequential passes' V block (None: tuning's heuristic)
    autotune: str                          # DELTAMUP_AUTOTUNE


VARIANTS = {
    "test-as-is":      Variant("float16", (1, 70, 2, 64, 32), True, None, None, "0"),
    "bf16":            Variant("bfloat16", (1, 70, 2, 64, 32), True, None, None, "0"),
    "no-h0":           Variant("float16", (1, 70, 2, 64, 32), False, None, None, "0"),
    "T128":            Variant("float16", (1, 128, 2, 64, 32), True, None, None, "0"),
    "par4":            Variant("float16", (1, 70, 2, 64, 32), True, 4, None, "0"),
    "bv32":            Variant("float16", (1, 70, 2, 64, 32), True, None, 32, "0"),
    "par4-bv32":       Variant("float16", (1, 70, 2, 64, 32), True, 4, 32, "0"),
    "autotuned":       Variant("float16", (1, 70, 2, 64, 32), True, None, None, "1"),
    "V64":             Variant("float16", (1, 70, 2, 64, 64), True, None, None, "0"),
    "K128":            Variant("float16", (1, 70, 2, 128, 32), True, None, None, "0"),
    "bench-K64-bf16":  Variant("bfloat16", (8, 2048, 6, 64, 128), False, None, None, "0"),
    "bench-K64-h0":    Variant("bfloat16", (8, 2048, 6, 64, 128), True, None, None, "0"),
}


def child(name: str) -> dict:
    import torch

    from deltamup import kernels
    from deltamup.kernels.triton import chunk_bwd, chunk_fwd, tuning

    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a smoke run under TRITON_INTERPRET=1
    dtype, (B, T, H, K, V), with_state, warps, bv, _ = VARIANTS[name]
    if warps is not None:
        for m in (chunk_fwd, chunk_bwd):
            m.PAR_CONFIGS = (dict(num_warps=warps, num_stages=2),)
    if bv is not None:
        def forced(K: int, BK: int, V: int, BH: int):
            configs, fallbacks = tuning.state_configs(K, BK, V, BH)
            return [dict(c, BV=bv) for c in configs[:1]], fallbacks
        for m in (chunk_fwd, chunk_bwd):
            m.state_configs = forced
    gen = torch.Generator().manual_seed(4)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    x = dict(q=r(B, T, H, K), k=torch.nn.functional.normalize(r(B, T, H, K), dim=-1), v=r(B, T, H, V),
             g=torch.nn.functional.logsigmoid(r(B, T, H) + 2), beta=2 * torch.rand(B, T, H, generator=gen,
                                                                                     dtype=torch.float64),
             h0=r(B, H, K, V) if with_state else None)
    x = {n: (t.to(dev) if t is not None else None) for n, t in x.items()}

    def run(backend: str, dt: torch.dtype) -> dict[str, torch.Tensor]:
        leaves = {n: (t.detach().to(dt).clone().requires_grad_() if t is not None else None) for n, t in x.items()}
        o, ht = kernels.chunk_gated_delta_rule(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"],
                                               initial_state=leaves["h0"], output_final_state=with_state,
                                               backend=backend)
        g2 = torch.Generator().manual_seed(1)
        loss = (o * torch.randn(o.shape, generator=g2, dtype=torch.float64).to(dev).to(o)).sum()
        if with_state:
            loss = loss + (ht * torch.randn(ht.shape, generator=g2, dtype=torch.float64).to(dev).to(ht)).sum()
        loss.backward()
        if dev == "cuda":
            torch.cuda.synchronize()
        out = {"o": o, "ht": ht}
        out.update({f"d{n}": t.grad for n, t in leaves.items() if t is not None})
        return {n: t.detach() for n, t in out.items() if t is not None}

    want = run("torch", torch.float64)
    got = run("triton", getattr(torch, dtype))
    err = {n: float((got[n].double() - want[n]).norm() / want[n].norm()) for n in want}
    return {"status": "ok", "max_err": max(err.values()), "err": {n: f"{e:.1e}" for n, e in err.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*")
    p.add_argument("--child")
    args = p.parse_args()
    if args.child:
        try:
            row = child(args.child)
        except Exception as e:  # noqa: BLE001 - the point is to report it
            frames = [f for f in traceback.extract_tb(e.__traceback__) if "kernels/triton" in f.filename]
            where = [f"{os.path.basename(f.filename)}:{f.lineno} {f.line}" for f in frames[-2:]]
            row = {"status": "crash", "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}",
                   "where": where}
        print("RESULT " + json.dumps({"name": args.child, **row}), flush=True)
        return
    names = args.only or list(VARIANTS)

    def spawn(name: str) -> dict:
        env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1", "DELTAMUP_AUTOTUNE": VARIANTS[name].autotune}
        done = subprocess.run([sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True,
                              timeout=240)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        row = json.loads(lines[-1][7:]) if lines else {"name": name, "status": f"no result (rc {done.returncode})",
                                                       "error": done.stderr[-300:]}
        print(json.dumps(row), flush=True)
        return row

    with ThreadPoolExecutor(len(names)) as pool:
        rows = list(pool.map(spawn, names))
    print("\n| variant | settings | result |\n| --- | --- | --- |")
    for row in rows:
        v = VARIANTS[row["name"]]._asdict()
        res = f"ok, max rel err {row['max_err']:.1e}" if row["status"] == "ok" else \
            f"{row['status']}: {row.get('error', '')} at {row.get('where', '')}"
        print(f"| {row['name']} | {v} | {res} |")


if __name__ == "__main__":
    main()
