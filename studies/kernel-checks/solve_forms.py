"""Forms of the per-chunk UT solve, timed and checked on the GPU, and where its time goes.

The forward's `chunk_kkt_solve_fwd_kernel` builds A = strict_lower(β K Kᵀ ⊙ D) [64, 64] per chunk and inverts I + A
(kernels/triton/solve.py): first the four 16×16 diagonal blocks by forward substitution, then the rest in four
[64, 64] products. On the whole tile, the substitution's 15 sequential steps were where the kernel's time went (its
time hardly depended on K); how much they take in the stacked form is what the cuts below measure. Forms of that
substitution:
- `dense`: on the whole [64, 64] tile, all four blocks at once, one row a step (4096 elements a step);
- `blocks`: on the four blocks stacked as [4, 16, 16] (1024 elements a step, a quarter of the work; the product's);
- `rows`: as `blocks`, but each step loads row i of every block from A, stored to memory first (as fla's solve
  does), instead of taking it out of the register tile with a masked reduction over the whole stack;
- `blockwise`: the package's BLOCKWISE candidate (solve.py, solve_tril_blocks): `rows`, then the blocks below the
  diagonal by block forward substitution from A's 16×16 blocks loaded from memory, sixteen 16×16 products in place of
  the merge's four 64×64 ones;
- `squares`: no substitution: with N the four diagonal blocks (strictly lower, so N¹⁶ = 0),
  (I + N)⁻¹ = (I − N)(I + N²)(I + N⁴)(I + N⁸), six [64, 64] products on the tensor cores (a block-diagonal product
  stays block-diagonal; 64-wide dots, not the 16-wide ones Triton 3.6 miscompiles on Hopper), at the merge's
  input precision; `squares3` the same at tf32x3 (three tf32 products a product: about fp32's accuracy);
- `merge2`: `blocks` with the merge's four products in the order (I − N)(I + N²) D instead of solve.py's
  (I − N(I − N(I − N))) D: the same products, five [64, 64] tiles live instead of three (at K ≥ 96 its 2-warp kernel
  spills 456–480 bytes a thread where solve.py's spills 32–56: benchmarks/kernel-resources.md);
- `powers`: no blocks at all: (I + A)⁻¹ = (I − A)(I + A²)(I + A⁴)(I + A⁸)(I + A¹⁶)(I + A³²), ten [64, 64]
  products and no merge (the powers of A may grow where the inverse does not: the error column says whether they
  cancel well enough).
Two cuts of the kernel, not solves, say where its time goes: `kkt` stores A as T (K Kᵀ, gates, β, the loads and
stores, no inverse), `diag` stores the block-diagonal inverse D (the substitution, without the four merge products).
Each form runs inside the same kernel (K Kᵀ, gates, β, the merge products, the store) at each warp count; the time
is CUDA kernel time from the profiler. Error: max |T − T_ref| / max |T_ref| against (I + A)⁻¹ in fp64 from the same
A, bf16 k, log-sigmoid gates, β ∈ [0, 2] (none for the two cuts).

    python3 studies/kernel-checks/solve_forms.py                 # on a GPU; TRITON_INTERPRET=1 on a CPU (small)
    python3 studies/kernel-checks/solve_forms.py --forms blocks squares squares3 powers --bf16-only
"""
from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

from deltamup.kernels.triton.solve import (block_diag, inv_diag_blocks, inv_diag_rows, merge_blocks, solve_tril,
                                           solve_tril_blocks)
from deltamup.kernels.triton.utils import decay, mm, tile

CUTS = ("kkt", "diag")  # parts of the kernel, timed to say where its time goes; not solves
FORMS = ("dense", "blocks", "rows", "blockwise", "squares", "squares3", "merge2", "powers") + CUTS


@triton.jit
def _inv_diag_dense(a, C: tl.constexpr):
    """The `dense` form: as solve.py's before the stacked form, on the [C, C] tile (see the module docstring)."""
    r = tl.arange(0, C)
    same = (r[:, None] // 16) == (r[None, :] // 16)
    s = tl.sum(tl.reshape(tl.where(same, a, 0.0), [C // 16, 16, C]), axis=0)
    ri = tl.arange(0, 16)
    u = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    for i in tl.static_range(1, 16):
        a_i = tl.sum(tl.where(ri[:, None] == i, s, 0.0), axis=0)
        d_i = tl.where(r % 16 == i, 1.0, -tl.sum(u * a_i[None, :], axis=1))
        u = tl.where((r[None, :] % 16 == i) & same, d_i[:, None], u)
    return tl.trans(u)


@triton.jit
def _inv_diag_squares(a, C: tl.constexpr, MP: tl.constexpr):
    """The `squares` form: the block-diagonal (I + N)⁻¹ of a's 16×16 diagonal blocks N as (I − N)(I + N²)(I + N⁴)
    (I + N⁸), [C, C] products at input precision MP."""
    r = tl.arange(0, C)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    n = tl.where((r[:, None] // 16) == (r[None, :] // 16), a, 0.0)
    n2 = tl.dot(n, n, input_precision=MP)
    n4 = tl.dot(n2, n2, input_precision=MP)
    y = tl.dot(tl.dot(eye - n, eye + n2, input_precision=MP), eye + n4, input_precision=MP)
    return tl.dot(y, eye + tl.dot(n4, n4, input_precision=MP), input_precision=MP)


@triton.jit
def _inv_powers(a, C: tl.constexpr, MP: tl.constexpr):
    """The `powers` form: (I + a)⁻¹ = (I − a)(I + a²)(I + a⁴)…(I + a^(C/2)) for strictly lower a (a^C = 0)."""
    r = tl.arange(0, C)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    p = tl.dot(a, a, input_precision=MP)
    y = tl.dot(eye - a, eye + p, input_precision=MP)
    for _ in tl.static_range(2, 6):  # a⁴ … a³² (C = 64)
        p = tl.dot(p, p, input_precision=MP)
        y = tl.dot(y, eye + p, input_precision=MP)
    return y


@triton.jit
def _merge2(a, d, C: tl.constexpr, MP: tl.constexpr):
    """The `merge2` form of merge_blocks: (I − N)(I + N²) d, N = d·a_off (see the module docstring)."""
    r = tl.arange(0, C)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    n = tl.dot(d, tl.where((r[:, None] // 16) > (r[None, :] // 16), a, 0.0), input_precision=MP)
    m = tl.dot(eye - n, eye + tl.dot(n, n, input_precision=MP), input_precision=MP)
    return tl.dot(m, d, input_precision=MP)


@triton.jit
def kkt_solve_form_kernel(k, g, beta, A_out, T_out, T, H: tl.constexpr, K: tl.constexpr, C: tl.constexpr,
                          BK: tl.constexpr, FORM: tl.constexpr, MP: tl.constexpr):
    """Grid (NT, B·H): A [B,T,H,C] fp32 and T = (I + A)⁻¹ [B,T,H,C] (T_out's dtype), g already cumulative."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    t0 = i_t * C
    rows = t0 + tl.arange(0, C)
    tok = i_b * T * H + i_h
    b_G = tl.load(g + tok + rows * H, mask=rows < T, other=0.0)
    b_kk = tl.zeros([C, C], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        p_k, m_k = tile(t0, T, H, K, i_k * BK, C, BK)
        b_k = tl.load(k + tok * K + p_k, mask=m_k, other=0.0)
        b_kk += mm(b_k, tl.trans(b_k), k, "half")
    b_beta = tl.load(beta + tok + rows * H, mask=rows < T, other=0.0).to(tl.float32)
    b_a = b_kk * decay(b_G, C, True) * b_beta[:, None]
    p_c, m_c = tile(t0, T, H, C, 0, C, C)
    tl.store(A_out + tok * C + p_c, b_a, mask=m_c)
    if FORM == "dense":
        b_T = merge_blocks(b_a, _inv_diag_dense(b_a, C), C, MP)
    elif FORM == "rows":
        tl.debug_barrier()  # the program's other threads stored the rows it loads
        b_T = merge_blocks(b_a, block_diag(inv_diag_rows(A_out + tok * C, H * C, t0, T, C), C), C, MP)
    elif FORM == "blockwise":  # stores T itself
        tl.debug_barrier()
        solve_tril_blocks(A_out + tok * C, T_out + tok * C, H * C, t0, T, C, MP)
    elif FORM == "squares":
        b_T = merge_blocks(b_a, _inv_diag_squares(b_a, C, MP), C, MP)
    elif FORM == "squares3":
        b_T = merge_blocks(b_a, _inv_diag_squares(b_a, C, "tf32x3"), C, MP)
    elif FORM == "merge2":
        b_T = _merge2(b_a, inv_diag_blocks(b_a, C), C, MP)
    elif FORM == "powers":
        b_T = _inv_powers(b_a, C, MP)
    elif FORM == "kkt":
        b_T = b_a
    elif FORM == "diag":
        b_T = inv_diag_blocks(b_a, C)
    else:
        b_T = solve_tril(b_a, C, MP)
    if FORM != "blockwise":
        tl.store(T_out + tok * C + p_c, b_T.to(T_out.dtype.element_ty), mask=m_c)


def run(form: str, warps: int, k: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor, callable]:
    B, T, H, K = k.shape
    A = torch.empty(B, T, H, 64, dtype=torch.float32, device=k.device)
    Tinv = torch.empty(B, T, H, 64, dtype=k.dtype, device=k.device)
    mp = "ieee" if k.dtype == torch.float32 else "tf32"

    def call() -> None:
        kkt_solve_form_kernel[(triton.cdiv(T, 64), B * H)](k, g, beta, A, Tinv, T, H=H, K=K, C=64,
                                                            BK=min(64, K), FORM=form, MP=mp, num_warps=warps)
    call()
    return A, Tinv, call


def error(A: torch.Tensor, Tinv: torch.Tensor) -> float:
    """max |T − (I + A)⁻¹| / max |(I + A)⁻¹| over the chunks, in fp64."""
    B, T, H, C = A.shape
    a = A.double().view(B, T // C, C, H, C).permute(0, 3, 1, 2, 4)
    ref = torch.linalg.inv(torch.eye(C, dtype=torch.float64, device=A.device) + a)
    got = Tinv.double().view(B, T // C, C, H, C).permute(0, 3, 1, 2, 4)
    return ((got - ref).abs().max() / ref.abs().max()).item()


def gpu_ms(call: callable, reps: int = 50) -> float:
    """Mean CUDA kernel time of one call (torch.profiler)."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    return sum(e.device_time_total for e in prof.key_averages()) / reps / 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs=4, default=None, metavar=("B", "T", "H", "K"))
    p.add_argument("--forms", nargs="+", choices=FORMS, default=FORMS)
    p.add_argument("--bf16-only", action="store_true", help="on a GPU, leave out the fp32 rows")
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    B, T, H, K = args.shape or ((8, 2048, 6, 64) if cuda else (1, 128, 2, 32))
    gen = torch.Generator(device="cpu").manual_seed(0)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, generator=gen) + 3).view(B, T // 64, 64, H).cumsum(2)
    beta = 2 * torch.rand(B, T, H, generator=gen)
    dtypes = ((torch.bfloat16,) if args.bf16_only else (torch.bfloat16, torch.float32)) if cuda else (torch.float32,)
    print(f"B, T, H, K = {B}, {T}, {H}, {K}; {torch.cuda.get_device_name() if cuda else 'CPU (interpreter)'}")
    print("| form | dtype | warps | GPU ms | max rel. error vs fp64 |\n| --- | --- | --- | --- | --- |")
    for dtype in dtypes:
        kk = k.to(device, dtype)
        gg, bb = g.reshape(B, T, H).to(device).contiguous(), beta.to(device)
        for form in args.forms:
            for warps in ((1, 2, 4, 8) if cuda else (4,)):
                try:
                    A, Tinv, call = run(form, warps, kk, gg, bb)
                except Exception as e:  # noqa: BLE001 — a form that does not compile is a row, not the end
                    print(f"| {form} | {dtype} | {warps} | failed: {type(e).__name__} | – |")
                    continue
                ms = f"{gpu_ms(call):.4f}" if cuda else "–"
                err = f"{error(A, Tinv):.1e}" if form not in CUTS else "– (a cut)"
                print(f"| {form} | {str(dtype).split('.')[1]} | {warps} | {ms} | {err} |", flush=True)


if __name__ == "__main__":
    main()
