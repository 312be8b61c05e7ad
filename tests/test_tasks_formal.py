"""Formal-language tasks: answers checked independently of the generators, supervision only at '='."""
from __future__ import annotations

import pytest
import torch

from deltamup.scaling.data import get_task
from deltamup.scaling.tasks.metrics import scaled_accuracy


def decode(task, row):
    tokens = [task.vocab[i] for i in row.tolist()]
    return tokens[: tokens.index("=")]


def no_bracket_value(tokens: list[str], m: int) -> int:
    """+ − × with × first, by splitting into products (an evaluator independent of Python's eval)."""
    total, sign, product = 0, 1, int(tokens[0])
    for op, x in zip(tokens[1::2], tokens[2::2]):
        if op == "*":
            product *= int(x)
        else:
            total += sign * product
            sign, product = (1 if op == "+" else -1), int(x)
    return (total + sign * product) % m


@pytest.mark.parametrize("name", ["parity", "mod_arithmetic", "mod_arithmetic_brackets"])
def test_batches_are_supervised_only_at_the_answer(name):
    task = get_task(name)
    x, y = next(task.train_batches(64, 48, seed=0))
    assert x.shape == y.shape == (64, 48)
    supervised = y != -100
    assert torch.equal(supervised.sum(1), torch.ones(64, dtype=torch.long))
    eq = task.vocab.index("=")
    assert torch.equal(supervised, x == eq)
    lengths = supervised.float().argmax(1)
    assert int(lengths.min()) >= 3 and int(lengths.max()) <= 40
    for row, target in zip(x, y[supervised]):
        tokens = decode(task, row)
        if name == "parity":
            expected = sum(map(int, tokens)) % 2
        elif name == "mod_arithmetic":
            expected = no_bracket_value(tokens, task.modulus)
        else:
            expected = eval("".join(tokens)) % task.modulus
        assert int(target) == expected
    assert torch.equal(x, next(task.train_batches(64, 48, seed=0))[0])


def test_seq_len_must_fit_the_longest_expression():
    with pytest.raises(ValueError, match="seq_len"):
        next(get_task("parity").train_batches(2, 40, seed=0))
    with pytest.raises(ValueError):
        get_task({"name": "parity", "train_lengths": (10, 3)})


def test_evaluate_scaled_accuracy():
    task = get_task({"name": "parity", "eval_sequences": 128})

    class Parity(torch.nn.Module):
        def forward(self, x):  # the parity of the bits seen so far: right at '='
            bits = (x == task.vocab.index("1")).long().cumsum(1) % 2
            return torch.nn.functional.one_hot(bits, task.vocab_size).float()

    metrics = task.evaluate(Parity(), "cpu")
    assert metrics["scaled_acc_test_len"] == 1.0 and metrics["scaled_acc_train_len"] == 1.0
    assert scaled_accuracy(0.5, 0.5) == 0.0 and scaled_accuracy(0.6, 0.2) == pytest.approx(0.5)
