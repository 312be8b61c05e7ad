"""Forms of the forward's per-chunk pass, timed side by side and checked against the kernels' own on the GPU.

The per-chunk pass (kernels/triton/chunk_fwd.py `chunk_prepare`) writes, per chunk of 64 rows, the cumulative gates
G, T = (I + A)^{-1}, w = T (β e^G ⊙ K), u = T (β ⊙ V) and Aqk = scale · causal(Q Kᵀ ⊙ D). Forms:
- `kernels`: the package's, two kernels: `chunk_kkt_solve_fwd` (one program a chunk: K Kᵀ, the solve in registers,
  T stored), then `chunk_wu_aqk_fwd` (one program per chunk *and* column block of w or u, one more for Aqk: T and β
  loaded once per column block);
- `wu-chunk`: the same solve kernel, then one program a chunk for w, u and Aqk: T and β loaded once, the column
  blocks unrolled (`tl.static_range`: a runtime loop over them computed dβ wrong on Hopper with 4 warps at K ≥ 128,
  studies/kernel-checks/README.md);
- `fused`: one program a chunk for all of it: K Kᵀ and Q Kᵀ from the same loads of K, the solve, then w and u from
  T in registers (no T round trip, one launch);
- `fused-blockwise`: `fused` with the package's solve from A's 16×16 blocks (A through a scratch buffer, T stored
  and loaded back for w and u, as the package's second kernel loads it).
With --norm, q and k come in as they are and the training forward's q/k norm is part of the pass: the package's
forms run the norm pass of their own first (`l2norm_fwd` on q and k, the normalised copies the backward reads),
`fused-blockwise` normalises inside (K Kᵀ and Q Kᵀ scaled by r_i r_j, w's rows by r_k) and writes the normalised
copies itself, from the chunk's rows loaded once more (from L2): no pass of its own. A row `kernels, norm inside, no copies`
times the package's own NORM path (the forward alone's: q and k normalised inside, no copies written), the bound
on what folding the norm into the pass can save.
The time is CUDA kernel time from the profiler (the sum of the form's kernels, mean of 50 calls), at each candidate
warp count; the error is the largest ‖x − x_kernels‖ / ‖x_kernels‖ over G, T, Aqk, w and u (the package's kernels
are themselves checked against fp64 by tests/test_triton_kernels.py and `deltamup kernels check`).

    python3 studies/kernel-checks/prepare_forms.py [--norm]            # on a GPU: the benchmark's head shapes, bf16
    TRITON_INTERPRET=1 python3 studies/kernel-checks/prepare_forms.py  # on a CPU: small shapes, errors only
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

import torch
import triton
import triton.language as tl

from deltamup.kernels.triton.chunk_fwd import (_wu_block, chunk_gates, chunk_kkt_solve_fwd_kernel, chunk_prepare,
                                               chunk_qk)
from deltamup.kernels.triton.l2norm import EPS, l2norm_fwd
from deltamup.kernels.triton.solve import solve_tril, solve_tril_blocks
from deltamup.kernels.triton.tuning import dot_operand_dtype, is_narrow, parallel_tiles, precision, solve_precision
from deltamup.kernels.triton.utils import CHUNK, decay, load_gates, mm, tile, tok_base
from solve_forms import gpu_ms  # studies/kernel-checks/solve_forms.py, beside this script (its folder is on sys.path)

GPU_SHAPES = ((8, 2048, 6, 32, 64), (8, 2048, 6, 64, 128), (8, 2048, 6, 96, 192), (8, 2048, 6, 128, 256),
              (8, 2048, 6, 192, 384), (4, 4096, 16, 128, 128))
CPU_SHAPES = ((1, 150, 2, 32, 64), (1, 150, 2, 96, 160))
NORM_EPS = tl.constexpr(EPS)


@triton.jit
def _aqk(q, k, tok, tq, t0, T, H, K: tl.constexpr, b_G, scale, Aqk, C: tl.constexpr, BK: tl.constexpr,
         PREC: tl.constexpr, NH: tl.constexpr):
    """Stores Aqk = scale · causal(Q Kᵀ ⊙ D) [C, C] of the chunk (as chunk_wu_aqk_fwd_kernel's last program)."""
    b_qk = tl.zeros([C, C], dtype=tl.float32)
    for i_k in tl.static_range((K + BK - 1) // BK):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        p_q, m_q = tile(t0, T, H, K, i_k * BK, C, BK, NH, NH - 1)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_q = tl.load(q + tq * K + p_q, mask=m_q, other=0.0)
        b_qk += mm(b_q, tl.trans(b_k), k, PREC)
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    tl.store(Aqk + tok * C + p_c, (b_qk * decay(b_G, C, False) * scale).to(Aqk.dtype.element_ty), mask=m_c)


@triton.jit
def _wu(k, v, w, u, tok, t0, T, H, K: tl.constexpr, V: tl.constexpr, b_T, b_sw, b_su, C: tl.constexpr,
        BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr):
    """Stores every column block of w = T (s_w ⊙ K) and u = T (s_u ⊙ V) of the chunk, unrolled (s_w = β e^G, times
    r_k where K's rows count normalised; s_u = β)."""
    for i_k in tl.static_range((K + BK - 1) // BK):
        _wu_block(k, w, tok, t0, T, H, K, i_k * BK, b_T, b_sw, C, BK, PREC)
    for i_v in tl.static_range((V + BV - 1) // BV):
        _wu_block(v, u, tok, t0, T, H, V, i_v * BV, b_T, b_su, C, BV, PREC)


@triton.jit
def wu_aqk_per_chunk_kernel(
    q, k, v, beta, G, T_in, w, u, Aqk,
    scale, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr, NH: tl.constexpr,
):
    """`wu-chunk`, grid (NT, B·H): w, u and Aqk of one chunk from G and T in memory."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    tok = i_b * T * H + i_h
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    b_G, _ = load_gates(G + tok, t0, T, H, C)
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    b_T = tl.load(T_in + tok * C + p_c, mask=m_c, other=0.0)
    _wu(k, v, w, u, tok, t0, T, H, K, V, b_T, b_beta * tl.exp(b_G), b_beta, C, BK, BV, PREC)
    _aqk(q, k, tok, tok_base(i_b, i_h, T, H, NH), t0, T, H, K, b_G, scale, Aqk, C, BK, PREC, NH)


@triton.jit
def _chunk_start(g, G_out, T, H, C: tl.constexpr, NH: tl.constexpr, USE_G: tl.constexpr):
    """The program's chunk, grid (NT, B·H): its first row t0, rows [C], the offsets of (b, t=0, h) in [B, T, H]
    (tok) and in g's and q's token rows (tq), and G = cumsum(g) [C], stored to G_out."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    t0 = i_t * C
    tok = i_b * T * H + i_h
    tq = tok_base(i_b, i_h, T, H, NH)
    return t0, t0 + tl.arange(0, C), tok, tq, chunk_gates(g, G_out, tq, tok, t0, T, H, C, NH, USE_G)


@triton.jit
def prepare_fused_kernel(
    q, k, v, g, beta, G_out, T_out, w, u, Aqk,
    scale, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr, BK: tl.constexpr,
    BV: tl.constexpr, USE_G: tl.constexpr, PREC: tl.constexpr, MP: tl.constexpr, NH: tl.constexpr,
):
    """`fused`, grid (NT, B·H): G, T, Aqk, w and u of one chunk; T stays in registers for w and u."""
    t0, rows, tok, tq, b_G = _chunk_start(g, G_out, T, H, C, NH, USE_G)
    b_kk = tl.zeros([C, C], dtype=tl.float32)
    b_qk = tl.zeros([C, C], dtype=tl.float32)
    for i_k in tl.static_range((K + BK - 1) // BK):  # _aqk's loop, with K Kᵀ from the same loads of K
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        p_q, m_q = tile(t0, T, H, K, i_k * BK, C, BK, NH, NH - 1)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_q = tl.load(q + tq * K + p_q, mask=m_q, other=0.0)
        b_kk += mm(b_k, tl.trans(b_k), k, PREC)
        b_qk += mm(b_q, tl.trans(b_k), k, PREC)
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    tl.store(Aqk + tok * C + p_c, (b_qk * decay(b_G, C, False) * scale).to(Aqk.dtype.element_ty), mask=m_c)
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    b_T = solve_tril(b_kk * decay(b_G, C, True) * b_beta[:, None], C, MP).to(T_out.dtype.element_ty)
    tl.store(T_out + tok * C + p_c, b_T, mask=m_c)
    _wu(k, v, w, u, tok, t0, T, H, K, V, b_T, b_beta * tl.exp(b_G), b_beta, C, BK, BV, PREC)


@triton.jit
def prepare_blockwise_kernel(
    q, k, v, g, beta, G_out, T_out, A_tmp, w, u, Aqk, qn, kn,
    scale, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, C: tl.constexpr, BK: tl.constexpr,
    BV: tl.constexpr, USE_G: tl.constexpr, PREC: tl.constexpr, MP: tl.constexpr, NH: tl.constexpr,
    NORM: tl.constexpr,
):
    """`fused-blockwise`, grid (NT, B·H): G, T, Aqk, w and u of one chunk, the solve from A's 16×16 blocks (A through
    A_tmp [B,T,H,C] fp32; T stored, then loaded back for w and u). One [C, C] accumulator live at a time: K Kᵀ, A
    stored, then Q Kᵀ with K's rows loaded again (from L2). With NORM, q and k as they come: their rows'
    r = (Σ x² + eps)^{-1/2} from those loops' loads, the products scaled as the package's NORM path, and the
    normalised copies written to kn and qn from one more pass over the chunk's rows."""
    t0, rows, tok, tq, b_G = _chunk_start(g, G_out, T, H, C, NH, USE_G)
    NK: tl.constexpr = (K + BK - 1) // BK
    b_kk = tl.zeros([C, C], dtype=tl.float32)
    b_s = tl.zeros([C], dtype=tl.float32)
    for i_k in tl.static_range(NK):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_kk += mm(b_k, tl.trans(b_k), k, PREC)
        if NORM:
            b_s += tl.sum(b_k.to(tl.float32) * b_k.to(tl.float32), axis=1)
    b_rk = tl.full([C], 1.0, dtype=tl.float32)
    if NORM:
        b_rk = 1.0 / tl.sqrt(b_s + NORM_EPS)
        b_kk = b_kk * b_rk[:, None] * b_rk[None, :]
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    tl.store(A_tmp + tok * C + p_c, b_kk * decay(b_G, C, True) * b_beta[:, None], mask=m_c)
    b_qk, b_s = chunk_qk(q, k, tok, tq, t0, T, H, K, C, BK, PREC, NH, NORM)
    if NORM:
        b_rq = 1.0 / tl.sqrt(b_s + NORM_EPS)
        b_qk = b_qk * b_rq[:, None] * b_rk[None, :]
        for i_k in tl.static_range(NK):  # the normalised copies, from the chunk's rows again (in L2)
            p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
            p_q, m_q = tile(t0, T, H, K, i_k * BK, C, BK, NH, NH - 1)
            b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0).to(tl.float32)
            b_q = tl.load(q + tq * K + p_q, mask=m_q, other=0.0).to(tl.float32)
            tl.store(kn + tok * K + p_k, (b_k * b_rk[:, None]).to(kn.dtype.element_ty), mask=m_k)
            tl.store(qn + tq * K + p_q, (b_q * b_rq[:, None]).to(qn.dtype.element_ty), mask=m_q)
    tl.store(Aqk + tok * C + p_c, (b_qk * decay(b_G, C, False) * scale).to(Aqk.dtype.element_ty), mask=m_c)
    tl.debug_barrier()  # the rows and blocks of A each thread loads next were stored by the program's other threads
    solve_tril_blocks(A_tmp + tok * C, T_out + tok * C, H * C, t0, T, C, MP)
    tl.debug_barrier()  # T's blocks, stored by every thread, loaded whole
    b_T = tl.load(T_out + tok * C + p_c, mask=m_c, other=0.0)
    _wu(k, v, w, u, tok, t0, T, H, K, V, b_T, b_beta * tl.exp(b_G) * b_rk, b_beta, C, BK, BV, PREC)


def inputs(shape: tuple[int, ...], dtype: torch.dtype, device: str, nh: int = 1, norm: bool = False
           ) -> list[torch.Tensor]:
    """q [B,T,H,K], k [B,T·nh,H,K] (unit rows; with norm, as they come: N(0, 1) entries), v [B,T·nh,H,V],
    g [B,T,H] log-sigmoid, β [B,T·nh,H] ∈ [0, 2]."""
    B, T, H, K, V = shape
    gen = torch.Generator().manual_seed(0)

    def r(*s: int) -> torch.Tensor:
        return torch.randn(*s, generator=gen)

    def unit(x: torch.Tensor) -> torch.Tensor:
        return x if norm else torch.nn.functional.normalize(x, dim=-1)
    tensors = [unit(r(B, T, H, K)), unit(r(B, T * nh, H, K)), r(B, T * nh, H, V),
               torch.nn.functional.logsigmoid(r(B, T, H) + 3), 2 * torch.sigmoid(r(B, T * nh, H))]
    return [t.to(device, dtype if i < 3 else torch.float32).contiguous() for i, t in enumerate(tensors)]


def run(form: str, warps: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
        beta: torch.Tensor, nh: int, norm: bool = False) -> tuple[dict[str, torch.Tensor], Callable[[], object]]:
    """The form's outputs (as chunk_prepare's: G, Tinv, Aqk, w, u; with norm also the normalised qn and kn) and a
    call that recomputes them in place. With norm every form but `fused-blockwise` runs the norm pass first."""
    if norm and form != "fused-blockwise":
        normed: dict[str, torch.Tensor] = {}

        def normalise() -> None:
            normed.update(qn=l2norm_fwd(q, EPS), kn=l2norm_fwd(k, EPS))
        normalise()
        out, form_call = run(form, warps, normed["qn"], normed["kn"], v, g, beta, nh)

        def call() -> None:  # the norm pass, then the form on its outputs (the same buffers' values)
            normalise()
            form_call()
        return out | normed, call
    scale = q.shape[-1] ** -0.5
    if form == "kernels":
        def call() -> dict[str, torch.Tensor]:
            return chunk_prepare(q, k, v, g, beta, scale, nh)
        return call(), call
    B, T, H, K = k.shape
    V = v.shape[-1]
    NT = triton.cdiv(T, CHUNK)
    prec = precision(q.dtype, K, V)
    out = dict(G=torch.empty(B, T, H, dtype=torch.float32, device=q.device),
               Tinv=torch.empty(B, T, H, CHUNK, dtype=dot_operand_dtype(q.dtype, K, V), device=q.device))
    out.update(Aqk=torch.empty_like(out["Tinv"]), w=torch.empty_like(k), u=torch.empty_like(v))
    BK, BV = parallel_tiles(K, V)
    common = dict(H=H, K=K, C=CHUNK, BK=BK, PREC=prec, num_warps=warps, num_stages=2)
    if form == "wu-chunk":
        def call() -> None:
            chunk_kkt_solve_fwd_kernel[(NT, B * H)](k, g, beta, out["G"], out["Tinv"], out["G"], out["G"], T,
                                                    USE_G=True,
                                                    MP=solve_precision(prec), NH=nh, **common)
            wu_aqk_per_chunk_kernel[(NT, B * H)](q, k, v, beta, out["G"], out["Tinv"], out["w"], out["u"],
                                                 out["Aqk"], scale, T, V=V, BV=BV, NH=nh, **common)
    elif form == "fused":
        def call() -> None:
            prepare_fused_kernel[(NT, B * H)](q, k, v, g, beta, out["G"], out["Tinv"], out["w"], out["u"],
                                              out["Aqk"], scale, T, V=V, BV=BV, USE_G=True,
                                              MP=solve_precision(prec), NH=nh, **common)
    else:
        A_tmp = torch.empty(B, T, H, CHUNK, dtype=torch.float32, device=q.device)
        if norm:
            out.update(qn=torch.empty_like(q), kn=torch.empty_like(k))

        def call() -> None:
            prepare_blockwise_kernel[(NT, B * H)](q, k, v, g, beta, out["G"], out["Tinv"], A_tmp, out["w"], out["u"],
                                                  out["Aqk"], out.get("qn", q), out.get("kn", k), scale, T, V=V,
                                                  BV=BV, USE_G=True, MP=solve_precision(prec), NH=nh, NORM=norm,
                                                  **common)
    call()
    return out, call


def rel_error(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], names: Iterable[str] | None = None
              ) -> float:
    """max over the outputs (`names`, default all of ref's) of ‖got − ref‖ / ‖ref‖ (fp64)."""
    return max(((got[n].double() - ref[n].double()).norm() / ref[n].double().norm()).item()
               for n in (names or ref))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs=5, action="append", metavar=("B", "T", "H", "K", "V"),
                   help="a head shape (repeatable); default: the kernel benchmark's")
    p.add_argument("--nh", type=int, default=1, help="DeltaProduct's Householder factors a token")
    p.add_argument("--fp32", action="store_true", help="fp32 inputs too (on a GPU; the CPU runs only fp32)")
    p.add_argument("--norm", action="store_true",
                   help="q and k as they come, the training forward's q/k norm part of the pass (the docstring)")
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    shapes = args.shape or (GPU_SHAPES if cuda else CPU_SHAPES)
    dtypes = ((torch.bfloat16,) + ((torch.float32,) if args.fp32 else ())) if cuda else (torch.float32,)
    where = torch.cuda.get_device_name() if cuda else "CPU (Triton interpreter)"
    print(f"n_h = {args.nh}{'; q/k normalised in the pass' if args.norm else ''}; {where}; triton "
          f"{triton.__version__}, torch {torch.__version__}")
    print("| shape (B, T, H, K, V) | dtype | form | warps | GPU ms | max rel. error vs the kernels' |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shape in shapes:
        for dtype in dtypes:
            q, k, v, g, beta = inputs(tuple(shape), dtype, device, args.nh, args.norm)
            ref, call = run("kernels", 0, q, k, v, g, beta, args.nh, args.norm)
            name = f"{', '.join(map(str, shape))} | {str(dtype).split('.')[1]}"
            print(f"| {name} | kernels | autotuned | {gpu_ms(call):.4f} | – |" if cuda else
                  f"| {name} | kernels | autotuned | – | – |", flush=True)
            if args.norm:  # the package's NORM path (the forward alone's): normalised inside, no copies written
                def inside() -> dict[str, torch.Tensor]:
                    return chunk_prepare(q, k, v, g, beta, q.shape[-1] ** -0.5, args.nh, norm=True)
                err = rel_error(inside(), ref, ("G", "Tinv", "Aqk", "w", "u"))
                print(f"| {name} | kernels, norm inside, no copies | autotuned | "
                      f"{f'{gpu_ms(inside):.4f}' if cuda else '–'} | {err:.1e} |", flush=True)
            narrow = is_narrow(shape[3], shape[4])
            for form in ("wu-chunk", "fused", "fused-blockwise"):
                for warps in ((8,) if narrow or not cuda else (2, 4, 8)):  # narrow heads: the validated 8 warps
                    try:
                        out, call = run(form, warps, q, k, v, g, beta, args.nh, args.norm)
                    except Exception as e:  # noqa: BLE001 — a form that does not compile is a row, not the end
                        print(f"| {name} | {form} | {warps} | failed: {type(e).__name__} | – |", flush=True)
                        continue
                    ms = f"{gpu_ms(call):.4f}" if cuda else "–"
                    print(f"| {name} | {form} | {warps} | {ms} | {rel_error(out, ref):.1e} |", flush=True)


if __name__ == "__main__":
    main()
