"""Formal languages (Grazzi et al. 2025, "Unlocking state-tracking…"; DeltaProduct §5.2): parity, modular arithmetic
without brackets (+ − × with the usual precedence) and with brackets (+ −, nested). A sequence is an expression of
L tokens, then '=', then padding; only the '=' position is supervised, with the answer as target (a digit token,
shared by inputs and targets). Train lengths 3–40, test 40–256; "scaled accuracy" = (acc − chance)/(1 − chance).
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from deltamup.scaling.data.task import Batch, register_task

from . import metrics

Expression = tuple[list[str], int]  # tokens, answer


def parity(rng: random.Random, length: int, modulus: int) -> Expression:
    bits = [rng.randrange(2) for _ in range(length)]
    return [str(b) for b in bits], sum(bits) % 2


def arithmetic(rng: random.Random, length: int, modulus: int) -> Expression:
    """n numbers and n − 1 operators (length is made odd by dropping one token); × binds tighter than + −."""
    n = (length + 1) // 2
    numbers = [rng.randrange(modulus) for _ in range(n)]
    ops = [rng.choice("+-*") for _ in range(n - 1)]
    tokens = [str(numbers[0])]
    for op, x in zip(ops, numbers[1:]):
        tokens += [op, str(x)]
    return tokens, evaluate(numbers, ops, modulus)


def evaluate(numbers: list[int], ops: list[str], modulus: int) -> int:
    """numbers[0] ops[0] numbers[1] … mod `modulus`, × before + −, in one pass (no recursion, no eval): a sum of
    signed products."""
    total, term = 0, numbers[0]
    for op, x in zip(ops, numbers[1:]):
        if op == "*":
            term = term * x % modulus
        else:
            total, term = (total + term) % modulus, x if op == "+" else -x
    return (total + term) % modulus


def bracketed(rng: random.Random, length: int, modulus: int) -> Expression:
    """Exactly `length` tokens: x | −x | (x) | (−x) below 5 tokens, else (left ± right) with random split. Built
    depth-first with an explicit stack (any length, no recursion limit), drawing from `rng` in the order of the
    recursive definition: the split, the left part, the right part, then the operator."""
    work: list[int | None] = [length]  # a length to build, or None: join the two parts on top of `done`
    done: list[Expression] = []
    while work:
        n = work.pop()
        if n is None:
            (right, b), (left, a) = done.pop(), done.pop()
            op = rng.choice("+-")
            done.append((["(", *left, op, *right, ")"], (a + b if op == "+" else a - b) % modulus))
        elif n < 5:
            x = rng.randrange(modulus)
            short = {1: ([str(x)], x), 2: (["-", str(x)], -x), 3: (["(", str(x), ")"], x),
                     4: (["(", "-", str(x), ")"], -x)}
            tokens, value = short[n]
            done.append((tokens, value % modulus))
        else:
            left_len = rng.randint(1, n - 4)
            work += [None, n - 3 - left_len, left_len]  # left is built first, then right, then joined
    return done[0]


LANGUAGES: dict[str, tuple[Callable[[random.Random, int, int], Expression], str]] = {
    # name: (generator, operator symbols besides the digits)
    "parity": (parity, ""),
    "mod_arithmetic": (arithmetic, "+-*"),
    "mod_arithmetic_brackets": (bracketed, "+-()"),
}


@dataclass
class FormalLanguage:
    """seq_len (train_batches, val_batches) is the padded width and must exceed train_lengths[1]; test sequences
    are test_lengths[1] + 1 wide. The vocabulary is the digits 0…m−1, the operators, '=' and a padding token."""

    name: str = "parity"
    modulus: int = 5
    train_lengths: tuple[int, int] = (3, 40)
    test_lengths: tuple[int, int] = (40, 256)
    eval_sequences: int = 512
    eval_batch_size: int = 64
    vocab: list[str] = field(init=False)
    vocab_size: int = field(init=False)

    def __post_init__(self) -> None:
        if self.name not in LANGUAGES:
            raise ValueError(f"unknown formal language {self.name!r}; choose one of {', '.join(LANGUAGES)}")
        if self.name == "parity":
            self.modulus = 2
        if self.modulus < 2:
            raise ValueError(f"modulus must be ≥ 2, got {self.modulus}")
        for lo, hi in (self.train_lengths, self.test_lengths):
            if not 1 <= lo <= hi:
                raise ValueError(f"lengths must be 1 ≤ min ≤ max, got ({lo}, {hi})")
        generate, ops = LANGUAGES[self.name]
        self.generate = generate
        self.vocab = [str(d) for d in range(self.modulus)] + list(ops) + ["=", "<pad>"]
        self.vocab_size = len(self.vocab)
        self.ids = {t: i for i, t in enumerate(self.vocab)}

    @property
    def chance(self) -> float:
        return 1 / self.modulus

    def batch(self, batch_size: int, lengths: tuple[int, int], width: int, rng: random.Random) -> Batch:
        """inputs, targets [B, width]: expression, '=', padding; the target at '=' is the answer, −100 elsewhere."""
        if width <= lengths[1]:
            raise ValueError(f"seq_len {width} must exceed the longest expression ({lengths[1]} tokens) by one")
        inputs = torch.full((batch_size, width), self.ids["<pad>"], dtype=torch.long)
        targets = torch.full((batch_size, width), -100, dtype=torch.long)
        for b in range(batch_size):
            tokens, answer = self.generate(rng, rng.randint(*lengths), self.modulus)
            ids = [self.ids[t] for t in tokens] + [self.ids["="]]
            inputs[b, : len(ids)] = torch.tensor(ids)
            targets[b, len(ids) - 1] = answer
        return inputs, targets

    def train_batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
        rng = random.Random(seed)
        while True:
            yield self.batch(batch_size, self.train_lengths, seq_len, rng)

    def val_batches(self, batch_size: int, seq_len: int, count: int, seed: int) -> list[Batch]:
        rng = random.Random(seed + 1_000_003)
        return [self.batch(batch_size, self.train_lengths, seq_len, rng) for _ in range(count)]

    def evaluate(self, model: nn.Module, device: torch.device | str, seed: int = 0) -> dict[str, float]:
        """Accuracy of the final answer and scaled accuracy at train lengths and at test lengths."""
        out = {}
        for split, lengths in (("train_len", self.train_lengths), ("test_len", self.test_lengths)):
            rng = random.Random(f"{seed}-{split}")
            n, b = self.eval_sequences, self.eval_batch_size
            batches = [self.batch(min(b, n - i), lengths, lengths[1] + 1, rng) for i in range(0, n, b)]
            hits, mask = metrics.correct_by_position(model, batches, device)
            acc = (hits.sum() / mask.sum()).item()
            out[f"acc_{split}"] = acc
            out[f"scaled_acc_{split}"] = metrics.scaled_accuracy(acc, self.chance)
        return out


for _name in LANGUAGES:
    register_task(_name)(lambda _n=_name, **kw: FormalLanguage(name=_n, **kw))
