"""Evaluation helpers shared by tasks, reports and the CLI.

accuracy / loss by position (length extrapolation), sequence accuracy, scaled accuracy, and the effective rank of
the recurrent state: erank(S) = exp(−Σ_k p_k log p_k), p_k = σ_k / Σ σ (Roy & Vetterli), per layer and head.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from deltamup.models import taps
from deltamup.scaling.data.task import Batch


@torch.no_grad()
def logits_of(model: nn.Module, inputs: Tensor, device: torch.device | str) -> Tensor:
    """inputs [B, T] -> fp32 logits [B, T, V] on the CPU."""
    return model(inputs.to(device)).float().cpu()


@torch.no_grad()
def correct_by_position(model: nn.Module, batches: Iterable[Batch],
                        device: torch.device | str) -> tuple[Tensor, Tensor]:
    """(hits [N, T] bool, supervised [N, T] bool) over all batches: argmax == target where target != -100."""
    hits, mask = [], []
    for inputs, targets in batches:
        pred = logits_of(model, inputs, device).argmax(-1)
        hits.append((pred == targets) & (targets != -100))
        mask.append(targets != -100)
    return torch.cat(hits), torch.cat(mask)


def accuracy_by_position(hits: Tensor, mask: Tensor) -> Tensor:
    """[T] fraction correct at each position among supervised ones (nan where none is supervised)."""
    return hits.sum(0) / mask.sum(0).where(mask.any(0), torch.tensor(float("nan")))


def sequence_accuracy(hits: Tensor, mask: Tensor, length: int) -> float:
    """Fraction of sequences whose supervised targets in the first `length` positions are all correct."""
    return (hits[:, :length] | ~mask[:, :length]).all(1).float().mean().item()


def scaled_accuracy(accuracy: float, chance: float) -> float:
    """(acc − chance) / (1 − chance): 0 at chance, 1 when perfect."""
    return (accuracy - chance) / (1 - chance)


@torch.no_grad()
def loss_by_position(model: nn.Module, batches: Iterable[Batch], device: torch.device | str) -> Tensor:
    """[T] mean cross-entropy (nats) at each position over all batches; nan where nothing is supervised."""
    total, count = None, None
    for inputs, targets in batches:
        logits = logits_of(model, inputs, device)
        loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="none")  # [B, T]
        mask = targets != -100
        total = loss.sum(0) if total is None else total + loss.sum(0)
        count = mask.sum(0) if count is None else count + mask.sum(0)
    return total / count.where(count > 0, torch.tensor(float("nan")))


def effective_rank(states: Tensor) -> Tensor:
    """states [..., K, V] -> [...]: exp of the entropy of the normalised singular values."""
    s = torch.linalg.svdvals(states.double())
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-300)
    entropy = -(p * p.clamp_min(1e-300).log()).sum(-1)
    return entropy.exp().float()


@torch.no_grad()
def state_erank_by_length(model: nn.Module, inputs: Tensor, lengths: Iterable[int],
                          device: torch.device | str) -> dict[int, Tensor]:
    """{t: [depth, H] mean effective rank over the batch of the state after the first t tokens of inputs [B, T]}.

    Runs the model once per prefix with a tap recorder active, which makes each mixer return its final state."""
    result = {}
    for t in lengths:
        with taps.record() as rec:
            model(inputs[:, :t].to(device))
        states = [v for k, v in rec.tensors.items() if k.endswith(".state")]
        if not states:
            raise ValueError("the model taps no '<block>.state': it has no delta-rule mixer")
        result[t] = torch.stack([effective_rank(s.cpu()).mean(0) for s in states])
    return result
