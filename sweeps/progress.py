"""What a running sweep prints: one line per width (done / running / diverged / errors, ETA) instead of Ray's
tables, and a summary per (parametrization, optimizer, width) at the end. The summary's LR is `best_lr_grid`: the
grid LR with the lowest seed-mean smoothed train loss; `deltamup report` fits the optimum (`best_lr`) on the
validation loss, with its interval and the transfer verdict."""
from __future__ import annotations

import math
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from ray.tune import Callback

from deltamup.console import duration, print_table

from . import cost, store
from .refine import best_lr
from .time_limit import NOT_STARTED


class Progress(Callback):
    """Tune callback: counts trials per width and prints the block every `every` seconds and at the end;
    ETA per width = remaining trials × its mean trial time / its running trials."""

    def __init__(self, widths: list[int], every: float = 10.0, earlier: dict[int, int] | None = None) -> None:
        """widths: one entry per trial this run launches; earlier: finished trials per width from earlier runs."""
        self.every = every  # (no stream attribute: the Tuner pickles its callbacks)
        self.total, self.earlier = Counter(widths), Counter(earlier or {})
        self.done: dict[int, Counter] = defaultdict(Counter)
        self.running: dict[str, tuple[int, float]] = {}  # trial id → (width, start time)
        self.seconds: dict[int, list[float]] = defaultdict(list)
        self.start = self.last_print = time.time()

    @staticmethod
    def _width(trial: Any) -> int:
        return trial.config["trial"]["point"]["width"]

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running[trial.trial_id] = (self._width(trial), time.time())

    def _finish(self, trial: Any, status: str) -> None:
        width, began = self.running.pop(trial.trial_id, (self._width(trial), time.time()))
        self.done[width][status] += 1
        if status != NOT_STARTED:  # the ETA's mean trial time counts trials that trained
            self.seconds[width].append(time.time() - began)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # a trial Tune stopped (a pruner) ends on an intermediate result, which has no status
        self._finish(trial, (trial.last_result or {}).get("status", "pruned"))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finish(trial, "error")

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if time.time() - self.last_print >= self.every:
            self.print(time.time())

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.print(time.time())

    def print(self, now: float) -> None:
        self.last_print = now
        done = sum(sum(c.values()) for c in self.done.values())
        lines = [f"[{duration(now - self.start):>6}] {done}/{sum(self.total.values())} trials done, "
                 f"{len(self.running)} running"]
        for width in sorted(set(self.total) | set(self.earlier)):
            counts = self.done[width]
            running = sum(1 for w, _ in self.running.values() if w == width)
            remaining = self.total[width] - sum(counts.values())
            mean = statistics.fmean(self.seconds[width]) if self.seconds[width] else math.inf
            eta = 0.0 if remaining == 0 else remaining * mean / max(1, running)
            earlier = f" (+{self.earlier[width]} earlier)" if self.earlier[width] else ""
            others = (f", {counts['pruned']} pruned" if counts["pruned"] else "") + (
                f", {counts[NOT_STARTED]} not started (time limit)" if counts[NOT_STARTED] else "")
            lines.append(f"  width {width:>5}: {sum(counts.values())}/{self.total[width]} done{earlier} "
                         f"({counts['diverged']} diverged, {counts['error']} errors{others}), {running} running, "
                         f"ETA {duration(eta)}")
        print("\n".join(lines), flush=True)


def print_summary(out: Path) -> None:
    """The sweep so far: totals, wall time, throughput, GPU busy share, the share of trial time before the first
    step (per width), and per group the best LR."""
    records, samples = store.read_records(out), store.read_gpu_samples(out)
    status = Counter(r["status"] for r in records)
    total = cost.totals(out)
    gpu = f", GPU busy {total['gpu_busy']:.0f}% ({len(samples)} samples)" if total["gpu_busy"] is not None else ""
    gpu_time = f" ({duration(total['gpu_seconds'])} of GPU time)" if total["gpu_seconds"] is not None else ""
    pruned = f", {status['pruned']} pruned" if status["pruned"] else ""
    print(f"sweep {out}: {len(records)} trials ({status['ok']} ok, {status['diverged']} diverged, "
          f"{status['error']} errors{pruned}) in {total['runs']} run(s), "
          f"wall {duration(total['wall_seconds'])}{gpu_time}, "
          f"{total['tokens']:,} tokens, {total['tokens_per_s'] or 0:,.0f} tokens/s overall{gpu}"
          f"{cost.first_step_text(total)}")
    widths = [w for w in cost.per_width(out) if w["first_step_share"] is not None]
    if widths:
        print("before the first step (compile, autotune, one step), share of trial wall time: " + ", ".join(
            f"width {w['width']} {w['first_step_share']:.0%} (mean {w['first_step_seconds']:.1f} s)" for w in widths))
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[(r["parametrization"], r["optimizer"], r["width"])].append(r)
    rows = []
    for (parametrization, optimizer, width), group in sorted(groups.items()):
        lr, loss = best_lr(group)
        speeds = [r["tokens_per_s"] for r in group if r.get("tokens_per_s")]
        utils = [u for r in group if (u := store.trial_gpu_util(r, samples)) is not None]
        counts = Counter(r["status"] for r in group)
        rows.append({"parametrization": parametrization, "optimizer": optimizer, "width": width,
                     "trials": len(group), "diverged": counts["diverged"], "errors": counts["error"],
                     "best_lr_grid (smoothed train loss)": f"{lr:.3g}" if lr is not None and math.isfinite(loss)
                     else "-",
                     "smoothed_loss": f"{loss:.4f}" if math.isfinite(loss) else "inf",
                     "tokens/s/trial": f"{statistics.fmean(speeds):,.0f}" if speeds else "-",
                     "gpu_util%": f"{statistics.fmean(utils):.0f}" if utils else "-"})
    print_table(rows)
    if rows:
        print(f"best_lr_grid: the grid LR with the lowest smoothed train loss; the fitted optimum with its 90% "
              f"interval and the transfer verdict: deltamup report {out}")
