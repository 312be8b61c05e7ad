"""Group tables computed from permutations, and the word-problem tasks built on them."""
from __future__ import annotations

import itertools
from functools import reduce

import pytest
import torch

from deltamup.scaling.data import get_task
from deltamup.scaling.tasks.groups import alternating, compose, cyclic, group, symmetric


def sign(p: tuple[int, ...]) -> int:
    """(−1)^(n − number of cycles), independent of the inversion count the module uses."""
    seen, cycles = set(), 0
    for i in range(len(p)):
        if i not in seen:
            cycles += 1
            while i not in seen:
                seen.add(i)
                i = p[i]
    return (-1) ** (len(p) - cycles)


@pytest.mark.parametrize("g", [symmetric(3), symmetric(4), alternating(5), symmetric(5), cyclic(7)],
                         ids=lambda g: g.name)
def test_closure_identity_inverses(g):
    elements = set(g.elements)
    assert len(elements) == g.order
    assert all(compose(a, b) in elements for a in g.elements for b in g.elements)
    identity = tuple(range(len(g.elements[0])))
    assert g.elements[0] == identity
    table = g.table
    ids = torch.arange(g.order)
    assert torch.equal(table[0], ids) and torch.equal(table[:, 0], ids)
    # a Latin square: every element has an inverse and cancellation holds
    assert all(torch.equal(row.sort().values, ids) for row in table)
    assert all(torch.equal(col.sort().values, ids) for col in table.T)


def test_orders_and_commutativity():
    assert [symmetric(3).order, symmetric(4).order, alternating(5).order, symmetric(5).order, cyclic(12).order] == \
        [6, 24, 60, 120, 12]
    assert not torch.equal(symmetric(3).table, symmetric(3).table.T)  # S3 is the smallest non-abelian group
    assert torch.equal(cyclic(9).table, cyclic(9).table.T)


def test_a5_is_the_even_permutations_of_s5():
    evens = {p for p in itertools.permutations(range(5)) if sign(p) == 1}
    assert len(evens) == 60
    assert set(alternating(5).elements) == evens
    assert set(alternating(5).elements) <= set(symmetric(5).elements)


@pytest.mark.parametrize("name", ["S3", "A5", "S5", "Z5"])
def test_running_product_matches_direct_composition(name):
    g = group(name)
    words = torch.randint(0, g.order, (4, 30), generator=torch.Generator().manual_seed(0))
    running = g.running_product(words)
    for b in range(4):
        for t in (0, 1, 17, 29):
            direct = reduce(compose, [g.elements[i] for i in words[b, : t + 1].tolist()])
            assert g.elements[running[b, t]] == direct


def test_group_names_are_checked():
    for bad in ("S9", "Q3", "Z", "A"):
        with pytest.raises(ValueError):
            group(bad)


@pytest.mark.parametrize("spec,order", [("s3", 6), ("s4", 24), ("a5", 60), ("s5", 120), ({"name": "zn", "n": 5}, 5)])
def test_word_problem_task(spec, order):
    task = get_task(spec)
    assert task.vocab_size == order
    x, y = next(task.train_batches(3, 128, seed=1))
    assert x.shape == y.shape == (3, 128) and x.dtype == torch.long
    assert int(x.max()) < order and (y != -100).all()
    assert torch.equal(y, task.group.running_product(x))
    x2, _ = next(task.train_batches(3, 128, seed=1))
    assert torch.equal(x, x2)
    assert not torch.equal(x, next(task.train_batches(3, 128, seed=2))[0])
    val = task.val_batches(3, 128, count=2, seed=1)
    assert not torch.equal(val[0][0], x)  # held out: not the training stream


class Oracle(torch.nn.Module):
    """Logits that put all mass on the true running product (or on element 0 when `constant`)."""

    def __init__(self, task, constant: bool = False) -> None:
        super().__init__()
        self.task, self.constant = task, constant

    def forward(self, x):
        answer = torch.zeros_like(x) if self.constant else self.task.group.running_product(x)
        return torch.nn.functional.one_hot(answer, self.task.vocab_size).float()


def test_word_problem_evaluate():
    task = get_task({"name": "s3", "eval_sequences": 64, "test_length": 256, "report_lengths": [128, 256]})
    perfect = task.evaluate(Oracle(task), "cpu")
    assert perfect == {k: 1.0 for k in ("acc@128", "last_acc@128", "seq_acc@128", "acc@256", "last_acc@256",
                                        "seq_acc@256")}
    constant = task.evaluate(Oracle(task, constant=True), "cpu")
    assert abs(constant["acc@256"] - 1 / 6) < 0.03 and constant["seq_acc@128"] == 0.0
