"""The forward with its output pass fused into the state pass, timed beside the package's and checked against it.

The package's forward (kernels/triton/chunk_fwd.py `chunk_fwd`) runs the state pass (one program per head and V
block walks the chunks: stores h before each chunk, v_new = u − W h, h ← e^{g_last} h + Kᵀ(e^{g_last − G} ⊙ v_new))
and then the output pass (one program per chunk and V block: o = scale e^G ⊙ (Q h) + Aqk v_new, re-reading h and
v_new). Form `fused`: the state pass computes o itself at each chunk from the h and v_new it holds in registers, so
the output pass and its reads of h (K·V·2 bytes a chunk) and v_new disappear, at the price of two more products in
each of the state pass's sequential steps (Q h and Aqk v_new, off the recurrence's critical path). h_all and v_new
are still stored (the backward reads them). Plain gated delta rule (n_h = 1).

The time is CUDA kernel time of the whole forward from the profiler (mean of 50 calls): the package's autotuned,
and the fused form at each (BV, warps, stages) tried; the errors are ‖o − o_package‖ / ‖o_package‖ and
‖o − o_fp64‖ / ‖o_fp64‖ against the chunked PyTorch form in fp64 (kernels/chunk_torch.py).

    python3 studies/kernel-checks/state_o_fused.py                     # on a GPU: the benchmark's head shapes, bf16
    TRITON_INTERPRET=1 python3 studies/kernel-checks/state_o_fused.py  # on a CPU: small shapes, errors only
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from prepare_forms import CPU_SHAPES, inputs  # beside this script (its folder is on sys.path)
from solve_forms import gpu_ms

from deltamup.kernels import chunk_gated_delta_rule
from deltamup.kernels.triton.chunk_fwd import chunk_fwd, chunk_prepare
from deltamup.kernels.triton.tuning import is_narrow, precision, state_blocks
from deltamup.kernels.triton.utils import (CHUNK, add_trans_states, dot_rows_states, load_gates, load_states, mm,
                                           store_states, tile)

GPU_SHAPES = ((8, 2048, 6, 64, 128), (8, 2048, 6, 96, 192), (8, 2048, 6, 128, 256), (8, 2048, 6, 192, 384),
              (4, 4096, 16, 128, 128))
CONFIGS = [dict(BV=bv, num_warps=w, num_stages=s) for bv in (32, 64) for w in (4, 8) for s in (2, 3)]


@triton.jit
def state_o_fused_kernel(
    q, k, w, u, G, Aqk, h_all, v_new, o,
    scale, T, NT, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NKB: tl.constexpr, PREC: tl.constexpr,
):
    """Grid (V / BV, B·H): chunk_state_fwd_kernel's walk (no initial or final state) writing o [B,T,H,V] as well."""
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    rv = i_v * BV + tl.arange(0, BV)
    b_h1, b_h2, b_h3, b_h4 = load_states(G, rv, K, V, BK, BV, NKB, False)
    for i_t in range(NT):
        t0 = i_t * C
        b_G, b_gl = load_gates(G + tok, t0, T, H, C)
        store_states(h_all + (i_bh * NT + i_t) * K * V, b_h1, b_h2, b_h3, b_h4, rv, K, V, BK, NKB)
        p, m = tile(t0, T, H, V, i_v * BV, C, BV)
        b_v = (tl.load(u + tok * V + p, mask=m, other=0.0).to(tl.float32)
               - dot_rows_states(w + tok * K, t0, T, H, K, b_h1, b_h2, b_h3, b_h4, C, BK, NKB, PREC))
        b_vn = b_v.to(v_new.dtype.element_ty)
        tl.store(v_new + tok * V + p, b_vn, mask=m)
        b_o = dot_rows_states(q + tok * K, t0, T, H, K, b_h1, b_h2, b_h3, b_h4, C, BK, NKB, PREC)
        p_c, m_c = tile(t0, T, H, C, 0, C, C)
        b_A = tl.load(Aqk + tok * C + p_c, mask=m_c, other=0.0)
        b_o = b_o * (tl.exp(b_G) * scale)[:, None] + mm(b_A, b_vn, v_new, PREC)
        tl.store(o + tok * V + p, b_o.to(o.dtype.element_ty), mask=m)
        b_h1, b_h2, b_h3, b_h4 = add_trans_states(b_h1, b_h2, b_h3, b_h4, tl.exp(b_gl), k + tok * K, t0, T, H, K,
                                                  b_v * tl.exp(b_gl - b_G)[:, None], C, BK, NKB, PREC)


def fused_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                  config: dict[str, int]) -> torch.Tensor:
    """o [B,T,H,V] of the plain rule (scale K^-1/2), the per-chunk pass as the package's, then the fused walk."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    NT = triton.cdiv(T, CHUNK)
    scale = K**-0.5
    G, _, Aqk, w, u = chunk_prepare(q, k, v, g, beta, scale).values()
    h_all = torch.empty(B, H, NT, K, V, dtype=k.dtype, device=k.device)
    v_new, o = torch.empty_like(v), torch.empty_like(v)
    BK, NKB = state_blocks(K)
    BV = config["BV"]
    state_o_fused_kernel[(triton.cdiv(V, BV), B * H)](
        q, k, w, u, G, Aqk, h_all, v_new, o, scale, T, NT, H=H, K=K, V=V, C=CHUNK, BK=BK, NKB=NKB,
        PREC=precision(q.dtype, K, V), **config)
    return o


def main() -> None:
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    print(f"{torch.cuda.get_device_name() if cuda else 'CPU (Triton interpreter)'}; triton {triton.__version__}, "
          f"torch {torch.__version__}; {str(dtype).split('.')[1]}")
    print("| shape (B, T, H, K, V) | form | BV, warps, stages | GPU ms (forward) | rel. error of o vs the package's "
          "| vs fp64 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shape in GPU_SHAPES if cuda else CPU_SHAPES:
        if is_narrow(shape[3], shape[4]):
            continue  # narrow heads run the validated fp32 form only (tuning.py)
        q, k, v, g, beta = inputs(tuple(shape), dtype, device)
        scale = shape[3] ** -0.5

        def package() -> torch.Tensor:
            return chunk_fwd(q, k, v, g, beta, scale, None, False)[0]
        ref = package()
        exact = chunk_gated_delta_rule(*(t.double() for t in (q, k, v, g, beta)), backend="torch")[0]

        def fp64_error(o: torch.Tensor) -> float:
            return ((o.double() - exact).norm() / exact.norm()).item()
        name = ", ".join(map(str, shape))
        ms = f"{gpu_ms(package):.4f}" if cuda else "–"
        print(f"| {name} | package | autotuned | {ms} | – | {fp64_error(ref):.1e} |", flush=True)
        for config in CONFIGS if cuda else CONFIGS[:1]:
            label = f"{config['BV']}, {config['num_warps']}, {config['num_stages']}"
            try:
                out = fused_forward(q, k, v, g, beta, config)
            except Exception as e:  # noqa: BLE001 — a config that does not compile or fit is a row, not the end
                print(f"| {name} | fused | {label} | failed: {type(e).__name__} | – | – |", flush=True)
                continue
            err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
            ms = f"{gpu_ms(lambda c=config: fused_forward(q, k, v, g, beta, c)):.4f}" if cuda else "–"
            print(f"| {name} | fused | {label} | {ms} | {err:.1e} | {fp64_error(out):.1e} |", flush=True)


if __name__ == "__main__":
    main()
