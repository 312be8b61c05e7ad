"""Roles from shapes: which dimensions of each parameter grow with width (as microsoft/mup's set_base_shapes finds
them), refined by the module structure.

A dimension grows when its size differs between the base model and the delta model (the same architecture at two
widths; without a delta model, between the base model and the model). Then, per parameter:

    growing dims  tensor                                      role
    2 (or more)   matrix, or a stack of them ([experts, d, f])  hidden
    1             nn.Embedding weight; else the first [n, d]    embedding  (n: the vocabulary, fixed)
                  parameter that is no nn.Linear's weight
    1             [n, d] with n = the embedding's vocabulary    readout    (an untied output layer)
    1             [h, d], any other fixed h                     gate_matrix (W_α and W_β alike: shapes cannot
                                                                tell them apart; a role map names W_β beta_matrix)
    1             [c, 1, k] (a depthwise convolution)           conv
    0 or 1        a vector of a normalisation module            norm_gain  (class name containing "Norm")
    0             a vector of a module that also holds a gate   gate_scalar
                  matrix (directly or in a direct child)

How W_α and W_β are told apart from mup's readout: both are matrices with one growing side (fan-in d), but the fixed
side of the readout is the vocabulary (the embedding's first dimension), while a gate matrix's fixed side is the
number of heads (n_h × heads for DeltaProduct's W_β), which is neither. mup treats any such matrix as a readout
(MuReadout, logits × 1/m); GDN-µP initialises and trains it like a hidden matrix (its output is a per-head gate
pre-activation that must stay Θ(1)), and under SGD at LR ∝ 1/√m. A_log and dt_bias ([heads], no growing dimension)
are recognised as the vectors that sit in the same module as a gate matrix.

Everything else (a bias, a vector outside a norm and a mixer, a matrix that does not grow) is left unclassified: the
caller reports all of them in one error instead of training them at a silent default.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch import nn

from deltamup.models.roles import GATE_MATRICES, Role


@dataclass(frozen=True)
class Growth:
    """One parameter's shape in the model and in the base model, and which of its dimensions grow with width."""

    shape: tuple[int, ...]
    base: tuple[int, ...]
    grows: tuple[bool, ...]

    @property
    def ninf(self) -> int:
        return sum(self.grows)

    def describe(self) -> str:
        return "[" + ", ".join(f"{n}*" if g else str(n) for n, g in zip(self.shape, self.grows)) + "]"


def _trainable(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {n: tuple(p.shape) for n, p in model.named_parameters() if p.requires_grad}


def _list(names, limit: int = 6) -> str:
    names = sorted(names)
    return ", ".join(names[:limit]) + (f" … ({len(names)} in all)" if len(names) > limit else "")


def growth(model: nn.Module, base_model: nn.Module, delta_model: nn.Module | None = None) -> dict[str, Growth]:
    """{parameter name: Growth} for every trainable parameter; ValueError (one line) when the base or delta model is
    not the same architecture (other parameter names or ranks) or when nothing grows."""
    shapes = _trainable(model)
    base = _trainable(base_model)
    delta = _trainable(delta_model) if delta_model is not None else shapes
    for label, other in (("base", base), ("delta", delta)):
        if set(other) != set(shapes):
            lacks, extra = set(shapes) - set(other), set(other) - set(shapes)
            raise ValueError(f"the {label} model is not the model's architecture: "
                             + "; ".join(part for part in (f"it lacks {_list(lacks)}" if lacks else "",
                                                           f"it has {_list(extra)} the model lacks" if extra else "")
                                         if part))
        ranks = [n for n in shapes if len(other[n]) != len(shapes[n])]
        if ranks:
            raise ValueError(f"the {label} model is not the model's architecture: {_list(ranks)} have another "
                             "number of dimensions")
    out = {n: Growth(shapes[n], base[n], tuple(b != d for b, d in zip(base[n], delta[n]))) for n in shapes}
    if not any(g.ninf for g in out.values()):
        raise ValueError("no dimension differs between the base model and the "
                         + ("delta model" if delta_model is not None else "model")
                         + ": pass delta_model= (the same architecture at another width) so the width dimensions "
                           "can be found")
    return out


def _is_norm(module: nn.Module) -> bool:
    return "norm" in type(module).__name__.lower()


def _owner(model: nn.Module, name: str) -> tuple[str, nn.Module]:
    prefix = name.rpartition(".")[0]
    return prefix, model.get_submodule(prefix)


def find_embedding(model: nn.Module, shapes: Mapping[str, Growth]) -> str | None:
    """The token embedding's parameter name: an nn.Embedding's weight (the one with the most rows, if there are
    several), else the first [n, d] parameter with only d growing that is not an nn.Linear's weight."""
    embeddings = [n for n in shapes if n.endswith(".weight") and isinstance(_owner(model, n)[1], nn.Embedding)]
    if embeddings:
        return max(embeddings, key=lambda n: shapes[n].shape[0])
    return next((n for n, g in shapes.items()
                 if g.grows == (False, True) and not isinstance(_owner(model, n)[1], nn.Linear)), None)


def classify(model: nn.Module, shapes: Mapping[str, Growth], known: Mapping[str, Role] | None = None
             ) -> tuple[dict[str, Role], dict[str, str]]:
    """({name: Role} for every parameter the rules above classify, {name: why not} for the others). `known` roles
    (from a role map) are taken as they are and count as structure (a gate matrix named by the map makes its
    module's vectors gate scalars)."""
    known = dict(known or {})
    embedding = find_embedding(model, shapes) if not any(r is Role.EMBEDDING for r in known.values()) else None
    vocab = {shapes[n].shape[0] for n, r in known.items() if r is Role.EMBEDDING}
    if embedding is not None:
        vocab.add(shapes[embedding].shape[0])
    roles: dict[str, Role] = dict(known)
    pending: list[str] = []
    for name, g in shapes.items():
        if name in roles:
            continue
        _, module = _owner(model, name)
        if isinstance(module, nn.Embedding) or name == embedding:
            roles[name] = Role.EMBEDDING
        elif g.ninf >= 2:
            roles[name] = Role.HIDDEN
        elif len(g.shape) == 2 and g.grows == (False, True):
            roles[name] = Role.READOUT if g.shape[0] in vocab else Role.GATE_MATRIX
        elif len(g.shape) == 3 and g.grows == (True, False, False) and g.shape[1] == 1:
            roles[name] = Role.CONV
        elif len(g.shape) == 1 and _is_norm(module):
            roles[name] = Role.NORM_GAIN
        else:
            pending.append(name)
    gated = {_owner(model, n)[0] for n, r in roles.items() if r in GATE_MATRICES}
    gated |= {p.rpartition(".")[0] for p in gated}  # the module holding a gate-matrix Linear
    problems = {}
    for name in pending:
        g = shapes[name]
        if len(g.shape) == 1 and not g.ninf and _owner(model, name)[0] in gated:
            roles[name] = Role.GATE_SCALAR
        else:
            problems[name] = _why(g)
    return roles, problems


def _why(g: Growth) -> str:
    if len(g.shape) == 1:
        return ("a vector that grows with width outside a norm (a bias?)" if g.ninf else
                "a fixed-size vector outside a norm and outside a module with a gate matrix")
    if not g.ninf:
        return "a tensor none of whose dimensions grows with width"
    return "a tensor with one growing dimension that is neither an embedding, readout, gate matrix nor conv"


@dataclass(frozen=True)
class Mixer:
    """A token mixer found from its gate parameters: its module name, its output norm's (None: it has none; "?":
    more than one norm child), its block's (the module holding it) and its index among the blocks."""

    name: str
    norm: str | None
    block: str
    index: int


@dataclass(frozen=True)
class Structure:
    """Where a model's forward multipliers and probes sit: the embedding module, the module that computes the
    logits (None: not found, e.g. a tied readout computed inside the forward) and the token mixers."""

    embedding: str | None
    logits: str | None
    mixers: tuple[Mixer, ...]


def _index(name: str, fallback: int) -> int:
    return next((int(part) for part in name.split(".") if part.isdigit()), fallback)


def structure(model: nn.Module, roles: Mapping[str, Role]) -> Structure:
    """The Structure of `model` given its parameters' roles.

    Token mixers: the modules holding gate scalars, and the parents of modules holding gate matrices, that have one
    norm among their direct children (its input is o before the output norm, where GDN-µP's √d acts) or hold gate
    scalars themselves; a mixer's output is its module's output. A router (a gate matrix in a module without a norm
    child nor gate scalars) is no mixer."""
    params = dict(model.named_parameters())
    embedding = next((n for n, r in roles.items() if r is Role.EMBEDDING
                      and isinstance(_owner(model, n)[1], nn.Embedding)), None)
    embedding = embedding or next((n for n, r in roles.items() if r is Role.EMBEDDING), None)
    embedding_module = _owner(model, embedding)[0] if embedding else None
    readout = next((n for n, r in roles.items() if r is Role.READOUT), None)
    if readout is not None:
        logits = _owner(model, readout)[0]
    else:  # tied: a module other than the embedding whose weight is the embedding matrix (HF's lm_head)
        tied = params.get(embedding) if embedding else None
        logits = next((n for n, m in model.named_modules(remove_duplicate=False)
                       if tied is not None and getattr(m, "weight", None) is tied and n != embedding_module), None)
    scalars = {_owner(model, n)[0] for n, r in roles.items() if r is Role.GATE_SCALAR}
    matrices = {_owner(model, n)[0].rpartition(".")[0] for n, r in roles.items() if r in GATE_MATRICES}
    order = [n for n, _ in model.named_modules()]
    mixers = []
    for name in sorted((scalars | matrices) - {""}, key=order.index):  # the model itself is no mixer
        module = model.get_submodule(name)
        norms = [child for child, m in module.named_children() if _is_norm(m)]
        if not norms and name not in scalars:
            continue
        norm = f"{name}.{norms[0]}" if len(norms) == 1 else (None if not norms else "?")
        block = name.rpartition(".")[0]
        mixers.append(Mixer(name, norm, block, _index(name, len(mixers))))
    return Structure(embedding_module or None, logits or None, tuple(mixers))
