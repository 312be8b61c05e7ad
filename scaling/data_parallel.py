"""Data-parallel training whose result does not depend on the number of ranks: train(..., ranks=Ranks(r, n)) on
every rank of an initialised torch.distributed process group (gloo on CPUs, nccl on GPUs).

Every rank draws the same global batches ([B, T]) and trains on its rows r::n ([B / n, T]). Its loss is its shard's
share of the global batch's mean loss (its supervised tokens counted against the global batch's), so DDP's mean of
the gradients is the one-rank gradient, also where shards hold different numbers of supervised tokens; the losses
the loop logs are averaged over the ranks, so every rank logs the global batch's loss and stops at the same step.

Sharding "ddp" keeps a full replica of the model and optimizer state on every rank (DistributedDataParallel);
"fsdp" shards both over the ranks (torch's FSDP2, fully_shard per block, then the root): each rank holds 1/world of
every parameter and of its optimizer moments, and all-gathers a block's parameters for its forward and backward.
The gradients are averaged over the ranks either way (DDP's all-reduce, FSDP's reduce-scatter), so the step is the
same. Under FSDP the parameters are DTensors: the optimizer is built from the sharded model, and checkpoints gather
full state dicts (scaling.checkpoint).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from .checkpoint import Checkpointing
from .data import Batch  # inputs [B, T] int64, targets [B, T] int64 (-100: not supervised)

SHARDINGS = ("ddp", "fsdp")  # replicate the model on every rank | shard it (and its optimizer state) over the ranks

Loss = Callable[[nn.Module, Batch], Tensor]


@dataclass(frozen=True)
class Ranks:
    """This process is rank `rank` of `world` data-parallel ranks, the model replicated ("ddp") or sharded ("fsdp")
    over them."""

    rank: int
    world: int
    sharding: str = "ddp"

    def __post_init__(self) -> None:
        if self.sharding not in SHARDINGS:
            raise ValueError(f"unknown sharding {self.sharding!r}; choose one of {', '.join(SHARDINGS)}")

    def shard(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """Rows rank::world of every global batch."""
        for inputs, targets in batches:
            yield inputs[self.rank::self.world].contiguous(), targets[self.rank::self.world].contiguous()

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """The module to step. ddp: `model` under DDP (it broadcasts rank 0's weights, then averages the gradients
        of every backward). fsdp: `model` itself, sharded in place: each of its `blocks`, then the root (embedding,
        final norm, readout); every rank must hold the same weights before (the same seed). Its parameters become
        new DTensor parameters that keep the old ones' attributes (their roles): build the optimizer after."""
        if self.sharding == "ddp":
            return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        tags = {name: dict(param.__dict__) for name, param in model.named_parameters()}
        # imported here: FSDP's modules take a second to import, in every trial process that would not use them
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (self.world,))
        for block in getattr(model, "blocks", ()):
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        for name, param in model.named_parameters():
            param.__dict__.update(tags[name])
        return model

    def saves(self, checkpointing: Checkpointing, steps: int) -> bool:
        """Whether this rank takes part in a checkpoint save now, after `steps` steps. ddp: rank 0, when its
        checkpoint is due. fsdp: every rank, when rank 0's is due (one broadcast): gathering the full state dicts is
        collective."""
        if self.sharding == "ddp":
            return self.rank == 0 and checkpointing.due(steps)
        due = [checkpointing.due(steps)]
        dist.broadcast_object_list(due, src=0)
        return due[0]

    def loss(self, mean_loss: Loss) -> Loss:
        """mean_loss (over a batch's supervised tokens) of this rank's shard × world × its supervised tokens / the
        global batch's: one all-reduce of a count per step."""
        def loss(model: nn.Module, batch: Batch) -> Tensor:
            supervised = (batch[1] != -100).sum()
            total = supervised.clone()
            dist.all_reduce(total)
            return mean_loss(model, batch) * (supervised * self.world / total)

        return loss

    def mean(self, values: Tensor) -> Tensor:
        """The element-wise mean of `values` over the ranks (gloo has no AVG: a sum, divided)."""
        values = values.clone()
        dist.all_reduce(values)
        return values / self.world
