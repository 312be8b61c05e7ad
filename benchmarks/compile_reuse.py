"""What a compiled trial's first step costs with and without torch.compile's caches (docs/sweeps-compile.md): the
cases a sweep's trials meet, each a compiled run of a few steps (TrainConfig(compile=True), the whole model one
graph, or with --compile blocks TrainConfig(compile="blocks"), one graph shared by the blocks) with its
first_step_seconds (loop start to the end of step 0, synced: compile + autotune + one step) and its compile-cache
lookups.

    cold            a new process, an empty cache folder (what every trial paid before the compile warm-up)
    cold, 2nd graph the same process, then a model 16 wider (another graph): a compile without the process's
                    one-time start-up
    warm            a new process on the folder the cold one filled (a trial after the warm-up: Dynamo traces
                    again, Inductor and AOTAutograd load)
    same process    then a new model of the same shape (another seed and LR: a trial in a reused Ray actor)
    same process, other multipliers   then the SP model of that shape (its forward multipliers are buffers, inputs
                    of the same graph: nothing to compile)
    same process, 2nd graph on disk   then the wider model (a reused actor switching graphs after the warm-up)

    python3 benchmarks/compile_reuse.py --out benchmarks/compile-reuse-gpu.md       # GPU: the 8-layer study's shape
    python3 benchmarks/compile_reuse.py --preset tiny                               # CPU: 1 layer, width 32
    python3 benchmarks/compile_reuse.py --preset tiny-8l --compile blocks           # CPU: 8 layers, by block

Presets: study (default on a GPU): gdn, width 256, 8 layers, 6 heads, batch 16 × 1024, bf16, the Triton kernels;
tiny (default on a CPU): width 32, 1 layer, 2 heads, batch 2 × 32, the torch chunk kernel; tiny-8l: tiny with
8 layers. The cache folder is a new temporary one (--cache DIR to keep it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.compile_cache import use_cache
from deltamup.scaling.train import TrainConfig, train

PRESETS = {"study": dict(width=256, depth=8, heads=6, batch_size=16, seq_len=1024),
           "tiny": dict(width=32, depth=1, heads=2, batch_size=2, seq_len=32),
           "tiny-8l": dict(width=32, depth=8, heads=2, batch_size=2, seq_len=32)}
MODES = {"model": True, "blocks": "blocks"}  # --compile: TrainConfig.compile
# (label, parametrization, seed, lr, width added) per run: the child processes' cases, in order
COLD = [("cold", "gdn-mup", 0, 1e-3, 0), ("cold, 2nd graph", "gdn-mup", 0, 1e-3, 16)]
WARM = [("warm", "gdn-mup", 0, 1e-3, 0), ("same process", "gdn-mup", 1, 2e-3, 0),
        ("same process, other multipliers", "sp", 0, 1e-3, 0),
        ("same process, 2nd graph on disk", "gdn-mup", 0, 1e-3, 16)]
COLUMNS = ["case", "first_step_seconds", "then s/step", "fx_hit", "fx_miss", "aot_hit", "aot_miss", "aot_bypass"]


def run_case(preset: dict, parametrization: str, seed: int, lr: float, wider: int, steps: int, mode: str) -> dict:
    """One compiled run in this process (the preset's width + `wider`): its first_step_seconds, later steps' mean and
    cache lookups."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = ModelConfig(kind="gdn", width=preset["width"] + wider, depth=preset["depth"], heads=preset["heads"],
                         base_width=preset["width"])
    model = build_model(config, parametrization, "adamw", seed=seed).to(device)
    generator = torch.Generator().manual_seed(seed)
    shape = (preset["batch_size"], preset["seq_len"] + 1)
    batches = ((t[:, :-1], t[:, 1:]) for t in iter(lambda: torch.randint(0, config.vocab_size, shape,
                                                                          generator=generator), None))
    result = train(model, parametrization, TrainConfig(lr=lr, steps=steps, log_every=steps, compile=MODES[mode]),
                   batches, device=device)
    return {"first_step_seconds": result.first_step_seconds,
            "then s/step": (result.seconds - result.first_step_seconds) / (steps - 1), **result.compile_cache}


def child(args: argparse.Namespace) -> None:
    """Runs one process's cases on --cache, printing one JSON line per case."""
    use_cache(args.cache)
    torch.set_num_threads(args.threads)
    for label, parametrization, seed, lr, wider in (COLD if args.child == "cold" else WARM):
        row = run_case(PRESETS[args.preset], parametrization, seed, lr, wider, args.steps, args.compile)
        print(json.dumps({"case": label, **row}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), help="model and batch (default: study on a GPU, else tiny)")
    p.add_argument("--steps", type=int, default=5, help="steps per case (≥ 2)")
    p.add_argument("--compile", choices=sorted(MODES), default="model",
                   help="what one graph is: the whole model (compile: true) or a block (compile: blocks)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (a sweep trial's: resources.cpu)")
    p.add_argument("--cache", help="the cache folder (default: a new temporary one)")
    p.add_argument("--out", help="also write the table as markdown here")
    p.add_argument("--child", choices=["cold", "warm"], help=argparse.SUPPRESS)
    args = p.parse_args()
    args.preset = args.preset or ("study" if torch.cuda.is_available() else "tiny")
    if args.steps < 2:
        raise SystemExit("--steps must be at least 2")
    if args.child:
        return child(args)
    cache = Path(args.cache or tempfile.mkdtemp(prefix="compile-reuse-"))
    rows = []
    for which in ("cold", "warm"):
        cmd = [sys.executable, __file__, "--child", which, "--preset", args.preset, "--steps", str(args.steps),
               "--threads", str(args.threads), "--cache", str(cache), "--compile", args.compile]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        for row in rows[-(len(COLD) if which == "cold" else len(WARM)):]:
            print(row, flush=True)
    cpu = f"{os.cpu_count()} CPU cores ({platform.machine()})"
    device = f"{torch.cuda.get_device_name()}, {cpu}" if torch.cuda.is_available() else cpu
    lines = ["# torch.compile reuse: a compiled trial's first step, cold, warm on disk and in the same process", "",
             f"Measured {time.strftime('%Y-%m-%d')} on {device}; Python {platform.python_version()}, torch "
             f"{torch.__version__}; preset {args.preset} {PRESETS[args.preset]}, compile {args.compile}, "
             f"{args.steps} steps a case, "
             f"{args.threads} torch thread(s). Command:",
             "", f"    python3 benchmarks/compile_reuse.py {' '.join(sys.argv[1:])}".rstrip(), "",
             "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c])
                                       for c in COLUMNS) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table)


if __name__ == "__main__":
    main()
