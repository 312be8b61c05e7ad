"""Coordinate checks: train each width a few steps on the same batches, record every probe's size, fit the log-log
slope of size against width per probe and step, and compare it with the exponent the parametrization predicts.

The model is deltamup's own (a ModelConfig; its layers tap every probe) or any model a factory builds at a given
width (`model_factory`: width -> nn.Module, tokens [B, T] -> logits or an output with .logits). A factory's model is
parametrized with parametrizations.parametrize against the same factory's base-width model, and its probes are
forward hooks where the role map or the model's structure places them: the embedding's output, each token mixer's
readout (the input of its output norm) and output, each block's other sub-layers' outputs (e.g. mlp_out), the
logits, and the role map's extras (fla: alpha_pre, beta_pre); the update.<role> probes come from the roles. On the
CPU a factory's model runs inside models.reference_ops (fla's and Qwen3-Next's kernels need a GPU).
"""
from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from deltamup import parametrizations
from deltamup.models import GATE_MATRICES, ModelConfig, Role, role_of
from deltamup.models.layers import Linear
from deltamup.models.reference_ops import reference_ops
from deltamup.models.taps import record, recording, tap
from deltamup.parametrizations import Parametrized, RoleMap, build_model, parametrize

from .code import code_fingerprint
from .data.corpus import Corpus
from .data.sample import sample_batches, sample_tokens
from .deviations import documented
from .train import TrainConfig, lm_loss, make_optimizer, optimizer_step

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

DEFAULT_LR = {"adamw": 1e-2, "sgd": 0.03}
VERDICTS = ("ok", "documented", "new")


@dataclass(frozen=True)
class CoordCheck:
    """The defaults are the short check (constant LR, no clipping); a sweep's schedule (warm-up, cosine, clipping,
    weight decay) makes it the long-horizon check, with `every` thinning the recorded steps."""

    model: ModelConfig | None    # deltamup's model (its width is ignored; `widths` are used), or None with a factory
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
    model_factory: Callable[[int], nn.Module] | None = field(default=None, compare=False)
    base_width: int | None = None        # the factory's base width (where every width multiplier is 1)
    roles: RoleMap | str | None = None   # the factory's role map (None: roles from shapes and structure)
    kind: str | None = None              # the factory's architecture ("gdn", …): which documented deviations apply
    name: str = ""                       # what the factory builds, for titles (e.g. "pkg.module:make_model")
    init: bool = True                    # the factory's model: re-draw the init per the table (False: keep its own)
    data: str | None = None              # a prepared corpus (`deltamup data prepare`) to draw the batches from;
                                         # None: the embedded text sample (343 KB: a long check at a large batch
                                         # repeats it, e.g. every 21 steps at 16 × 1024 tokens)
    matrix_probes: bool = False          # also dWx., dW., in., align., srank.<module> per matrix (matrix_probe_hooks)

    def __post_init__(self) -> None:
        parametrizations.get(self.parametrization)
        parametrizations.check_optimizer(self.optimizer)
        if (self.model is None) == (self.model_factory is None):
            raise ValueError("a coordinate check takes a ModelConfig or a model factory, one of the two")
        if len(set(self.widths)) < 2:
            raise ValueError("a coordinate check needs at least two widths")
        if self.steps < 1:
            raise ValueError("steps must be ≥ 1")
        if self.every < 1:
            raise ValueError(f"every must be ≥ 1, got {self.every}")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps {self.warmup_steps} leaves no step at the peak LR of {self.steps} steps")
        _ = self.train_config  # validates the schedule, clipping, weight decay and ε
        if self.model is not None:
            for w in self.widths:
                self.model.with_width(w)  # validates the head layout at every width
        elif self.base_width is None or self.base_width < 1:
            raise ValueError("a model factory needs base_width (the width where every width multiplier is 1)")
        if self.data is not None:
            vocab = self.corpus.vocab_size  # opens the corpus: a wrong path or format fails here, before any work
            if self.model is not None and vocab > self.model.vocab_size:
                raise ValueError(f"data {self.data}: vocabulary {vocab} > the model's {self.model.vocab_size}")

    @cached_property
    def corpus(self) -> Corpus:
        """The prepared corpus the batches come from (only with `data`), opened once."""
        return Corpus(path=self.data)

    def provenance(self) -> dict[str, str | None]:
        """The fingerprints of this process's code and of the batches' data (PROVENANCE): two checks read the same
        batches only where the data's agree (the probe batch's loss differs by more than a code change between
        builds of one corpus)."""
        return {"code": code_fingerprint(), "data": self.corpus.fingerprint if self.data is not None else None}

    def batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The steps + 1 batches (inputs [B, T], targets [B, T]): [0] is the probe batch, [t + 1] trains step t."""
        gen = (self.corpus.train_batches(self.batch_size, self.seq_len, self.seed) if self.data is not None
               else sample_batches(self.batch_size, self.seq_len, seed=self.seed))
        return [next(gen) for _ in range(self.steps + 1)]

    def sample_repeats(self) -> float:
        """How many times the training steps read the embedded sample over (0 with `data`)."""
        return 0.0 if self.data is not None else self.steps * self.batch_size * self.seq_len / len(sample_tokens())

    @property
    def base_lr(self) -> float:
        return self.lr if self.lr is not None else DEFAULT_LR[self.optimizer]

    @property
    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    @property
    def model_kind(self) -> str | None:
        return self.model.kind if self.model is not None else self.kind

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig(optimizer=self.optimizer, lr=self.base_lr, steps=self.steps, schedule=self.schedule,
                           warmup_steps=self.warmup_steps, min_lr_ratio=self.min_lr_ratio, grad_clip=self.grad_clip,
                           weight_decay=self.weight_decay, eps=self.eps, seed=self.seed, bf16=self.bf16)

    def recorded(self, step: int) -> bool:
        """Whether the probes are recorded after `step` updates."""
        return step % self.every == 0 or step == self.steps

    def describe(self) -> str:
        """One line naming the run: model, parametrization, optimizer, widths, steps, LR."""
        model = (f"{self.model.kind} depth {self.model.depth}" if self.model is not None
                 else self.name or "model factory")
        widths = f"{min(self.widths)}–{max(self.widths)}"
        schedule = "" if self.schedule == "constant" and not self.warmup_steps else (
            f" · {self.schedule}, warm-up {self.warmup_steps}")
        clip = "" if self.grad_clip is None else f" · clip {self.grad_clip:g}"
        data = "" if self.data is None else f" · data {Path(self.data).name}"
        return (f"{model} · {self.parametrization} · {self.optimizer} · widths {widths} · {self.steps} steps · "
                f"lr {self.base_lr:g}{schedule}{clip}{data}")


def _rms(x: torch.Tensor) -> float:
    return x.pow(2).mean().sqrt().item()


def _first(x):
    """The tensor a module hands on: itself, the first of a tuple, or a model output's logits."""
    if isinstance(x, tuple):
        return x[0]
    return getattr(x, "logits", x)


def probe_sites(p: Parametrized) -> list[tuple[str, str, str]]:
    """(module name, probe name, "input" | "output") for a parametrized model: the role map's probes if it has
    some, else the structure's (embed, logits, block<i>.readout, block<i>.mixer_out, block<i>.<sub-layer>_out,
    block<i>.<gate matrix module>)."""
    if p.role_map is not None and p.role_map.probes is not None:
        sites = [(s.module, s.field, s.side) for s in p.role_map.probes.sites(p.model)]
        return [(m, f"block{_block(m)}.{label}" if _block(m) is not None else label, side)
                for m, label, side in sites]
    s, model = p.structure, p.model
    sites = [(s.embedding, "embed", "output")] if s.embedding else []
    gates = {n.rpartition(".")[0] for n, r in p.roles.items() if r in GATE_MATRICES}
    for mixer in s.mixers:
        block = f"block{mixer.index}"
        if mixer.norm not in (None, "?"):
            sites.append((mixer.norm, f"{block}.readout", "input"))
        sites.append((mixer.name, f"{block}.mixer_out", "output"))
        sites += [(g, f"{block}.{g.rpartition('.')[2]}", "output") for g in sorted(gates)
                  if g.startswith(mixer.name + ".")]
        parent = model.get_submodule(mixer.block) if mixer.block else model
        for child, module in parent.named_children():
            name = f"{mixer.block}.{child}" if mixer.block else child
            has_params = next(module.parameters(), None) is not None
            if name != mixer.name and "norm" not in type(module).__name__.lower() and has_params:
                sites.append((name, f"{block}.{child}_out", "output"))
    if s.logits:
        sites.append((s.logits, "logits", "output"))
    return sites


def _block(module_name: str) -> int | None:
    return next((int(part) for part in module_name.split(".") if part.isdigit()), None)


def _tap_input(name: str):
    return lambda _module, args: tap(name, _first(args))


def _tap_output(name: str):
    return lambda _module, _args, output: tap(name, _first(output))


def install_probes(p: Parametrized) -> list:
    """Forward hooks that tap every probe site (after the multipliers' hooks, so they see the scaled tensors)."""
    modules = dict(p.model.named_modules())
    return [modules[m].register_forward_pre_hook(_tap_input(name)) if side == "input"
            else modules[m].register_forward_hook(_tap_output(name)) for m, name, side in probe_sites(p)]


MATRIX_PROBES = ("dWx.", "dW.", "in.", "align.", "srank.")  # sizes, not changes: recorded from t = 1
MATRIX_PROBE_PATTERN = "^(" + "|".join(re.escape(p) for p in MATRIX_PROBES) + ")"  # for polars' str.contains


def matrix_probe_hooks(model: nn.Module) -> list:
    """Forward hooks that tap, while recording, five numbers for every module that applies a 2-D `weight` as x Wᵀ
    (deltamup's Linear, nn.Linear), with ΔW = W_t − W_0 (W_0: its weight when the hooks are installed) and x_t its
    input now:
    - dWx.<module> = RMS(ΔW x_t): the part of the matrix's output change (before any multiplier outside it) that its
      own updates make. µP asks it to be Θ(1) for every hidden and gate matrix; the block's output probes add
      W_0 (x_t − x_0) and the layers after it;
    - dW.<module> = RMS(ΔW) and in.<module> = RMS(x_t);
    - align.<module> = RMS(ΔW x_t) / (fan_in · RMS(ΔW) · RMS(x_t)) = ‖ΔW X‖_F / (‖ΔW‖_F ‖X‖_F) (X: the batch's
      inputs as columns): 1 where ΔW's rows line up with the inputs, about fan_in^-½ where they are unrelated. µP's
      ΔW x = Θ(1) rests on it being Θ(1) (slope 0);
    - srank.<module> = ‖ΔW‖_F² / ‖ΔW‖_2², ΔW's stable rank (1: rank one; its rank when the singular values are
      equal). align ≤ srank^-½, so align = srank^-½ · ‖ΔW X‖_F / (‖ΔW‖_2 ‖X‖_F): an update that spreads over more
      directions at wider widths lowers the alignment by half its rank's slope, whatever the inputs do.
    So the width slopes add up: dWx = align + dW + in + 1 (fan_in ∝ width). Each is tapped as one number (a row's
    l1 is that number too): the recorder keeps no copy of an activation per matrix, so at a sweep's batch on a GPU
    the probes cost little memory (srank: a float64 Gram matrix of ΔW's smaller side and its top eigenvalue, one a
    matrix per recorded step)."""
    hooks = []
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if isinstance(module, (nn.Linear, Linear)) and isinstance(weight, torch.Tensor) and weight.dim() == 2:
            def hook(m: nn.Module, args: tuple, _output, name: str = name, w0: torch.Tensor = weight.detach().clone()):
                if recording():
                    x, dw = _first(args).detach(), m.weight.detach() - w0
                    dwx = F.linear(x, dw)
                    rms_dw, rms_x, rms_dwx = (t.float().pow(2).mean().sqrt().reshape(1) for t in (dw, x, dwx))
                    tap("dWx." + name, rms_dwx)
                    tap("dW." + name, rms_dw)
                    tap("in." + name, rms_x)
                    tap("align." + name, rms_dwx / (dw.shape[1] * rms_dw * rms_x))
                    d = dw.double()  # ‖ΔW‖_2² = the top eigenvalue of the Gram matrix of ΔW's smaller side (no SVD)
                    gram = d @ d.T if d.shape[0] <= d.shape[1] else d.T @ d
                    tap("srank." + name, (gram.trace() / torch.linalg.eigvalsh(gram)[-1]).float().reshape(1))
            hooks.append(module.register_forward_hook(hook))
    return hooks


@dataclass
class Subject:
    """One width's model, ready to train: the model, the role of each parameter, its optimizer."""

    model: nn.Module
    roles: dict[int, Role]
    optimizer: torch.optim.Optimizer


def _factory_build(check: CoordCheck, width: int) -> nn.Module:
    try:
        return check.model_factory(width)
    except Exception as e:  # the user's code: any failure becomes one line before the check starts
        raise ValueError(f"model factory {check.name or ''} at width {width}: {type(e).__name__}: {e}".replace(
            "  ", " ")) from None


def prepare(check: CoordCheck) -> dict[int, Subject]:
    """Every width's model, parametrized, with its optimizer: all built before any training, so a width the model
    cannot be built at (or cannot be parametrized at) fails first."""
    device, subjects = check.torch_device, {}
    if check.model is not None:
        for width in check.widths:
            model = build_model(check.model.with_width(width), check.parametrization, check.optimizer,
                                seed=check.seed).to(device)
            subjects[width] = Subject(model, {id(q): role_of(q) for q in model.parameters()},
                                      make_optimizer(model, check.parametrization, check.train_config))
        return subjects
    base = _factory_build(check, check.base_width)
    other = next(w for w in sorted(check.widths, reverse=True) if w != check.base_width)
    delta = _factory_build(check, other)
    for width in check.widths:
        torch.manual_seed(check.seed)
        model = _factory_build(check, width)
        p = parametrize(model, check.parametrization, check.optimizer, base_model=base, delta_model=delta,
                        roles=check.roles, init=check.init)
        model.to(device)
        install_probes(p)
        c = check.train_config
        subjects[width] = Subject(model, p.roles_by_id(), p.build_optimizer(
            c.lr, weight_decay=c.weight_decay, betas=c.betas, eps=c.eps, momentum=c.momentum, nesterov=c.nesterov))
    return subjects


def measure_width(check: CoordCheck, width: int, batches: list, subject: Subject) -> list[dict]:
    """Rows (width, step, probe, rms, l1, delta_rms) for one width.

    Probes are read on one fixed probe batch (batches[0]) at steps 0..steps (0 = initialisation; only the steps
    check.recorded() names); delta_rms is the RMS of x_t − x_0 on that batch, the change µP says must be Θ(1).
    Training step t uses batches[t + 1]. update.<role> rows hold the RMS of the weight update ΔW that led to each
    recorded step, grad.<role> rows the RMS of the gradient it was computed from (after clipping, if any); with
    check.matrix_probes, dWx., dW., in., align. and srank.<module> rows from t = 1 (matrix_probe_hooks)."""
    model, optimizer = subject.model, subject.optimizer
    device = check.torch_device
    batches = [tuple(t.to(device) for t in batch) for batch in batches]
    train_config = check.train_config
    rows: list[dict] = []
    initial: dict[str, torch.Tensor] = {}
    hooks: list = []
    for step in range(check.steps + 1):
        if check.recorded(step):
            with torch.no_grad(), record() as recorder:
                probe_loss = lm_loss(model, batches[0], check.bf16).item()
            for name, x in recorder.tensors.items():
                x0 = initial.setdefault(name, torch.zeros_like(x) if name.startswith(MATRIX_PROBES) else x)
                rows.append(dict(width=width, step=step, probe=name, rms=_rms(x), l1=x.abs().mean().item(),
                                 delta_rms=_rms(x - x0)))
            rows.append(dict(width=width, step=step, probe="loss", rms=probe_loss, l1=probe_loss,
                             delta_rms=math.nan))
        if step == check.steps:
            break
        if step == 0 and check.matrix_probes:
            hooks = matrix_probe_hooks(model)  # W_0: the weights the step-0 probes saw
        measured = check.recorded(step + 1)
        before = [q.detach().clone() for q in model.parameters()] if measured else []
        optimizer_step(model, optimizer, lm_loss(model, batches[step + 1], check.bf16), step, train_config)
        if measured:
            rows += _per_role_rms(width, step + 1, "update", subject.roles,
                                  [(q, q.detach() - q0) for q, q0 in zip(model.parameters(), before)])
            rows += _per_role_rms(width, step + 1, "grad", subject.roles,
                                  [(q, q.grad) for q in model.parameters() if q.grad is not None])
    for hook in hooks:
        hook.remove()
    return rows


def _per_role_rms(width: int, step: int, kind: str, roles: dict[int, Role],
                  tensors: list[tuple[torch.Tensor, torch.Tensor]]) -> list[dict]:
    """One row per role: the RMS over all of that role's (parameter, tensor) pairs' tensors, as probe kind.role."""
    sq: dict[str, list[float]] = {}
    for q, t in tensors:
        acc = sq.setdefault(f"{kind}.{roles[id(q)]}", [0.0, 0])
        acc[0] += t.float().pow(2).sum().item()
        acc[1] += t.numel()
    return [dict(width=width, step=step, probe=name, rms=math.sqrt(s / n), l1=math.nan, delta_rms=math.sqrt(s / n))
            for name, (s, n) in sq.items()]


def collect(check: CoordCheck, progress: Callable[[str], None] | None = None,
            keep: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """coords rows: one per (width, step, probe) with rms, l1 and delta_rms (plain dicts: no polars needed).
    keep, when given, receives every row so far after each width (so a killed check loses one width at most)."""
    batches = check.batches()
    on_cpu = check.model_factory is not None and check.torch_device.type == "cpu"
    with reference_ops() if on_cpu else contextlib.nullcontext():  # fla's / Qwen3-Next's GPU-only kernels
        subjects = prepare(check)
        rows: list[dict] = []
        for width in check.widths:
            if progress:
                progress(f"width {width}")
            rows += measure_width(check, width, batches, subjects.pop(width))
            if keep:
                keep(rows)
    return rows


def run(check: CoordCheck, progress: Callable[[str], None] | None = None,
        keep: Callable[[list[dict]], None] | None = None) -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(collect(check, progress, keep))


PROVENANCE = ("code", "data")  # what measured a check: the code's fingerprint (scaling/code.py) and the data's
#                                 (a prepared corpus's tokens sha256, 16 hex digits; None: the embedded sample);
#                                 kept in coords.parquet's schema metadata as deltamup.code and deltamup.data


def write_rows(rows: list[dict] | pa.Table, path: Path, provenance: dict[str, str | None] | None = None) -> None:
    """coords.parquet with pyarrow alone (for machines without polars, e.g. the GPU image), the fingerprints of the
    code and data that measured it (PROVENANCE) in its metadata; written beside and renamed into place, so a kill
    mid-write leaves the previous file whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
    kept = {f"deltamup.{k}".encode(): v.encode() for k, v in (provenance or {}).items() if v is not None}
    if kept:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **kept})
    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial)
    partial.replace(path)


def provenance_of(path: Path) -> dict[str, str | None]:
    """The fingerprints of the code and data that measured a coords.parquet (PROVENANCE; None: not recorded)."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    return {k: (v.decode() if (v := metadata.get(f"deltamup.{k}".encode())) is not None else None)
            for k in PROVENANCE}


SLOPES_SCHEMA = {"probe": "String", "step": "Int64", "slope": "Float64", "expected": "String", "ok": "Boolean",
                 "verdict": "String", "note": "String"}


def fit_slopes(coords: pl.DataFrame, parametrization: str, optimizer: str, kind: str | None = None) -> pl.DataFrame:
    """slopes: (probe, step, slope, expected, ok, verdict, note). slope fits log RMS against log width: of the probe
    at step 0, of its change x_t − x_0 after. expected is the predicted exponent with the band a measurement may fall
    in ("0 [-0.40, +0.10]"), or ">0.1" for probes that must grow; both are null where nothing is predicted. verdict:
    ok, documented (off its band, a deviation scaling/deviations.py lists for this model kind; note says why and
    where the docs explain it) or new (off its band, unexplained); null where nothing is predicted."""
    import polars as pl

    blocks = [int(b) for b in coords["probe"].str.extract(r"^block(\d+)\.").drop_nulls().unique().to_list()]
    last_block = max(blocks, default=0)
    rows = []
    for (probe, step), group in coords.filter(pl.col("probe") != "loss").group_by(["probe", "step"]):
        group = group.sort("width")
        size = group["rms" if step == 0 else "delta_rms"].to_numpy()
        x, y = np.log(group["width"].to_numpy()), np.log(np.maximum(size, 1e-30))
        slope = float(np.polyfit(x, y, 1)[0]) if len(x) >= 2 and np.all(np.isfinite(y)) else math.nan
        expect = parametrizations.expected_slope(parametrization, optimizer, probe)
        ok = None if expect is None else expect.admits(step, slope)
        known = documented(kind, parametrization, optimizer, probe, step, last_block) if ok is False else None
        rows.append(dict(probe=probe, step=step, slope=slope,
                         expected=None if expect is None else expect.describe(step), ok=ok,
                         verdict=None if ok is None else "ok" if ok else "documented" if known else "new",
                         note=f"{known.reason} — {known.link}" if known else None))
    schema = {k: getattr(pl, v) for k, v in SLOPES_SCHEMA.items()}
    return pl.DataFrame(rows, schema=schema).sort(["probe", "step"], maintain_order=True)


def write(check: CoordCheck, coords: pl.DataFrame, slopes: pl.DataFrame, out: Path,
          measured_on: str | None = None, provenance: dict[str, str | None] | None = None) -> None:
    """coords.parquet, slopes.csv and check.json (what ran: the run's name, parametrization, optimizer, widths,
    steps, lr, seed, batch, model, where it was measured, by which code on which data) in `out`; measured_on names
    the machine (default: this check's device and precision), provenance the fingerprints of the code and data that
    measured it (PROVENANCE; default: this process's code and this check's data)."""
    out.mkdir(parents=True, exist_ok=True)
    provenance = provenance if provenance is not None else check.provenance()
    write_rows(coords.to_arrow(), out / "coords.parquet", provenance)
    slopes.write_csv(out / "slopes.csv")
    if measured_on is None:
        precision = "bf16" if (check.bf16 and check.torch_device.type == "cuda") else "fp32"
        measured_on = f"{check.torch_device.type} {precision}"
    meta = dict(name=check.describe(), parametrization=check.parametrization, optimizer=check.optimizer,
                widths=list(check.widths), steps=check.steps, lr=check.base_lr, kind=check.model_kind,
                schedule=check.schedule, warmup_steps=check.warmup_steps, min_lr_ratio=check.min_lr_ratio,
                grad_clip=check.grad_clip, weight_decay=check.weight_decay, eps=check.eps, every=check.every,
                seed=check.seed, batch_size=check.batch_size, seq_len=check.seq_len,
                matrix_probes=check.matrix_probes, data=check.data or "sample",
                model=check.model.to_dict() if check.model is not None else check.name, measured_on=measured_on,
                code=provenance.get("code"), data_fingerprint=provenance.get("data"))
    (out / "check.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
