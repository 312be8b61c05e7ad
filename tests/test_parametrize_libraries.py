"""parametrize on the models people train: flash-linear-attention 0.6's GatedDeltaNet / GatedDeltaProduct and
transformers' Qwen3-Next, built on the CPU from small configs (no downloads). The built-in role maps give every
parameter a role, shape inference alone gives the same roles and multiplier sites, and save_pretrained /
from_pretrained keeps the outputs bit-identical."""
from __future__ import annotations

import pytest
import torch

from deltamup.models import Role
from deltamup.models.reference_ops import reference_ops
from deltamup.parametrizations import FLA, QWEN3_NEXT, parametrize, restore_multipliers
from deltamup.parametrizations.apply import multiplier_sites
from deltamup.parametrizations.multipliers import FIELDS

fla_models = pytest.importorskip("fla.models", reason="flash-linear-attention 0.6 is not installed",
                                 exc_type=ModuleNotFoundError)  # an fla that fails to import fails the tests
transformers = pytest.importorskip("transformers")

CPU = dict(fuse_norm=False, fuse_swiglu=False, fuse_cross_entropy=False, fuse_linear_cross_entropy=False)


def fla_gdn(width: int, tied: bool = False):
    """Heads fixed, head dims growing with width (the paper's layout, as deltamup's fla export writes it)."""
    return fla_models.GatedDeltaNetForCausalLM(fla_models.GatedDeltaNetConfig(
        hidden_size=width, num_hidden_layers=2, num_heads=2, head_dim=width // 4, expand_v=2,
        intermediate_size=2 * width, vocab_size=64, tie_word_embeddings=tied, use_cache=False, **CPU))


def fla_gdp(width: int):
    return fla_models.GatedDeltaProductForCausalLM(fla_models.GatedDeltaProductConfig(
        hidden_size=width, num_hidden_layers=2, num_heads=2, head_dim=width // 4, expand_v=2, num_householder=2,
        use_forget_gate=True, intermediate_size=2 * width, vocab_size=64, tie_word_embeddings=False, use_cache=False,
        **CPU))


def qwen3_next(width: int, moe: bool = False):
    """Qwen3-Next with three Gated DeltaNet layers and one gated attention layer; heads fixed, head dims growing."""
    return transformers.Qwen3NextForCausalLM(transformers.Qwen3NextConfig(
        vocab_size=64, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=4, num_attention_heads=2,
        num_key_value_heads=1, head_dim=width // 4, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=width // 4, linear_value_head_dim=width // 4, num_experts=4 if moe else 0,
        num_experts_per_tok=2, moe_intermediate_size=width // 2, shared_expert_intermediate_size=width // 2,
        use_cache=False))


MODELS = {"fla-gdn": (fla_gdn, FLA), "fla-gdn-tied": (lambda w: fla_gdn(w, tied=True), FLA),
          "fla-deltaproduct": (fla_gdp, FLA), "qwen3-next": (qwen3_next, QWEN3_NEXT),
          "qwen3-next-moe": (lambda w: qwen3_next(w, moe=True), QWEN3_NEXT)}


@pytest.mark.parametrize("which", list(MODELS))
def test_maps_give_every_parameter_a_role_and_shapes_alone_agree(which: str) -> None:
    make, role_map = MODELS[which]
    torch.manual_seed(0)
    model, base, delta = make(128), make(32), make(64)
    named = role_map.named_roles(model)  # raises if a parameter has no pattern
    assert len(named) == len(list(model.parameters()))
    by_map = parametrize(model, "gdn-mup", "sgd", base_model=base, delta_model=delta, roles=role_map, init=False)
    by_shapes = parametrize(model, "gdn-mup", "sgd", base_model=base, delta_model=delta, init=False)
    assert by_map.roles == named  # shapes alone cannot tell W_β from W_α: both gate matrices there
    assert by_shapes.roles == {n: Role.GATE_MATRIX if r is Role.BETA_MATRIX else r for n, r in named.items()}
    assert (by_shapes.width, by_shapes.base_width) == (128, 32)
    assert {r for r in named.values()} >= {Role.EMBEDDING, Role.HIDDEN, Role.GATE_MATRIX, Role.GATE_SCALAR,
                                          Role.CONV, Role.NORM_GAIN}
    structural, missing = multiplier_sites(by_shapes.structure, list(FIELDS))
    if which == "fla-gdn-tied":  # a tied lm_head holds the embedding matrix: its output is still the logits
        assert not any(r is Role.READOUT for r in named.values())
    assert not missing and set(structural) == set(role_map.multipliers.sites(model))


@pytest.mark.parametrize("which", ["fla-gdn", "fla-deltaproduct", "qwen3-next"])
def test_save_pretrained_from_pretrained_is_bit_identical(which: str, tmp_path) -> None:
    make, role_map = MODELS[which]
    torch.manual_seed(0)
    model = make(64)
    p = parametrize(model, "gdn-mup", "adamw", base_model=make(32), delta_model=make(48), roles=role_map)
    assert p.multipliers.readout == 8.0 and p.multipliers.logits == 0.5
    tokens = torch.randint(0, 64, (2, 20), generator=torch.Generator().manual_seed(0))
    with reference_ops(), torch.no_grad():
        before = model(tokens).logits
        model.save_pretrained(tmp_path)
        loaded = type(model).from_pretrained(tmp_path)
        assert loaded.config.deltamup["multipliers"]["readout"] == 8.0  # the record rides in config.json
        plain = loaded(tokens).logits  # from_pretrained builds the model without the hooks …
        restore_multipliers(loaded)    # … the config's record puts them back
        after = loaded(tokens).logits
    assert not torch.equal(plain, before)
    assert torch.equal(after, before)


def test_fla_multipliers_scale_what_deltamup_scales() -> None:
    """fla with gdn-mup-code's mixer-output multiplier and gdn-mup's readout/logits: the hooks scale the same tensors
    the forward would (checked against the same model with the factors written into its weights where exact)."""
    torch.manual_seed(0)
    model = fla_gdn(64)
    p = parametrize(model, "gdn-mup-code", "adamw", base_model=fla_gdn(32), delta_model=fla_gdn(48), roles=FLA)
    assert p.multipliers.mixer_output == 0.5 and p.multipliers.logits == 0.5
    tokens = torch.randint(0, 64, (1, 12))
    with reference_ops(), torch.no_grad():
        hooked = model(tokens).logits
        twin = fla_gdn(64)
        twin.load_state_dict({k: v for k, v in model.state_dict().items() if "deltamup" not in k})
        for layer in twin.model.layers:
            layer.attn.o_proj.weight.mul_(0.5)
        twin.lm_head.weight.mul_(0.5)
        torch.testing.assert_close(twin(tokens).logits, hooked, rtol=1e-5, atol=1e-6)
