"""Coordinate checks: train each width a few steps on the same batches, record every probe's size, fit the log-log
slope of size against width per probe and step, and compare it with the exponent the parametrization predicts."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from deltamup import parametrizations
from deltamup.models import ModelConfig, role_of
from deltamup.models.taps import record
from deltamup.parametrizations import build_model

from .data.sample import sample_batches
from .train import TrainConfig, lm_loss, make_optimizer, optimizer_step

if TYPE_CHECKING:
    import polars as pl

DEFAULT_LR = {"adamw": 1e-2, "sgd": 0.03}
PANELS = 8  # most steps the plot shows


@dataclass(frozen=True)
class CoordCheck:
    """The defaults are the short check (constant LR, no clipping); a sweep's schedule (warm-up, cosine, clipping,
    weight decay) makes it the long-horizon check, with `every` thinning the recorded steps."""

    model: ModelConfig           # its width is ignored; `widths` are used
    parametrization: str
    optimizer: str
    widths: tuple[int, ...]
    steps: int = 5
    lr: float | None = None      # None: DEFAULT_LR[optimizer]
    batch_size: int = 8
    seq_len: int = 64
    seed: int = 0
    device: str = "auto"         # auto: cuda when available
    bf16: bool = True            # bf16 autocast on CUDA (the CPU always runs fp32)
    schedule: str = "constant"   # constant | cosine (scaling.train.TrainConfig)
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    grad_clip: float | None = None
    weight_decay: float = 0.0
    eps: float = 1e-8            # AdamW's base ε
    every: int = 1               # probes are recorded at t = 0, every `every` steps and at the last step

    def __post_init__(self) -> None:
        parametrizations.get(self.parametrization)
        parametrizations.check_optimizer(self.optimizer)
        if len(self.widths) < 2:
            raise ValueError("a coordinate check needs at least two widths")
        if self.steps < 1:
            raise ValueError("steps must be ≥ 1")
        if self.every < 1:
            raise ValueError(f"every must be ≥ 1, got {self.every}")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps {self.warmup_steps} leaves no step at the peak LR of {self.steps} steps")
        self.train_config()  # validates the schedule, clipping, weight decay and ε
        for w in self.widths:
            self.model.with_width(w)  # validates the head layout at every width

    @property
    def base_lr(self) -> float:
        return self.lr if self.lr is not None else DEFAULT_LR[self.optimizer]

    def train_config(self) -> TrainConfig:
        return TrainConfig(optimizer=self.optimizer, lr=self.base_lr, steps=self.steps, schedule=self.schedule,
                           warmup_steps=self.warmup_steps, min_lr_ratio=self.min_lr_ratio, grad_clip=self.grad_clip,
                           weight_decay=self.weight_decay, eps=self.eps, seed=self.seed, bf16=self.bf16)

    def recorded(self, step: int) -> bool:
        """Whether the probes are recorded after `step` updates."""
        return step % self.every == 0 or step == self.steps

    @property
    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)


def _rms(x: torch.Tensor) -> float:
    return x.pow(2).mean().sqrt().item()


def measure_width(check: CoordCheck, width: int, batches: list) -> list[dict]:
    """Rows (width, step, probe, rms, l1, delta_rms) for one width.

    Probes are read on one fixed probe batch (batches[0]) at steps 0..steps (0 = initialisation; only the steps
    check.recorded() names); delta_rms is the RMS of x_t − x_0 on that batch, the change µP says must be Θ(1).
    Training step t uses batches[t + 1]. update.<role> rows hold the RMS of the weight update ΔW that led to each
    recorded step, grad.<role> rows the RMS of the gradient it was computed from (after clipping, if any)."""
    config = check.model.with_width(width)
    device = check.torch_device
    model = build_model(config, check.parametrization, check.optimizer, seed=check.seed).to(device)
    batches = [tuple(t.to(device) for t in batch) for batch in batches]
    train_config = check.train_config()
    optimizer = make_optimizer(model, check.parametrization, train_config)
    rows: list[dict] = []
    initial: dict[str, torch.Tensor] = {}
    for step in range(check.steps + 1):
        if check.recorded(step):
            with torch.no_grad(), record() as recorder:
                probe_loss = lm_loss(model, batches[0], check.bf16).item()
            for name, x in recorder.tensors.items():
                x0 = initial.setdefault(name, x)
                rows.append(dict(width=width, step=step, probe=name, rms=_rms(x), l1=x.abs().mean().item(),
                                 delta_rms=_rms(x - x0)))
            rows.append(dict(width=width, step=step, probe="loss", rms=probe_loss, l1=probe_loss,
                             delta_rms=math.nan))
        if step == check.steps:
            break
        measured = check.recorded(step + 1)
        before = [p.detach().clone() for p in model.parameters()] if measured else []
        optimizer_step(model, optimizer, lm_loss(model, batches[step + 1], check.bf16), step, train_config)
        if measured:
            rows += _per_role_rms(width, step + 1, "update", [(p, p.detach() - p0)
                                                               for p, p0 in zip(model.parameters(), before)])
            rows += _per_role_rms(width, step + 1, "grad", [(p, p.grad) for p in model.parameters()
                                                             if p.grad is not None])
    return rows


def _per_role_rms(width: int, step: int, kind: str, tensors: list[tuple[torch.Tensor, torch.Tensor]]) -> list[dict]:
    """One row per role: the RMS over all of that role's (parameter, tensor) pairs' tensors, as probe kind.role."""
    sq: dict[str, list[float]] = {}
    for p, t in tensors:
        acc = sq.setdefault(f"{kind}.{role_of(p)}", [0.0, 0])
        acc[0] += t.float().pow(2).sum().item()
        acc[1] += t.numel()
    return [dict(width=width, step=step, probe=name, rms=math.sqrt(s / n), l1=math.nan, delta_rms=math.sqrt(s / n))
            for name, (s, n) in sq.items()]


def collect(check: CoordCheck, progress: Callable[[str], None] | None = None) -> list[dict]:
    """coords rows: one per (width, step, probe) with rms, l1 and delta_rms (plain dicts: no polars needed)."""
    gen = sample_batches(check.batch_size, check.seq_len, seed=check.seed)
    batches = [next(gen) for _ in range(check.steps + 1)]
    rows: list[dict] = []
    for width in check.widths:
        if progress:
            progress(f"width {width}")
        rows += measure_width(check, width, batches)
    return rows


def run(check: CoordCheck, progress: Callable[[str], None] | None = None) -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(collect(check, progress))


def write_rows(rows: list[dict], path: Path) -> None:
    """coords.parquet with pyarrow alone (for machines without polars, e.g. the GPU image)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


def fit_slopes(coords: pl.DataFrame, parametrization: str, optimizer: str) -> pl.DataFrame:
    """slopes: (probe, step, slope, expected, ok). slope fits log RMS against log width: of the probe at step 0,
    of its change x_t − x_0 after. expected is the predicted exponent with the band a measurement may fall in
    ("0 [-0.40, +0.10]"), or ">0.1" for probes that must grow; both are null where nothing is predicted."""
    import polars as pl

    rows = []
    for (probe, step), group in coords.filter(pl.col("probe") != "loss").group_by(["probe", "step"]):
        group = group.sort("width")
        size = group["rms" if step == 0 else "delta_rms"].to_numpy()
        x, y = np.log(group["width"].to_numpy()), np.log(np.maximum(size, 1e-30))
        slope = float(np.polyfit(x, y, 1)[0]) if len(x) >= 2 and np.all(np.isfinite(y)) else math.nan
        expect = parametrizations.expected_slope(parametrization, optimizer, probe)
        rows.append(dict(probe=probe, step=step, slope=slope,
                         expected=None if expect is None else expect.describe(step),
                         ok=None if expect is None else expect.admits(step, slope)))
    schema = {"probe": pl.String, "step": pl.Int64, "slope": pl.Float64, "expected": pl.String, "ok": pl.Boolean}
    return pl.DataFrame(rows, schema=schema).sort(["probe", "step"], maintain_order=True)


def plot(coords: pl.DataFrame, path: Path, title: str) -> None:
    """One panel per step (at most PANELS, evenly spread, the first and last included), log-log against width:
    each probe's RMS at t = 0 and the RMS of its change after (mup's coordinate-check plot, with the change as
    Tensor Programs V plots it)."""
    import matplotlib
    import polars as pl

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = sorted(coords["step"].unique().to_list())
    if len(steps) > PANELS:
        steps = [steps[round(i * (len(steps) - 1) / (PANELS - 1))] for i in range(PANELS)]
    probes = sorted(p for p in coords["probe"].unique().to_list() if p != "loss")
    cmap = plt.get_cmap("tab20", max(len(probes), 1))
    fig, axes = plt.subplots(1, len(steps), figsize=(3.2 * len(steps), 3.6), sharey=True, squeeze=False)
    for ax, step in zip(axes[0], steps):
        at = coords.filter(pl.col("step") == step)
        for i, probe in enumerate(probes):
            g = at.filter(pl.col("probe") == probe).sort("width")
            if len(g):
                ax.plot(g["width"], g["rms" if step == 0 else "delta_rms"], marker="o", ms=3, lw=1, color=cmap(i),
                        label=probe)
        ax.set(xscale="log", yscale="log", title="t = 0: RMS(x_0)" if step == 0 else f"t = {step}: RMS(x_t − x_0)",
               xlabel="width")
        widths = sorted(coords["width"].unique().to_list())
        ax.minorticks_off()
        ax.set_xticks(widths, [str(w) for w in widths], rotation=45, fontsize=7)
    axes[0][0].set_ylabel("RMS")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", dpi=110)
    plt.close(fig)


def write(check: CoordCheck, coords: pl.DataFrame, slopes: pl.DataFrame, out: Path,
          measured_on: str | None = None) -> None:
    """coords.parquet, slopes.csv and coords.png in `out`; measured_on names the machine in the plot's title
    (default: this check's device and precision)."""
    out.mkdir(parents=True, exist_ok=True)
    coords.write_parquet(out / "coords.parquet")
    slopes.write_csv(out / "slopes.csv")
    if measured_on is None:
        precision = "bf16" if (check.bf16 and check.torch_device.type == "cuda") else "fp32"
        measured_on = f"{check.torch_device.type} {precision}"
    schedule = "" if check.schedule == "constant" and not check.warmup_steps else (
        f"{check.schedule}, warm-up {check.warmup_steps} · ")
    title = (f"{check.model.kind} · {check.parametrization} · {check.optimizer} · lr {check.base_lr:g} · "
             f"{schedule}depth {check.model.depth} · {measured_on}")
    plot(coords, out / "coords.png", title)
