"""The base model's hyperparameters other than the learning rate (µTransfer tunes them at the base width too).

Each is a base value the parametrization's table scales with width: output_mult multiplies the logits multiplier
(1/m under µP: the logits are output_mult · E h / m), embed_mult the embedding multiplier, init_mult every init
std the table sets (σ = 0.02 · init_mult at the base width for SP and µP), and weight_decay is the base weight
decay each role's wd rule multiplies. Defaults are the tables' own: 1, 1, 1 and the training config's decay.

    hp = BaseHparams(output_mult=2.0, init_mult=0.5)
    model = parametrizations.build_model(config, "gdn-mup", hparams=hp)
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

MODEL_HPARAMS = ("output_mult", "embed_mult", "init_mult")
HPARAMS = (*MODEL_HPARAMS, "weight_decay")  # weight_decay lives in the training config


@dataclass(frozen=True)
class BaseHparams:
    output_mult: float = 1.0
    embed_mult: float = 1.0
    init_mult: float = 1.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value}")

    @classmethod
    def of(cls, values: dict[str, float]) -> BaseHparams:
        """The model hyperparameters among `values` (others, such as weight_decay, are ignored)."""
        return cls(**{k: float(v) for k, v in values.items() if k in MODEL_HPARAMS})


def check_hparam(name: str, value: float) -> None:
    """ValueError for an unknown name or a value out of range (multipliers > 0, weight decay ≥ 0)."""
    if name not in HPARAMS:
        raise ValueError(f"unknown hyperparameter {name!r}; choose from {', '.join(HPARAMS)}")
    if name == "weight_decay":
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"weight_decay must not be negative, got {value}")
    else:
        BaseHparams(**{name: value})


def label(values: dict[str, float]) -> str:
    """"output_mult=2,init_mult=0.5" in HPARAMS order ("" for none): how trial records and reports name them."""
    return ",".join(f"{k}={values[k]:g}" for k in HPARAMS if k in values)


def parse_label(text: str) -> dict[str, float]:
    """label()'s inverse."""
    out = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        check_hparam(name, float(value))
        out[name] = float(value)
    return out
