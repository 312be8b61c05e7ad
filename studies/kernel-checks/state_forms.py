"""The forward through each set of the state pass's fused candidates, timed and compared, through the package.

The forward state pass (kernels/triton/chunk_fwd.py `chunk_state_fwd_kernel`) walks the chunks holding h and v_new.
Its fused candidates (tuning.forward_state_candidates) move more of the forward into that walk: FUSE_O the output
(the output pass is not run), FUSE_U u = T (β ⊙ V) (the per-chunk pass writes no u), FUSE_W w h as T (β e^G ⊙ K h)
(no w read); at one stage an SM holds two programs of the walk instead of one. The launcher times each
candidate with the passes it leaves before and after it and keeps the fastest.
This runs the package's forward (chunk_fwd) on a fresh launcher per shape and form, the state pass offered only
that form's candidates:
- `split`: the split pass's own candidates (tuning.state_configs; the per-chunk pass, the walk, the output pass);
- `O`: the FUSE_O candidates at 2 and 3 stages as well (the package before FUSE_U / FUSE_W and one stage);
- `O+1`: the one-stage FUSE_O candidate as well (two programs an SM: tuning.one_stage_output_configs);
- `O,U,W`: the launcher's candidates (the package as it runs in training: the split pass's first and the fused
  ones, tuning.forward_state_candidates);
- `alone`: a forward without save (no h, v_new or w stored for a backward; FUSE_O candidates only), as the package
  runs under torch.no_grad.
It prints the CUDA kernel time of each (torch.profiler, mean of 50 calls), the ratio to `O`, the state config kept,
whether o is the same bit for bit as `split`'s, and o's error against the chunked PyTorch form in fp64
(kernels/chunk_torch.py).

    python3 studies/kernel-checks/state_forms.py                     # on a GPU: the benchmark's head shapes, bf16
    python3 studies/kernel-checks/state_forms.py --nh 2              # DeltaProduct_2 at width 1024's heads
    TRITON_INTERPRET=1 python3 studies/kernel-checks/state_forms.py  # on a CPU: small shapes, the first configs
"""
from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

import torch
from prepare_forms import CPU_SHAPES, inputs  # beside this script (its folder is on sys.path)
from solve_forms import gpu_ms

from deltamup.kernels import chunk_gated_delta_product
from deltamup.kernels.triton import chunk_fwd as forward_module
from deltamup.kernels.triton import tuning
from deltamup.kernels.triton.chunk_fwd import chunk_fwd

GPU_SHAPES = ((8, 2048, 6, 64, 128), (8, 2048, 6, 96, 192), (8, 2048, 6, 128, 256), (8, 2048, 6, 192, 384),
              (4, 4096, 16, 128, 128))
STATE = "chunk_state_fwd_kernel"
FORMS = {  # the state candidates each form offers, from the pass's own (tuning.state_configs)
    "split": lambda c: c,
    "O": lambda c: c + tuning.fused_output_configs(c),
    "O+1": lambda c: c + tuning.fused_output_configs(c) + tuning.one_stage_output_configs(c),
    "O,U,W": tuning.forward_state_candidates,
    "alone": tuning.forward_state_candidates,
}


def offered(form: str) -> Callable[..., list[dict[str, int]]]:
    """chunk_fwd's forward_state_candidates for `form`: its candidates, the FUSE_O ones without save."""
    def candidates(configs: list[dict[str, int]], save: bool = True) -> list[dict[str, int]]:
        every = FORMS[form](configs)
        return every if save else [c for c in every if c.get("FUSE_O")]
    return candidates


def forward(x: list[torch.Tensor], nh: int, form: str) -> tuple[torch.Tensor, str, Callable[[], object]]:
    """o of the package's forward in `form` on a fresh launcher, the state pass's kept config, and the call."""
    q, k, v, g, beta = x
    forward_module.forward_state_candidates = offered(form)
    tuning.forget()
    call = functools.partial(chunk_fwd, q, k, v, g, beta, k.shape[-1] ** -0.5, None, False, nh, save=form != "alone")
    o = call()[0]
    return o, ", ".join(tuning.config_text(c) for key, c in tuning._chosen.items() if key[0] == STATE), call


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nh", type=int, default=1, help="DeltaProduct's n_h (on a GPU: width 1024's heads)")
    p.add_argument("--shape", type=int, nargs=5, metavar=("B", "T", "H", "K", "V"), help="one shape instead")
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    shapes = [tuple(args.shape)] if args.shape else GPU_SHAPES if cuda else CPU_SHAPES
    if cuda and args.nh > 1 and not args.shape:
        shapes = [(8, 2048, 6, 128, 256)]
    print(f"n_h = {args.nh}; {torch.cuda.get_device_name() if cuda else 'CPU (Triton interpreter)'}; "
          f"torch {torch.__version__}; {str(dtype).split('.')[1]}")
    print("| shape (B, T, H, K, V) | form | GPU ms | / `O` | state config kept | o bit for bit with `split` "
          "| error vs fp64 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for shape in shapes:
        x = inputs(tuple(shape), dtype, device, args.nh)
        exact = chunk_gated_delta_product(*(t.double() for t in x), args.nh, backend="torch")[0]
        rows = {}
        for form in FORMS:
            o, kept, call = forward(x, args.nh, form)
            ms = gpu_ms(call) if cuda else float("nan")
            rows[form] = (o, kept, ms, ((o.double() - exact).norm() / exact.norm()).item())
        for form, (o, kept, ms, err) in rows.items():
            print(f"| {', '.join(map(str, shape))} | `{form}` | {ms:.4f} | {ms / rows['O'][2]:.2f} | {kept} | "
                  f"{torch.equal(o, rows['split'][0])} | {err:.1e} |", flush=True)
    forward_module.forward_state_candidates = tuning.forward_state_candidates


if __name__ == "__main__":
    main()
