"""`deltamup tasks`: list the registered tasks, show examples, and train + evaluate a model on one.

    deltamup tasks list
    deltamup tasks show s3 --seq-len 12
    deltamup tasks run s3 --model deltaproduct --householder 2 --neg-eigval --no-gated --depth 1 --width 128 \\
        --steps 1500 --lr 3e-3 --seq-len 128 --eval-len 512 --out s3.json

`run` trains with scaling.train.train, then prints the task's own metrics (evaluate()), the loss by position on
held-out sequences of --eval-len tokens (past the training length when longer) and the effective rank of each
layer's recurrent state after a prefix of growing length.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math

from deltamup.cli.common import (
    add_model_args,
    add_parametrization_args,
    check_parametrization_args,
    int_list,
    model_config,
)
from deltamup.console import print_table, writable_file
from deltamup.parametrizations import build_model
from deltamup.scaling.data import TASKS, get_task
from deltamup.scaling.tasks import metrics
from deltamup.scaling.train import TrainConfig, train


def register(subparsers: argparse._SubParsersAction) -> None:
    tasks = subparsers.add_parser("tasks", help="state-tracking and formal-language tasks: list, show, run",
                                  description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    sub.add_parser("list", help="registered tasks and their vocabularies").set_defaults(run=run_list)

    s = sub.add_parser("show", help="print a few training examples, decoded")
    s.add_argument("task", help="task name or JSON spec, e.g. '{\"name\": \"zn\", \"n\": 5}'")
    s.add_argument("--seq-len", type=int, default=16)
    s.add_argument("--count", type=int, default=3)
    s.set_defaults(run=run_show)

    r = sub.add_parser("run", help="train a model on a task, then evaluate it (metrics, loss by position, erank)")
    r.add_argument("task", help="task name or JSON spec")
    add_model_args(r, depth=1)
    add_parametrization_args(r)
    r.add_argument("--width", type=int, default=128)
    r.add_argument("--steps", type=int, default=500)
    r.add_argument("--lr", type=float, default=1e-3)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--seq-len", type=int, default=128, help="training length (formal languages: padded width)")
    r.add_argument("--eval-len", type=int, default=512, help="length of the held-out sequences for loss by position")
    r.add_argument("--erank-lengths", type=int_list, default=None, help="prefix lengths (default: powers of 2)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default=None, help="write everything as JSON here")
    r.set_defaults(run=run_task)


def parse_spec(text: str) -> str | dict:
    return json.loads(text) if text.lstrip().startswith("{") else text


def run_list(args: argparse.Namespace) -> None:
    rows = []
    for name in sorted(TASKS):
        task = get_task(name) if name != "corpus" else None  # the corpus would be built to know its vocabulary
        rows.append({"task": name, "vocab": task.vocab_size if task else "data's",
                     "evaluate": "yes" if hasattr(task, "evaluate") else "no"})
    print_table(rows)


def run_show(args: argparse.Namespace) -> None:
    task = get_task(parse_spec(args.task))
    x, y = next(task.train_batches(args.count, args.seq_len, seed=0))
    vocab = getattr(task, "vocab", None)
    show = (lambda ids: " ".join(vocab[i] for i in ids)) if vocab else (lambda ids: " ".join(map(str, ids)))
    for inputs, targets in zip(x.tolist(), y.tolist()):
        print("inputs ", show(inputs))
        print("targets", " ".join("·" if t == -100 else (vocab[t] if vocab else str(t)) for t in targets))


def run_task(args: argparse.Namespace) -> None:
    check_parametrization_args(args)
    task = get_task(parse_spec(args.task))
    if min(args.steps, args.batch_size, args.seq_len, args.eval_len) < 1:
        raise ValueError("--steps, --batch-size, --seq-len and --eval-len must be positive")
    lengths = args.erank_lengths or [t for t in powers_of_two(args.eval_len) if t >= 2] + [args.eval_len]
    if max(lengths) > args.eval_len or min(lengths) < 1:
        raise ValueError(f"--erank-lengths must lie in 1…--eval-len ({args.eval_len})")
    if args.out:
        writable_file(args.out)  # before training: a result that cannot be written is lost
    config = dataclasses.replace(model_config(args, args.width), vocab_size=task.vocab_size)
    model = build_model(config, args.parametrization, args.optimizer, seed=args.seed)
    train_config = TrainConfig(optimizer=args.optimizer, lr=args.lr, steps=args.steps,
                               warmup_steps=args.steps // 20, seed=args.seed, log_every=max(1, args.steps // 10))
    result = train(model, args.parametrization, train_config,
                   task.train_batches(args.batch_size, args.seq_len, args.seed),
                   on_log=lambda step, rows: print(f"step {step + 1:>6}  loss {rows[-1][1]:.4f}", flush=True))
    report = {"task": args.task, "model": config.to_dict(), "train": train_config.to_dict(),
              "final_loss": result.final_loss, "diverged": result.diverged}
    device = next(model.parameters()).device
    if hasattr(task, "evaluate"):
        report["metrics"] = task.evaluate(model, device, seed=args.seed)
        print_table([{"metric": k, "value": f"{v:.4f}"} for k, v in report["metrics"].items()])
    val = task.val_batches(args.batch_size, args.eval_len, count=2, seed=args.seed)
    by_pos = metrics.loss_by_position(model, val, device)
    report["loss_by_position"] = by_pos.tolist()
    edges = [0] + powers_of_two(args.eval_len) + [args.eval_len]
    rows = []
    for a, b in zip(edges, edges[1:]):  # positions a+1 … b (1-based)
        loss = by_pos[a:b].nanmean().item()
        if not math.isnan(loss):
            rows.append({"positions": f"{a + 1}-{b}", "loss": f"{loss:.4f}",
                         "past training length": "yes" if a >= args.seq_len else ""})
    print_table(rows)
    eranks = metrics.state_erank_by_length(model, val[0][0], sorted(set(lengths)), device)
    report["state_erank"] = {t: r.tolist() for t, r in eranks.items()}
    print_table([{"prefix length": t, **{f"layer {i} erank (mean over heads)": f"{layer.mean().item():.2f}"
                                          for i, layer in enumerate(r)}} for t, r in eranks.items()])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.out}")


def powers_of_two(limit: int) -> list[int]:
    return [2 ** i for i in range(int(math.log2(limit)) + 1) if 2 ** i < limit] or [1]
