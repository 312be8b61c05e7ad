"""A model factory for `deltamup coord-check --model-factory fla_gdn:make_model` (docs/api.md): flash-linear-attention's
GatedDeltaNetForCausalLM at any width, with deltamup's head layout (6 heads, key head dim 0.75·width/6, value head dim
twice that, SwiGLU of ⌈8·width/3⌉, tied embeddings, 256-token vocabulary) and depth 2.

The fused norm and losses are off so that the model also runs on the CPU (deltamup runs fla's other GPU-only kernels
through deltamup.models.reference_ops there); on a GPU they may stay on.
"""
from __future__ import annotations

import math

from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM

HEADS, DEPTH = 6, 2


def make_model(width: int) -> GatedDeltaNetForCausalLM:
    return GatedDeltaNetForCausalLM(GatedDeltaNetConfig(
        hidden_size=width, num_hidden_layers=DEPTH, num_heads=HEADS, head_dim=round(0.75 * width / HEADS), expand_v=2,
        intermediate_size=math.ceil(8 * width / 3), vocab_size=256, tie_word_embeddings=True, norm_eps=1e-6,
        use_cache=False, fuse_norm=False, fuse_swiglu=False, fuse_cross_entropy=False, fuse_linear_cross_entropy=False))
