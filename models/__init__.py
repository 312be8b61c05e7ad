"""Delta-rule language models: ModelConfig, DeltaLM, the role tags every parameter carries and the probe taps.

A model is built at a parametrization's init and multipliers by deltamup.parametrizations.build_model."""
from __future__ import annotations

from .config import KINDS, ModelConfig, Multipliers
from .lm import DeltaLM
from .roles import GATE_MATRICES, Role, role_of, tagged

__all__ = ["KINDS", "ModelConfig", "Multipliers", "DeltaLM", "Role", "GATE_MATRICES", "role_of", "tagged"]
