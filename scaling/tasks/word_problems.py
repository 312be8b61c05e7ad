"""Group word problems (Merrill et al.; DeltaProduct §5.1): a word of uniformly drawn group elements, and at every
position the running product of the prefix. Tokens are element indices 0 … |G|−1, shared by inputs and targets,
so vocab_size = |G|."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from deltamup.scaling.data.task import Batch, register_task

from . import metrics
from .groups import PermutationGroup, group


def word_batch(g: PermutationGroup, batch_size: int, length: int, gen: torch.Generator) -> Batch:
    words = torch.randint(0, g.order, (batch_size, length), generator=gen)
    return words, g.running_product(words)


@dataclass
class WordProblem:
    """task: {name: s3 | s4 | a5 | s5, ...} or {name: zn, n: 5}. seq_len (train_batches) is the word length; the
    paper trains at 128. evaluate() measures words of test_length (512) and reports accuracy at report_lengths."""

    group_name: str = "S3"
    test_length: int = 512
    report_lengths: tuple[int, ...] = (128, 256, 512)
    eval_sequences: int = 256
    eval_batch_size: int = 64
    name: str = field(init=False)
    vocab_size: int = field(init=False)

    def __post_init__(self) -> None:
        self.group = group(self.group_name)
        self.name, self.vocab_size = self.group.name.lower(), self.group.order
        if any(not 1 <= t <= self.test_length for t in self.report_lengths):
            raise ValueError(f"report_lengths must lie in 1…test_length={self.test_length}")
        if self.eval_sequences < 1 or self.eval_batch_size < 1:
            raise ValueError("eval_sequences and eval_batch_size must be positive")

    def train_batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
        gen = torch.Generator().manual_seed(seed)
        while True:
            yield word_batch(self.group, batch_size, seq_len, gen)

    def val_batches(self, batch_size: int, seq_len: int, count: int, seed: int) -> list[Batch]:
        gen = torch.Generator().manual_seed(seed + 1_000_003)
        return [word_batch(self.group, batch_size, seq_len, gen) for _ in range(count)]

    def test_batches(self, seed: int = 0) -> list[Batch]:
        n, b = self.eval_sequences, self.eval_batch_size
        gen = torch.Generator().manual_seed(seed + 2_000_003)
        return [word_batch(self.group, min(b, n - i), self.test_length, gen) for i in range(0, n, b)]

    def evaluate(self, model: nn.Module, device: torch.device | str, seed: int = 0) -> dict[str, float]:
        """acc@t: mean token accuracy over positions 1…t; last_acc@t: accuracy at position t; seq_acc@t: fraction
        of words whose first t running products are all right. Chance is 1/|G|."""
        hits, mask = metrics.correct_by_position(model, self.test_batches(seed), device)
        by_pos = metrics.accuracy_by_position(hits, mask)
        out = {}
        for t in self.report_lengths:
            out[f"acc@{t}"] = by_pos[:t].mean().item()
            out[f"last_acc@{t}"] = by_pos[t - 1].item()
            out[f"seq_acc@{t}"] = metrics.sequence_accuracy(hits, mask, t)
        return out


for _name in ("S3", "S4", "A5", "S5"):
    register_task(_name.lower())(lambda _g=_name, **kw: WordProblem(group_name=_g, **kw))


@register_task("zn")
def cyclic_word_problem(n: int = 5, **options) -> WordProblem:
    return WordProblem(group_name=f"Z{n}", **options)
