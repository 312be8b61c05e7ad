"""Data-parallel training whose result does not depend on the number of ranks: train(..., ranks=Ranks(r, n)) on
every rank of an initialised torch.distributed process group (gloo on CPUs, nccl on GPUs).

Every rank draws the same global batches ([B, T]) and trains on its rows r::n ([B / n, T]). Its loss is its shard's
share of the global batch's mean loss (its supervised tokens counted against the global batch's), so DDP's mean of
the gradients is the one-rank gradient, also where shards hold different numbers of supervised tokens; the losses
the loop logs are averaged over the ranks, so every rank logs the global batch's loss and stops at the same step.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from .data import Batch  # inputs [B, T] int64, targets [B, T] int64 (-100: not supervised)

Loss = Callable[[nn.Module, Batch], Tensor]


@dataclass(frozen=True)
class Ranks:
    """This process is rank `rank` of `world` data-parallel ranks."""

    rank: int
    world: int

    def shard(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """Rows rank::world of every global batch."""
        for inputs, targets in batches:
            yield inputs[self.rank::self.world].contiguous(), targets[self.rank::self.world].contiguous()

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """`model` under DDP (it broadcasts rank 0's weights, then averages the gradients of every backward)."""
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

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
