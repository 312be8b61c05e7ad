"""Apply a deltamup param-groups file (param_groups.json) to a model, with PyTorch alone: no deltamup at run time.

deltamup writes this file next to param_groups.json as deltamup_param_groups.py; copy both into your training code.
The file holds, for one model at one width, every parameter's learning rate, weight decay and init std (by parameter
name) and the forward multipliers (module, input or output, factor). A nanoGPT-style loop:

    import deltamup_param_groups as dpg
    model = GPT(config)                                   # your model, at the width the file was written for
    doc = dpg.load("param_groups.json")
    dpg.initialize(model, doc)                            # µP init (skip when loading a checkpoint)
    dpg.install_multipliers(model, doc)                   # forward multipliers: buffers + hooks
    optimizer = dpg.build_optimizer(model, doc)           # AdamW / SGD with one param group per role
    for step ...: lr_t = schedule(step); [g.update(lr=g["base_lr"] * lr_t) for g in optimizer.param_groups]

A trainer that builds its optimizer itself (fla's flame, Hugging Face's Trainer) takes `param_groups(model, doc)`
where it creates the optimizer, and `install_multipliers` after it builds the model. The multipliers are buffers
(deltamup_<field>_<side>) in the model's state_dict, so a checkpoint carries them and a model without them refuses it.
deltamup itself installs its multipliers with this module, so both give bit-identical models.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from torch import nn

SCHEMA = "deltamup.param_groups/1"
HOOKS = "_deltamup_hooks"  # module attribute: {buffer name: hook handle}, so installing twice replaces


def load(path: str | Path) -> dict:
    doc = json.loads(Path(path).read_text())
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a deltamup param-groups file (schema {doc.get('schema')!r})")
    return doc


def _scale(x, factor: torch.Tensor):
    if isinstance(x, tuple):  # e.g. fla's attention layers return (o, attentions, cache)
        return (_scale(x[0], factor), *x[1:])
    return x * factor


def _scale_input(buffer: str, module: nn.Module, args: tuple) -> tuple:
    return (_scale(args[0], getattr(module, buffer)), *args[1:])


def _scale_output(buffer: str, module: nn.Module, _args: tuple, output):
    return _scale(output, getattr(module, buffer))


EPS_ATTRIBUTES = ("eps", "variance_epsilon")  # a norm's epsilon: PyTorch's and fla's name, Hugging Face's


def _eps_attribute(module: nn.Module) -> str | None:
    return next((a for a in EPS_ATTRIBUTES if isinstance(getattr(module, a, None), float)), None)


class _ScaledEps:
    """An "eps" site: the norm's float epsilon set to its own value times the factor (no hook: the norm reads it);
    remove() puts the module's value back."""

    def __init__(self, module: nn.Module, factor: float) -> None:
        self.module, self.attribute = module, _eps_attribute(module)
        self.base = getattr(module, self.attribute)
        setattr(module, self.attribute, self.base * factor)

    def remove(self) -> None:
        setattr(self.module, self.attribute, self.base)


def install(model: nn.Module, sites: list[dict]) -> None:
    """sites: [{"module", "field", "side": "input" | "output" | "eps", "factor"}]. Each module gets a 0-d fp32
    buffer deltamup_<field>_<side> holding the factor and a hook multiplying its input (first argument) or output by
    it; an "eps" site scales the norm's own float epsilon (`eps` or `variance_epsilon`) instead of a tensor."""
    modules = dict(model.named_modules())
    for site in sites:
        if site["module"] not in modules:
            raise ValueError(f"the model has no module {site['module']!r} for the {site['field']} multiplier")
        if site["side"] not in ("input", "output", "eps"):
            raise ValueError(f"multiplier side must be input, output or eps, got {site['side']!r}")
        module, buffer = modules[site["module"]], f"deltamup_{site['field']}_{site['side']}"
        if site["side"] == "eps" and _eps_attribute(module) is None:
            raise ValueError(f"{site['module']} has no float eps (or variance_epsilon) for the {site['field']} "
                             "multiplier")
        hooks = module.__dict__.setdefault(HOOKS, {})
        if buffer in hooks:
            hooks.pop(buffer).remove()
        device = next((p.device for p in module.parameters()), None)
        module.register_buffer(buffer, torch.tensor(float(site["factor"]), device=device), persistent=True)
        if site["side"] == "eps":
            hooks[buffer] = _ScaledEps(module, float(site["factor"]))
            continue
        hook = functools.partial(_scale_input if site["side"] == "input" else _scale_output, buffer)
        hooks[buffer] = (module.register_forward_pre_hook(hook) if site["side"] == "input"
                         else module.register_forward_hook(hook))


def uninstall(model: nn.Module) -> None:
    """Remove every multiplier `install` put on the model (hooks and buffers)."""
    for module in model.modules():
        for buffer, handle in module.__dict__.pop(HOOKS, {}).items():
            handle.remove()
            module._buffers.pop(buffer, None)


def install_multipliers(model: nn.Module, doc: dict) -> None:
    uninstall(model)
    install(model, doc["multipliers"])


def _named(model: nn.Module, doc: dict) -> dict[str, nn.Parameter]:
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    listed = {n for g in doc["groups"] for n in g["params"]}
    if listed != set(params):
        lacks, extra = sorted(listed - set(params)), sorted(set(params) - listed)
        raise ValueError(f"the model does not match the param-groups file: it lacks {lacks[:4]}, the file does not "
                         f"list {extra[:4]}")
    return params


@torch.no_grad()
def initialize(model: nn.Module, doc: dict, generator: torch.Generator | None = None) -> None:
    """Re-draw every parameter whose group has an init std from N(0, std²); the others keep the module's init."""
    params = _named(model, doc)
    for group in doc["groups"]:
        if group["init_std"] is not None:
            for name in group["params"]:
                params[name].normal_(0.0, group["init_std"], generator=generator)


def param_groups(model: nn.Module, doc: dict) -> list[dict]:
    """torch.optim param groups: {"params", "lr", "base_lr", "weight_decay", "role"} per role, and "eps" (AdamW's ε)
    where the file gives a group its own."""
    params = _named(model, doc)
    return [{"params": [params[n] for n in g["params"]], "lr": g["lr"], "base_lr": g["lr"],
             "weight_decay": g["weight_decay"], "role": g["role"]} | ({"eps": g["eps"]} if "eps" in g else {})
            for g in doc["groups"]]


def build_optimizer(model: nn.Module, doc: dict) -> torch.optim.Optimizer:
    """The optimizer the file describes (torch.optim.AdamW or SGD), over param_groups(model, doc)."""
    groups, kwargs = param_groups(model, doc), dict(doc["optimizer_kwargs"])
    if doc["optimizer"] == "adamw":
        return torch.optim.AdamW(groups, lr=doc["lr"], betas=tuple(kwargs["betas"]), eps=kwargs["eps"])
    return torch.optim.SGD(groups, lr=doc["lr"], momentum=kwargs["momentum"],
                           nesterov=kwargs["nesterov"] and kwargs["momentum"] > 0)
