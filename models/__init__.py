"""Delta-rule language models: ModelConfig, build_model, and the role tags every parameter carries."""
from __future__ import annotations

import torch

from .config import KINDS, ModelConfig, Multipliers
from .lm import DeltaLM
from .roles import Role, role_of, tagged


def build_model(config: ModelConfig, parametrization: str = "sp", optimizer: str = "adamw",
                seed: int | None = None) -> DeltaLM:
    """A DeltaLM with the parametrization's forward multipliers and initialisation at config.width.

    seed: draws the initialisation from torch.manual_seed(seed) (None: the global RNG as it is)."""
    import parametrizations

    p = parametrizations.get(parametrization)
    parametrizations.check_optimizer(optimizer)
    if seed is not None:
        torch.manual_seed(seed)
    model = DeltaLM(config, parametrizations.multipliers(p, optimizer, config.width_mult, config.width))
    return parametrizations.initialize(model, p, optimizer)


__all__ = ["KINDS", "ModelConfig", "Multipliers", "DeltaLM", "Role", "role_of", "tagged", "build_model"]
