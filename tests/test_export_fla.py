"""The fla role map and config.json against real flash-linear-attention 0.6 models built on the CPU.

An export's fla config.json must build an fla model whose every parameter has the shape and the role of the
corresponding deltamup parameter, so the exported µP LRs land on the right tensors."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from deltamup import parametrizations
from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.parametrizations import export as ex
from deltamup.parametrizations.multipliers import uninstall
from deltamup.parametrizations.rolemap import FLA, FLA_MULTIPLIERS, attach_multipliers

fla_models = pytest.importorskip(  # an fla that is installed but fails to import fails the tests
    "fla.models", reason="flash-linear-attention is not installed: scripts/install --test",
    exc_type=ModuleNotFoundError)

FLA_CLASSES = {"gdn": (fla_models.GatedDeltaNetConfig, fla_models.GatedDeltaNetForCausalLM),
               "deltaproduct": (fla_models.GatedDeltaProductConfig, fla_models.GatedDeltaProductForCausalLM)}
# fla parameter name -> deltamup parameter name (written out by hand, independent of the role map under test)
RENAMES = [(r"^model\.embeddings\.weight$", "embedding"), (r"^lm_head\.weight$", "readout.weight"),
           (r"^model\.norm\.", "final_norm."), (r"^model\.layers\.", "blocks."), (r"\.attn_norm\.", ".mixer_norm."),
           (r"\.attn\.", ".mixer."), (r"_conv1d\.", "_conv."), (r"\.mlp\.(gate|up|down)_proj\.", r".mlp.\1.")]


def deltamup_name(fla_name: str) -> str:
    for pattern, repl in RENAMES:
        fla_name = re.sub(pattern, repl, fla_name)
    return fla_name


def fla_model(export: ex.Export, path: Path) -> torch.nn.Module:
    ex.write_export(export, path, "fla")
    config_class, model_class = FLA_CLASSES[export.model["kind"]]
    return model_class(config_class.from_json_file(str(path)))


@pytest.mark.parametrize("kind,tied", [("gdn", True), ("gdn", False), ("deltaproduct", True)])
def test_fla_model_from_the_export_gets_the_same_roles_shapes_and_lrs(tmp_path: Path, kind: str, tied: bool) -> None:
    config = ModelConfig(kind=kind, width=192, depth=2, heads=2, vocab_size=64, base_width=64, tie_embeddings=tied,
                         householder=2 if kind == "deltaproduct" else 1)
    exp = ex.make_export("gdn-mup", "sgd", config, lr=0.3, weight_decay=0.01, tuned_width=64)
    model = fla_model(exp, tmp_path / "config.json")
    ours = dict(build_model(config, "gdn-mup", "sgd").named_parameters())
    fla_params = dict(model.named_parameters())
    assert sorted(deltamup_name(n) for n in fla_params) == sorted(ours)
    roles = FLA.roles(model)
    for name, p in fla_params.items():
        twin = ours[deltamup_name(name)]
        assert (tuple(p.shape), roles[id(p)]) == (tuple(twin.shape), twin.role), name
    lrs = {id(p): g["lr"] for g in exp.build_optimizer(model, roles=roles).param_groups for p in g["params"]}
    for name, p in fla_params.items():
        assert lrs[id(p)] == pytest.approx(exp.groups[str(ours[deltamup_name(name)].role)].lr), name
    assert parametrizations.load_export(tmp_path / "config.json") == exp
    # what fla's config cannot hold is said in the file: gdn-mup's √d readout and 1/m logits multipliers
    note = model.config.deltamup_note
    assert "readout × 13.8564" in note and "logits × 0.333333" in note and "a different model" in note


def test_fla_shape_mismatch_is_reported(tmp_path: Path) -> None:
    config = ModelConfig(width=192, depth=2, heads=2, vocab_size=64, base_width=64)
    model = fla_model(ex.make_export("gdn-mup", "adamw", config, lr=1e-2), tmp_path / "a.json")
    wider = ex.make_export("gdn-mup", "adamw", config.with_width(256), lr=1e-2)
    with pytest.raises(ValueError, match=r"model shape does not match this export \(width 256.*hidden: export"):
        wider.build_optimizer(model, roles=FLA.roles(model))


class Captured(Exception):
    """Stops a forward once the tensor reaching a module has been seen (fla's fused kernels need a GPU)."""


def test_fla_multipliers_scale_the_right_tensors(tmp_path: Path) -> None:
    config = ModelConfig(width=256, depth=1, heads=2, vocab_size=64, base_width=64)  # m = 4, √d = 16
    exp = ex.make_export("gdn-mup-code", "adamw", config, lr=1e-2)
    model = fla_model(exp, tmp_path / "config.json")
    mults = parametrizations.multipliers("gdn-mup", "adamw", 4.0, 256)  # readout √d, logits 1/m
    attach_multipliers(model, mults, FLA_MULTIPLIERS)
    x = torch.randn(2, 3, 256)
    assert torch.allclose(model.lm_head(x), x @ model.lm_head.weight.T * 0.25)
    seen = []

    def capture(_module, args):
        seen.append(args[0])
        raise Captured

    attn = model.model.layers[0].attn
    attn.o_norm.register_forward_pre_hook(capture)
    o = torch.randn(1, 3, 2, attn.head_v_dim)
    with pytest.raises(Captured):
        attn.o_norm(o, torch.randn_like(o))
    assert torch.allclose(seen[0], o * 16.0)
    fused = fla_model(exp, tmp_path / "fused.json")
    fused.config.fuse_linear_cross_entropy = True
    with pytest.raises(ValueError, match="fuse_linear_cross_entropy"):
        attach_multipliers(fused, mults, FLA_MULTIPLIERS)
    with pytest.raises(ValueError, match="no module for the readout multiplier"):
        attach_multipliers(build_model(config), mults, FLA_MULTIPLIERS)


def test_fla_readout_eps_scales_the_output_norms_eps(tmp_path: Path) -> None:
    config = ModelConfig(width=256, depth=1, heads=2, vocab_size=64, base_width=64)
    model = fla_model(ex.make_export("gdn-mup-normeps", "adamw", config, lr=1e-2), tmp_path / "config.json")
    norm = model.model.layers[0].attn.o_norm
    before = norm.eps
    sites = attach_multipliers(model, parametrizations.multipliers("gdn-mup-normeps", "adamw", 4.0, 256),
                               FLA_MULTIPLIERS)
    assert norm.eps == pytest.approx(before / 256)  # the eps is scaled in place, its factor kept as a buffer
    assert sorted((s.field, s.side) for s in sites) == [("logits", "output"), ("readout_eps", "eps")]
    assert norm.deltamup_readout_eps_eps.item() == pytest.approx(1 / 256)
    attach_multipliers(model, parametrizations.multipliers("gdn-mup-normeps", "adamw", 4.0, 256), FLA_MULTIPLIERS)
    assert norm.eps == pytest.approx(before / 256)  # installing again replaces, never compounds
    uninstall(model)
    assert norm.eps == before and not hasattr(norm, "deltamup_readout_eps_eps")
