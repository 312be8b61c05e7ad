"""Whole-model training throughput on a GPU: this project's Gated DeltaNet (eager and torch.compile) against the
same model built from fla 0.6.0's layers (GatedDeltaNetForCausalLM, with its fused RMSNorm, SwiGLU and
cross-entropy), in one run, on the same random tokens.

Default shape: width 1024, 8 layers, 6 heads (K 128, V 256), MLP ⌈8d/3⌉ = 2731, vocab 50304, tied embeddings,
batch 16 × 1024. 2731 is not a multiple of 8, which keeps eager cuBLAS off its Hopper GEMMs (on an H200 fla's eager
step spends about half its time in a pre-Hopper cutlass GEMM at 2731; Inductor pads such matmuls for ours);
`--mlp-hidden 2816` (fla's own rounding of 8d/3) compares both models without that.
Both train the same way: fp32 weights, bf16 autocast, fused AdamW (lr 1e-3, wd 0.1), gradient clipping at 1.0.
fla 0.6.0 refuses its gated backward on Hopper with Triton 3.4 ≤ version < 3.7.1 (fla-org/flash-linear-attention
issue 640, a precision bug fixed in Triton 3.7.1); the script bypasses that guard, so fla's step times the work, not
a verified gradient.

    python3 benchmarks/model_throughput.py --variants ours-compile fla --mlp-hidden 2816 --profile --out throughput.json

First measures the GPU's bf16 matmul peak (8192³ products), the reference of the "share of peak" column, and again
after each variant (a GPU that clocks down under sustained load shows it there; the share is of the higher). Prints one
row per variant as it finishes (a cut-off keeps the rows before it) and a table at the end: parameters; ms per
step as training runs (deltamup's train() syncs with the host once per log interval): the timed steps back to back,
one sync at the end, wall time / steps; the same with a sync after every step (median), whose difference is the
host's launch latency a sync exposes; tokens/s and model TFLOP/s (6 · params · tokens) from the former, and its
share of the measured peak; peak memory; seconds to the first step (compilation, autotuning); the loss at the first
and last back-to-back step; the config each Triton pass of ours took (`kernel_configs`, tuning.chosen()). --profile adds
the CUDA time per kernel of each variant, the same summed by category (matmul, delta rule, loss, short convolution,
optimizer, elementwise and norms, other), and the GPU's busy fraction (kernel time / step time; the rest is the GPU
waiting for the host).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

from deltamup.kernels.triton import tuning
from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.train import TrainConfig, loss_function, make_optimizer

if not __package__:  # run as a file: benchmarks/ is not installed, the repository root that holds it goes on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.kernels import cuda_times  # noqa: E402

StepFn = Callable[[Tensor, Tensor], Tensor]
OURS = ("ours", "ours-compile", "ours-blocks", "ours-cudagraphs", "ours-graphed", "ours-tuned")
MODEL_OPTIONS = {  # a variant's +suffixes: ModelConfig fields for our model
    "triton-conv": dict(conv_backend="triton"),  # the short convolutions through kernels/triton/short_conv.py
    "stacked-gates": dict(stack_gates=True),      # W_β x and W_α x as one GEMM over the stacked, padded weights
    "triton-loss": dict(loss_backend="triton"),   # the readout and its cross-entropy in one op, gradient in the forward
}


def variant_name(text: str) -> str:
    """A --variants entry: fla, or one of OURS with any of MODEL_OPTIONS as +suffixes ("ours-compile+triton-conv")."""
    base, *options = text.split("+")
    known = all(o in MODEL_OPTIONS for o in options) and len(set(options)) == len(options)
    if text == "fla" or (base in OURS and known):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: fla, or one of {', '.join(OURS)} with any of "
                                     f"{', '.join('+' + o for o in MODEL_OPTIONS)}")


def ours(args: argparse.Namespace, variant: str) -> tuple[nn.Module, StepFn]:
    """variant: ours (eager), ours-compile (TrainConfig(compile=True): the whole model one graph), ours-blocks
    (TrainConfig(compile="blocks"): one graph for every block, the cross-entropy apart; its first step is the
    regional compile's cold cost), ours-cudagraphs (torch.compile's "reduce-overhead" mode: the compiled forward and
    backward replayed as CUDA graphs), ours-graphed (the whole step, the compiled model with clipping and fused
    AdamW, one CUDA graph: graphed_step), ours-tuned (ours-compile with Inductor tuning its own pointwise and
    reduction kernels' launch configs: coordinate descent and max-autotune for pointwise; a longer first step).
    Any of them with +suffixes of MODEL_OPTIONS (e.g. +triton-conv: ModelConfig(conv_backend="triton"), the short
    convolutions through their Triton kernels instead of the PyTorch form)."""
    variant, *options = variant.split("+")
    model_options = {k: v for o in options for k, v in MODEL_OPTIONS[o].items()}
    config = ModelConfig(kind="gdn", width=args.width, depth=args.depth, heads=args.heads,
                         vocab_size=args.vocab, tie_embeddings=True, mlp_ratio=args.mlp_hidden / args.width,
                         **model_options)
    assert config.mlp_hidden == args.mlp_hidden
    model = build_model(config, "gdn-mup", "adamw", seed=0).cuda()
    if options:
        torch._dynamo.reset()  # its own graphs, whatever a variant before it compiled
    compile_mode = {"ours-compile": True, "ours-blocks": "blocks", "ours-graphed": True, "ours-tuned": True
                    }.get(variant, False)
    train_config = TrainConfig(lr=args.lr, weight_decay=0.1, compile=compile_mode)
    loss_fn, optimizer = loss_function(train_config), make_optimizer(model, "gdn-mup", train_config)
    if variant == "ours-cudagraphs":
        loss_fn = torch.compile(loss_fn, mode="reduce-overhead")
    if variant == "ours-graphed":
        return model, graphed_step(model, optimizer, loss_fn, args)

    def step(inputs: Tensor, targets: Tensor) -> Tensor:
        loss = loss_fn(model, (inputs, targets))
        return update(model, optimizer, loss)
    if variant == "ours-tuned":  # compiled on the first call, forward and backward, inside the patch
        # Dynamo reuses a graph compiled earlier in the process for any model of the same structure (parameters are
        # graph inputs), and the Inductor config is not among its guards: without the reset ours-tuned would run
        # ours-compile's code.
        torch._dynamo.reset()
        step = torch._inductor.config.patch(coordinate_descent_tuning=True, max_autotune_pointwise=True)(step)
    return model, step


def graphed_step(model: nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[nn.Module, tuple[Tensor, Tensor]], Tensor], args: argparse.Namespace) -> StepFn:
    """The whole training step (forward and backward, clipping, fused AdamW) as one CUDA graph: what is left of a
    step's time when the host launches nothing. Its first call trains 3 steps launched as usual on a side stream
    (compilation, autotuning, the optimizer's state on the GPU), then captures one step; every call replays it on
    the batch copied into the graph's static inputs (so the first call trains 3 steps more than the others)."""
    for group in optimizer.param_groups:
        group["capturable"] = True  # the step count and bias corrections on the GPU, no host sync
    inputs = torch.zeros(args.batch, args.seq_len, dtype=torch.long, device="cuda")
    targets = torch.zeros_like(inputs)
    graph, loss = None, None

    def step(x: Tensor, y: Tensor) -> Tensor:
        nonlocal graph, loss
        inputs.copy_(x)
        targets.copy_(y)
        if graph is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    update(model, optimizer, loss_fn(model, (inputs, targets)))
            torch.cuda.current_stream().wait_stream(side)
            optimizer.zero_grad(set_to_none=True)  # the captured backward allocates the gradients it then rewrites
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                loss = loss_fn(model, (inputs, targets))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        graph.replay()
        return loss.detach()
    return step


def fla(args: argparse.Namespace) -> tuple[nn.Module, StepFn]:
    import fla.ops.common.chunk_o
    from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM

    fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 = True  # bypass the Hopper guard (fla issue 640): times the work
    config = GatedDeltaNetConfig(hidden_size=args.width, num_hidden_layers=args.depth, num_heads=args.heads,
                                 head_dim=round(0.75 * args.width / args.heads), expand_v=2.0,
                                 intermediate_size=args.mlp_hidden, vocab_size=args.vocab,
                                 tie_word_embeddings=True, use_short_conv=True, conv_size=4)
    model = GatedDeltaNetForCausalLM(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)

    def step(inputs: Tensor, targets: Tensor) -> Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=inputs, labels=targets).loss
        return update(model, optimizer, loss)
    return model, step


def update(model: nn.Module, optimizer: torch.optim.Optimizer, loss: Tensor) -> Tensor:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()


def measure(name: str, args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    tuning.forget()  # this variant's launches choose their configs afresh and the row names them
    model, step = fla(args) if name == "fla" else ours(args, name)
    params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator(device="cuda").manual_seed(0)
    tokens = torch.randint(0, args.vocab, (args.warmup + args.steps, args.batch, args.seq_len + 1),
                           device="cuda", generator=gen)
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    synced = []  # every step followed by a host sync: its wall time exposes the host's launch latency
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        step(tokens[i, :, :-1], tokens[i, :, 1:])
        torch.cuda.synchronize()
        synced.append(time.perf_counter() - t0)
        if i == 0:
            first = time.perf_counter() - start
    # as deltamup's train() runs: steps back to back, the host queueing ahead, one sync at the end
    t0 = time.perf_counter()
    losses = [step(tokens[args.warmup + i, :, :-1], tokens[args.warmup + i, :, 1:]).clone()  # CUDA graphs reuse
              for i in range(args.steps)]                                                       # their outputs
    torch.cuda.synchronize()
    ms = 1e3 * (time.perf_counter() - t0) / args.steps
    losses = torch.stack(losses).tolist()
    n_tokens = args.batch * args.seq_len
    row = {"variant": name, "params": params, "ms_per_step": ms, "tokens_per_s": n_tokens / ms * 1e3,
           "tflops": 6 * params * n_tokens / ms * 1e-9,
           "ms_per_step_synced": 1e3 * statistics.median(synced[args.warmup:]),
           "peak_gb": torch.cuda.max_memory_allocated() / 2**30, "first_step_s": first, "loss_first": losses[0],
           "loss_last": losses[-1], "kernel_configs": tuning.chosen()}
    if args.profile:
        row["profile"], row["categories"] = profile(step, tokens[-1])
        row["gpu_busy"] = sum(ms for _, ms in row["profile"]) / row["ms_per_step"]
    return row


CATEGORIES = (  # (category, substrings of a kernel's name), first match wins
    ("matmul", ("nvjet", "gemm", "cutlass", "xmma", "cublas")),
    ("delta rule", ("chunk_", "solve", "wy_", "kkt", "fused_recurrent", "causal_conv1d")),
    ("loss", ("log_softmax", "cross_entropy", "nll_loss", "linear_ce")),
    ("short convolution (Triton)", ("short_conv",)),
    ("optimizer", ("multi_tensor_apply", "adam")),
    ("elementwise, norms (Inductor / ATen)", ("triton_", "elementwise", "reduce", "norm", "swiglu", "Cat")),
)


def category(kernel: str) -> str:
    return next((name for name, keys in CATEGORIES if any(k in kernel for k in keys)), "other")


def profile(step: StepFn, tokens: Tensor, top: int = 60) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """CUDA ms per training step of the `top` most expensive kernels (the rest summed as "other"), and of every
    kernel summed by category."""
    times = cuda_times(lambda: step(tokens[:, :-1], tokens[:, 1:]), reps=3)
    by_category: dict[str, float] = {}
    for name, ms in times:
        by_category[category(name)] = by_category.get(category(name), 0.0) + ms
    kernels = [(name, round(ms, 3)) for name, ms in times[:top]] + [("other", round(sum(t for _, t in times[top:]), 3))]
    return kernels, {name: round(ms, 3) for name, ms in sorted(by_category.items(), key=lambda kv: -kv[1])}


def matmul_peak(n: int = 8192, reps: int = 30) -> float:
    """Measured bf16 matmul TFLOP/s: the median of `reps` n × n × n products timed with CUDA events."""
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(5):
        a @ b
    times = []
    for _ in range(reps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return 2 * n**3 / statistics.median(times) * 1e-9


def table(rows: list[dict], peak: float | None) -> str:
    """The rows as Markdown; `peak`: the bf16 matmul TFLOP/s measured before the first variant. Each row's 6ND rate
    is a share of the higher of it and the peak measured right after that variant (a GPU that clocks down under
    load is not credited for it)."""
    lines = ["| variant | params | ms/step | ms/step, synced each step | tokens/s | TFLOP/s (6ND) | "
             "share of the measured matmul peak | matmul peak after it | GPU busy | peak GiB | first step s | "
             "loss first → last |",
             "|" + " --- |" * 12]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['variant']} | {r['error']} |" + " |" * 10)
            continue
        busy = f"{r['gpu_busy']:.0%}" if "gpu_busy" in r else "–"
        after = r.get("matmul_peak_after")
        reference = max(x for x in (peak, after) if x) if (peak or after) else None
        share = f"{r['tflops'] / reference:.0%} of {reference:.0f}" if reference else "–"
        lines.append(f"| {r['variant']} | {r['params'] / 1e6:.1f}M | {r['ms_per_step']:.1f} | "
                     f"{r['ms_per_step_synced']:.1f} | "
                     f"{r['tokens_per_s']:,.0f} | {r['tflops']:.0f} | {share} | "
                     f"{f'{after:.0f}' if after else '–'} | {busy} | {r['peak_gb']:.1f} | "
                     f"{r['first_step_s']:.0f} | {r['loss_first']:.3f} → {r['loss_last']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", default=["ours", "ours-compile", "fla"], type=variant_name,
                   help=f"fla, or one of {', '.join(OURS)}, each with any of "
                   f"{', '.join('+' + o for o in MODEL_OPTIONS)} (ModelConfig fields)")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--mlp-hidden", type=int, help="SwiGLU width of both models (default ⌈8d/3⌉, this project's; "
                   "fla's own default rounds 8d/3 up to a multiple of 256)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation, autotuning, caches)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--profile", action="store_true", help="add CUDA time per kernel (3 steps) to each row")
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args()
    args.mlp_hidden = args.mlp_hidden or -(-8 * args.width // 3)
    if not torch.cuda.is_available():
        raise SystemExit("model_throughput: needs a CUDA GPU")
    peak = matmul_peak()  # the reference for "share of peak", measured in this run on this GPU
    print(f"measured bf16 matmul peak: {peak:.0f} TFLOP/s (8192³, median of 30)", flush=True)
    rows = []
    for name in args.variants:
        try:
            rows.append(measure(name, args))
        except Exception as e:  # one variant failing (fla on an unsupported stack) keeps the others
            rows.append({"variant": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"})
        rows[-1]["matmul_peak_after"] = matmul_peak()  # the clocks after this variant's steps
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("profile", "categories")}), flush=True)
        for kernel, ms in rows[-1].get("profile", []):
            print(f"  {ms:8.3f} ms  {kernel}", flush=True)
        for name, ms in rows[-1].get("categories", {}).items():
            print(f"  {ms:8.3f} ms  [{name}]", flush=True)
        torch.cuda.empty_cache()
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"args": vars(args), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "matmul_peak_tflops": peak, "rows": rows}, f, indent=1)
    print(table(rows, peak))


if __name__ == "__main__":
    main()
