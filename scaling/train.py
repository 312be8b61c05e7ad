"""The training loop every coordinate check and sweep trial uses: AdamW or SGD with momentum, linear warm-up and
cosine decay, gradient clipping, bf16 autocast on GPUs, divergence detection, seeds."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from deltamup import parametrizations

from . import checkpoint
from .checkpoint import Checkpointing, dtensor_class
from .compile_cache import cache_counts, counts_since
from .data import Batch  # inputs [B, T] int64, targets [B, T] int64 (-100: not supervised)
from .data_parallel import Ranks

COMPILE_MODES = (False, True, "blocks")  # TrainConfig.compile
SCHEDULES = ("cosine", "constant")  # TrainConfig.schedule


@dataclass(frozen=True)
class TrainConfig:
    optimizer: str = "adamw"
    lr: float = 1e-3                # base learning rate (the parametrization multiplies it per role)
    weight_decay: float = 0.0
    steps: int = 100
    warmup_steps: int = 0
    schedule: str = "cosine"        # cosine | constant
    min_lr_ratio: float = 0.0       # cosine decays to min_lr_ratio · lr
    grad_clip: float | None = 1.0
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8               # AdamW's base ε (the parametrization multiplies it per role)
    momentum: float = 0.9           # SGD
    nesterov: bool = True           # SGD
    seed: int = 0
    bf16: bool = True               # autocast to bf16 on CUDA (ignored on CPU)
    log_every: int = 10             # losses are synced to the host (and checked for divergence) this often
    compile: bool | str = False     # True: model + cross-entropy as one graph; "blocks": each block (one graph
                                    # shared by all) and the cross-entropy apart (compile_blocks); Triton kernels opaque

    def __post_init__(self) -> None:
        parametrizations.check_optimizer(self.optimizer)
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.steps < 1 or self.warmup_steps < 0 or self.log_every < 1:
            raise ValueError("steps ≥ 1, warmup_steps ≥ 0 and log_every ≥ 1 are required")
        if not self.eps >= 0:
            raise ValueError(f"eps must not be negative, got {self.eps}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose {' or '.join(SCHEDULES)}")
        if self.compile not in COMPILE_MODES:
            raise ValueError(f"unknown compile mode {self.compile!r}; choose false, true (the whole model) or blocks")

    def to_dict(self) -> dict:
        return asdict(self)


def lr_factor(step: int, config: TrainConfig) -> float:
    """Multiplier on every group's base LR at `step` (0-based): linear warm-up, then cosine or constant."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    if config.schedule == "constant":
        return 1.0
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


# Graphs token_loss may hold in one process: one per model shape and norm eps (Ray reuses a trial's process for the
# next trials; the forward multipliers are graph inputs). Past torch's default of 8 a new graph would silently run
# eagerly.
RECOMPILE_LIMIT = 256


def precision(device_type: str, bf16: bool) -> AbstractContextManager:
    """The context a forward runs in: bf16 autocast on CUDA when bf16, else nothing."""
    if bf16 and device_type == "cuda":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return nullcontext()


def token_loss(model: nn.Module, batch: Batch, cross_entropy: Callable[[Tensor, Tensor], Tensor] | None = None
               ) -> Tensor:
    """Mean next-token cross-entropy (fp32) at the ambient precision; the model returns logits [B, T, vocab] or an
    output with .logits (Hugging Face's CausalLMOutput). cross_entropy: logits_loss, or a compiled copy of it.
    deltamup's model with ModelConfig(loss_backend="triton") returns the loss itself (its readout and loss fused)."""
    inputs, targets = batch
    if returns_its_loss(model):
        return model(inputs, targets)
    logits = model(inputs)
    return (cross_entropy or logits_loss)(getattr(logits, "logits", logits), targets)


def returns_its_loss(model: nn.Module) -> bool:
    """deltamup's model (or DDP's wrapper of it) whose config fuses the readout with the loss (loss_backend)."""
    config = getattr(getattr(model, "module", model), "config", None)
    return getattr(config, "loss_backend", "torch") != "torch"


def logits_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy (fp32) of logits [B, T, vocab] against targets [B, T] (-100: not supervised)."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100)


def compile_blocks(model: nn.Module, **options) -> None:
    """Compiles each block of deltamup's model in place (torch's regional compilation), once per block. The blocks of
    one model share a graph, so a cold compile traces and generates one block's code instead of the whole depth's;
    what crosses the blocks (the residual stream) is no longer fused across them. lm_loss (evaluation) runs them
    eagerly."""
    blocks = getattr(getattr(model, "module", model), "blocks", None)  # DDP keeps the model as .module
    if not isinstance(blocks, nn.ModuleList):
        raise ValueError(f"compile: blocks needs deltamup's model (blocks), not {type(model).__name__}")
    for block in blocks:
        if block._compiled_call_impl is None:
            block.compile(dynamic=False, **options)


def lm_loss(model: nn.Module, batch: Batch, bf16: bool = True) -> Tensor:
    """token_loss in bf16 autocast on CUDA when bf16 (fp32 elsewhere), eager: blocks compiled in place
    (compile_blocks) run uncompiled here, so evaluation and probes compile nothing."""
    with precision(batch[0].device.type, bf16), torch.compiler.set_stance("force_eager"):
        return token_loss(model, batch)


def blocks_loss() -> Callable[[nn.Module, Batch], Tensor]:
    """token_loss with the model's blocks compiled (compile_blocks) and the cross-entropy compiled apart."""
    cross_entropy = torch.compile(logits_loss, dynamic=False)

    @torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT)
    def loss(model: nn.Module, batch: Batch) -> Tensor:
        compile_blocks(model)
        return token_loss(model, batch, cross_entropy)
    return loss


def loss_function(config: TrainConfig) -> Callable[[nn.Module, Batch], Tensor]:
    """(model, batch) -> mean next-token loss at this config's precision. With config.compile token_loss is compiled
    (static shapes: one graph per model shape, whatever the process compiled before, the forward multipliers being
    buffers, inputs of it; with "blocks" one per block shape, and the cross-entropy's) and autocast stays outside the
    graph, which keeps it in AOTAutograd's cache (docs/sweeps-compile.md)."""
    step = token_loss
    if config.compile == "blocks":
        step = blocks_loss()
    elif config.compile:
        step = torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT)(torch.compile(token_loss, dynamic=False))

    def loss(model: nn.Module, batch: Batch) -> Tensor:
        with precision(batch[0].device.type, config.bf16):
            return step(model, batch)
    return loss


def make_optimizer(model: nn.Module, parametrization: str, config: TrainConfig) -> torch.optim.Optimizer:
    return parametrizations.build_optimizer(model, parametrization, config.optimizer, config.lr,
                                            weight_decay=config.weight_decay, betas=config.betas, eps=config.eps,
                                            momentum=config.momentum, nesterov=config.nesterov)


def optimizer_step(model: nn.Module, optimizer: torch.optim.Optimizer, loss: Tensor, step: int,
                   config: TrainConfig) -> Tensor | None:
    """Backward, clip, set this step's LRs, update. Returns the global gradient norm before clipping (a 0-d
    tensor, not synced to the host; None without clipping): clipping scales the step by min(1, grad_clip / norm)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip) if config.grad_clip else None
    dtensor = dtensor_class()
    if dtensor is not None and isinstance(norm, dtensor):  # FSDP: the norm over every shard, on every rank
        norm = norm.full_tensor()
    factor = lr_factor(step, config)
    for group in optimizer.param_groups:
        group["lr"] = group["base_lr"] * factor
    optimizer.step()
    return norm


@dataclass
class TrainResult:
    losses: list[tuple[int, float, float]] = field(default_factory=list)  # (step, train loss, lr factor)
    grad_norms: list[float] = field(default_factory=list)  # per step, before clipping (NaN without clipping)
    grad_clip: float | None = None  # the threshold the run clipped at
    diverged: bool = False
    diverged_step: int | None = None
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0            # training time, on_eval's excluded
    eval_seconds: float = 0.0       # time spent in on_eval
    resumed_from_step: int = 0      # steps restored from a checkpoint (0: trained in one go)
    first_step_seconds: float | None = None  # loop start to the end of its first step, synced (compile, one step)
    compile_cache: dict[str, int] = field(default_factory=dict)  # compile_cache.cache_counts() of the run (compile)

    @property
    def final_loss(self) -> float:
        return self.losses[-1][1] if self.losses else math.inf

    @property
    def clipped_fraction(self) -> float | None:
        """Share of the steps whose gradient norm was above grad_clip (their update was scaled down); None without
        clipping. Under SGD a share near 1 means the run was normalised SGD: step = lr · g / ‖g‖."""
        if not self.grad_clip or not self.grad_norms:
            return None
        return sum(norm > self.grad_clip for norm in self.grad_norms) / len(self.grad_norms)


def train(model: nn.Module, parametrization: str, config: TrainConfig, batches: Iterator[Batch],
          on_log: Callable[[int, list[tuple[int, float, float]]], None] | None = None,
          device: torch.device | str | None = None, eval_steps: Collection[int] = (),
          on_eval: Callable[[int, TrainResult], None] | None = None, ranks: Ranks | None = None,
          checkpointing: Checkpointing | None = None) -> TrainResult:
    """Trains `config.steps` steps. Every `log_every` steps the losses are synced, checked (a non-finite loss ends
    training with diverged=True) and handed to on_log(step, new_rows). After n steps, n in `eval_steps`, the losses
    are synced and checked the same way and, unless diverged, on_eval(n, result so far) runs (e.g. a validation
    loss: the model is in train mode again when the loop continues).

    ranks: train data-parallel as one of ranks.world ranks (scaling.data_parallel): `batches` are the global
    batches, the logged losses the global batch's, result.tokens counts every rank's.

    checkpointing: continue from the checkpoint at checkpointing.path if it holds one of this run (every rank loads
    it; the batches its steps consumed are drawn again and dropped: exact, at the data pipeline's cost), and save one
    (rank 0; under FSDP every rank gathers the state and rank 0 writes it) at a log boundary, after on_log and
    on_eval, once checkpointing.every_s seconds (or checkpointing.every_steps steps) have passed since the previous
    save (scaling.checkpoint). The result equals the uninterrupted run's, bit for bit on a CPU; a horizon evaluated
    before the checkpoint is not evaluated again. A save blocks the loop while it copies the state to the CPU; a
    background thread writes it, and train() waits for the last write before it returns or raises (its failure
    raised). Train seconds include the saves."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    torch.manual_seed(config.seed)  # any randomness inside training (the model and data have their own seeds)
    loss_fn, stepped = loss_function(config), model
    if config.compile == "blocks":  # here, not at the first step: a model without blocks fails before any work
        compile_blocks(model)
    if ranks is not None:
        loss_fn, stepped = ranks.loss(loss_fn), ranks.wrap(model, device)
    optimizer = make_optimizer(model, parametrization, config)  # after the wrap: FSDP replaces the parameters
    result, pending = TrainResult(grad_clip=config.grad_clip), []
    if checkpointing is not None:  # every rank loads it, before the batches are sharded (global batches)
        result = checkpoint.restore(checkpointing, model, optimizer, result)
        result.resumed_from_step = result.steps
        for _ in range(result.steps):
            next(batches)
    if ranks is not None:
        batches = ranks.shard(batches)
    before = cache_counts() if config.compile else None
    start = time.perf_counter() - result.seconds - result.eval_seconds  # a resumed run's clock goes on
    began, first = time.perf_counter(), result.steps
    with checkpoint.writes(checkpointing):  # the last save's write ends before train() returns or raises
        for step in range(result.steps, config.steps):
            inputs, targets = (t.to(device, non_blocking=True) for t in next(batches))
            loss = loss_fn(stepped, (inputs, targets))
            result.tokens += inputs.numel() * (ranks.world if ranks is not None else 1)
            result.steps = step + 1
            norm = optimizer_step(model, optimizer, loss, step, config)  # None without clipping, on every step
            if step == first:
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                result.first_step_seconds = time.perf_counter() - began
            pending.append((step, loss.detach(), lr_factor(step, config), norm))
            evaluate = on_eval is not None and step + 1 in eval_steps
            if (step + 1) % config.log_every == 0 or step + 1 == config.steps or evaluate:
                # one host sync per log interval: the losses and (when clipping) the gradient norms in one tensor
                norms = [n for *_, n in pending if n is not None]
                synced = torch.stack([loss for _, loss, _, _ in pending] + norms)
                values = (ranks.mean(synced) if ranks is not None else synced).tolist()
                rows = [(s, v, f) for (s, _, f, _), v in zip(pending, values)]
                result.grad_norms.extend(values[len(pending):] if norms else [math.nan] * len(pending))
                pending = []
                result.losses.extend(rows)
                bad = [s for s, loss, _ in rows if not math.isfinite(loss)]
                if on_log is not None:
                    on_log(step, rows)
                if bad:
                    result.diverged, result.diverged_step = True, bad[0]
                    break
                if evaluate:
                    began = time.perf_counter()
                    on_eval(step + 1, result)
                    model.train()
                    result.eval_seconds += time.perf_counter() - began
                if checkpointing is not None and (checkpointing.due(result.steps) if ranks is None
                                                  else ranks.saves(checkpointing, result.steps)):
                    result.seconds = time.perf_counter() - start - result.eval_seconds
                    checkpoint.save(checkpointing, model, optimizer, result, write=ranks is None or ranks.rank == 0)
    result.seconds = time.perf_counter() - start - result.eval_seconds
    if before is not None:
        result.compile_cache = counts_since(before)
    return result
