"""Finite groups as permutation groups: S_n, A_n and Z_n with their multiplication tables, computed here.

Elements are permutations of {0, …, n−1} written as tuples p (p[i] = image of i), listed identity first;
the product a·b is composition "b after a" read left to right: (a·b)[i] = b[a[i]], so the running product
of a word x_1 x_2 … x_t is the permutation that applies x_1 first.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

Perm = tuple[int, ...]


def compose(a: Perm, b: Perm) -> Perm:
    """a·b: apply a, then b."""
    return tuple(b[i] for i in a)


def is_even(p: Perm) -> bool:
    inversions = sum(1 for i, j in itertools.combinations(range(len(p)), 2) if p[i] > p[j])
    return inversions % 2 == 0


@dataclass(frozen=True)
class PermutationGroup:
    name: str
    elements: tuple[Perm, ...]  # identity first

    @property
    def order(self) -> int:
        return len(self.elements)

    @cached_property
    def index(self) -> dict[Perm, int]:
        return {p: i for i, p in enumerate(self.elements)}

    @cached_property
    def table(self) -> Tensor:
        """[order, order] int64: table[a, b] = index of a·b. KeyError if the elements are not closed."""
        idx = self.index
        return torch.tensor([[idx[compose(a, b)] for b in self.elements] for a in self.elements])

    def running_product(self, words: Tensor) -> Tensor:
        """words [B, T] element indices -> [B, T]: the product of each prefix x_1·…·x_t, as a scan that doubles its
        span each step (log₂ T table lookups over the whole batch; the product is associative)."""
        out = words.clone()
        table = self.table.to(words.device)
        span = 1
        while span < out.shape[1]:
            out[:, span:] = table[out[:, :-span], out[:, span:]]  # (x_{t-2s+1}…x_{t-s})·(x_{t-s+1}…x_t)
            span *= 2
        return out


def symmetric(n: int) -> PermutationGroup:
    return PermutationGroup(f"S{n}", tuple(itertools.permutations(range(n))))


def alternating(n: int) -> PermutationGroup:
    return PermutationGroup(f"A{n}", tuple(p for p in itertools.permutations(range(n)) if is_even(p)))


def cyclic(n: int) -> PermutationGroup:
    return PermutationGroup(f"Z{n}", tuple(tuple((i + s) % n for i in range(n)) for s in range(n)))


def group(name: str) -> PermutationGroup:
    """'S3', 'S4', 'A5', 'S5', 'Z7', … (case-insensitive)."""
    kinds = {"s": symmetric, "a": alternating, "z": cyclic}
    kind, n = name[:1].lower(), name[1:]
    if kind not in kinds or not n.isdigit() or not 1 <= int(n) <= (60 if kind == "z" else 6):
        raise ValueError(f"unknown group {name!r}; expected S<n> or A<n> (n ≤ 6) or Z<n> (n ≤ 60)")
    return kinds[kind](int(n))
