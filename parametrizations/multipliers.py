"""Forward multipliers on any model: one persistent buffer per scaled tensor, read by a forward hook.

A parametrization's forward multipliers (models.Multipliers: embedding, readout, mixer_output, logits) are part of the
model, not of the optimizer. deltamup's own DeltaLM takes them in its constructor; any other model gets them here:
each Site names a module and whether its input or its output is scaled, and `install` registers on that module a
0-d fp32 buffer `deltamup_<field>_<side>` holding the factor plus a hook that multiplies by it. The buffer is in the
model's state_dict, so a checkpoint carries the factors it was trained with; loading it into a model parametrized
the same way gives bit-identical outputs. A module output that is a tuple (fla's attention layers return
(o, attentions, cache)) has its first element scaled.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

import torch
from torch import nn

from deltamup.models.config import Multipliers

SIDES = ("input", "output")
FIELDS = tuple(f.name for f in fields(Multipliers))
HOOKS = "_deltamup_hooks"  # module attribute: {buffer name: hook handle}, so installing twice replaces


@dataclass(frozen=True)
class Site:
    """module: its name in model.named_modules(); field: a Multipliers field; side: "input" | "output"."""

    module: str
    field: str
    side: str

    @property
    def buffer(self) -> str:
        return f"deltamup_{self.field}_{self.side}"

    def to_list(self) -> list[str]:
        return [self.module, self.field, self.side]


def _scale(x, factor: torch.Tensor):
    if isinstance(x, tuple):
        return (_scale(x[0], factor), *x[1:])
    return x * factor


def _scale_input(buffer: str, module: nn.Module, args: tuple) -> tuple:
    return (_scale(args[0], getattr(module, buffer)), *args[1:])


def _scale_output(buffer: str, module: nn.Module, _args: tuple, output):
    return _scale(output, getattr(module, buffer))


def install(model: nn.Module, sites: Iterable[Site], values: Multipliers | Mapping[str, float]) -> list[Site]:
    """Scale every site by its field's value (a buffer + a hook on the module); returns the sites installed.

    Installing again (another width, another parametrization) replaces the earlier buffer and hook."""
    values = values if isinstance(values, Mapping) else {f: getattr(values, f) for f in FIELDS}
    modules = dict(model.named_modules())
    installed = []
    for site in sites:
        if site.field not in FIELDS or site.side not in SIDES:
            raise ValueError(f"bad multiplier site {site.to_list()}: field one of {', '.join(FIELDS)}, side input "
                             "or output")
        if site.module not in modules:
            raise ValueError(f"the model has no module {site.module!r} for the {site.field} multiplier")
        module = modules[site.module]
        hooks = module.__dict__.setdefault(HOOKS, {})
        if site.buffer in hooks:
            hooks.pop(site.buffer).remove()
        device = next((p.device for p in module.parameters()), None)
        module.register_buffer(site.buffer, torch.tensor(float(values[site.field]), device=device), persistent=True)
        hook = functools.partial(_scale_input if site.side == "input" else _scale_output, site.buffer)
        hooks[site.buffer] = (module.register_forward_pre_hook(hook) if site.side == "input"
                              else module.register_forward_hook(hook))
        installed.append(site)
    return installed


def installed_values(model: nn.Module, sites: Iterable[Site]) -> dict[str, float]:
    """{field: factor} as the model's buffers hold them now (after a load_state_dict, the loaded ones)."""
    modules = dict(model.named_modules())
    return {s.field: float(getattr(modules[s.module], s.buffer)) for s in sites}


def uninstall(model: nn.Module) -> None:
    """Remove every multiplier `install` put on the model (hooks and buffers)."""
    for module in model.modules():
        for buffer, handle in module.__dict__.pop(HOOKS, {}).items():
            handle.remove()
            module._buffers.pop(buffer, None)
