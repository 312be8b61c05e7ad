"""Parameter roles: the one place that says what kind of tensor a parameter is.

Every parameter of a deltamup model carries `param.role` (a Role), set where the parameter is created. The
parametrization tables (parametrizations/tables.py) map roles to rules; nothing else inspects names or shapes.
"""
from __future__ import annotations

from enum import Enum

import torch
from torch import nn


class Role(str, Enum):
    EMBEDDING = "embedding"        # token embedding [vocab, d] (also the readout when tied)
    READOUT = "readout"            # untied output matrix [vocab, d]
    HIDDEN = "hidden"              # width-to-width matrices: W_q, W_k, W_v, W_g, W_o, MLP
    GATE_MATRIX = "gate_matrix"    # W_α (a_proj) [heads, d]; routers; W_β too where it shares W_α's matrix
    BETA_MATRIX = "beta_matrix"    # W_β (b_proj) [heads·n_h, d], its own matrix
    GATE_SCALAR = "gate_scalar"    # A_log and dt_bias: [heads]
    CONV = "conv"                  # depthwise causal short-conv kernels [channels, 1, 4]
    NORM_GAIN = "norm_gain"        # RMSNorm and gated-RMSNorm gains

    def __str__(self) -> str:
        return self.value


GATE_MATRICES = (Role.GATE_MATRIX, Role.BETA_MATRIX)  # the width onto a fixed number of gate logits


def tagged(param: nn.Parameter, role: Role) -> nn.Parameter:
    """Attach `role` to `param` and return it."""
    param.role = role
    return param


def role_of(param: torch.Tensor) -> Role:
    try:
        return param.role
    except AttributeError:
        raise ValueError(f"parameter of shape {tuple(param.shape)} has no role; "
                         "create it with deltamup.models.roles.tagged") from None
