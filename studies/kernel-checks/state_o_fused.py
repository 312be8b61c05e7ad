"""The forward with and without the state pass's fused-output candidates, timed and compared, through the package.

The forward state pass (kernels/triton/chunk_fwd.py `chunk_state_fwd_kernel`) walks the chunks holding h and v_new;
its `FUSE_O` candidates (tuning.fused_output_configs) compute o = scale e^G ⊙ (Q h) + Aqk v_new there as well, and
the output pass (`chunk_o_fwd_kernel`, which re-reads h and v_new) is not run. The launcher times each state
candidate with what it leaves to do and keeps the fastest. This runs the package's forward (chunk_fwd) twice per
shape on a fresh launcher: with the fused candidates named in tuning.EXCLUDE_ENV (the split form), then with them
offered, and prints the CUDA kernel time of each (torch.profiler, mean of 50 calls), the state pass's config the
launcher kept, whether o is the same bit for bit, and each o's error against the chunked PyTorch form in fp64
(kernels/chunk_torch.py).

    python3 studies/kernel-checks/state_o_fused.py                     # on a GPU: the benchmark's head shapes, bf16
    TRITON_INTERPRET=1 python3 studies/kernel-checks/state_o_fused.py  # on a CPU: small shapes, the first configs
"""
from __future__ import annotations

import os

import torch
from prepare_forms import CPU_SHAPES, inputs  # beside this script (its folder is on sys.path)
from solve_forms import gpu_ms

from deltamup.kernels import chunk_gated_delta_rule
from deltamup.kernels.triton import tuning
from deltamup.kernels.triton.chunk_fwd import chunk_fwd

GPU_SHAPES = ((8, 2048, 6, 64, 128), (8, 2048, 6, 96, 192), (8, 2048, 6, 128, 256), (8, 2048, 6, 192, 384),
              (4, 4096, 16, 128, 128))
STATE = "chunk_state_fwd_kernel"


def forward(x: list[torch.Tensor], fused: bool) -> tuple[torch.Tensor, str]:
    """o of the package's forward on a fresh launcher, the fused candidates offered or excluded, and the state
    pass's kept config."""
    q, k, v, g, beta = x
    K, V = k.shape[-1], v.shape[-1]
    BK, _ = tuning.state_blocks(K)
    names = [f"{STATE}@{tuning.config_text(c)}"
             for c in tuning.fused_output_configs(tuning.state_configs(K, BK, V, k.shape[0] * k.shape[2])[0])]
    os.environ[tuning.EXCLUDE_ENV] = "" if fused else ";".join(names)
    tuning._chosen.clear()
    o = chunk_fwd(q, k, v, g, beta, K**-0.5, None, False)[0]
    kept = [tuning.config_text(c) for key, c in tuning._chosen.items() if key[0] == STATE]
    return o, ", ".join(kept)


def main() -> None:
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    print(f"{torch.cuda.get_device_name() if cuda else 'CPU (Triton interpreter)'}; torch {torch.__version__}; "
          f"{str(dtype).split('.')[1]}")
    print("| shape (B, T, H, K, V) | split: GPU ms | state config | fused offered: GPU ms | state config kept | ratio "
          "| o bit for bit | error vs fp64 (split, offered) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in GPU_SHAPES if cuda else CPU_SHAPES:
        x = inputs(tuple(shape), dtype, device)
        exact = chunk_gated_delta_rule(*(t.double() for t in x), backend="torch")[0]
        rows = []
        for fused in (False, True):
            o, kept = forward(x, fused)
            ms = gpu_ms(lambda: chunk_fwd(*x, shape[3] ** -0.5, None, False)) if cuda else float("nan")
            err = ((o.double() - exact).norm() / exact.norm()).item()
            rows.append((o, kept, ms, err))
        (o0, kept0, ms0, err0), (o1, kept1, ms1, err1) = rows
        print(f"| {', '.join(map(str, shape))} | {ms0:.4f} | {kept0} | {ms1:.4f} | {kept1} | {ms1 / ms0:.2f} | "
              f"{torch.equal(o0, o1)} | {err0:.1e}, {err1:.1e} |", flush=True)
    os.environ.pop(tuning.EXCLUDE_ENV, None)


if __name__ == "__main__":
    main()
