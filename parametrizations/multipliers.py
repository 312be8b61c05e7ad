"""Forward multipliers on any model: one persistent buffer per scaled tensor, read by a forward hook.

A parametrization's forward multipliers (models.Multipliers: embedding, readout, mixer_output, logits) are part of the
model, not of the optimizer. deltamup's own DeltaLM takes them in its constructor; any other model gets them here:
each Site names a module and whether its input or its output is scaled, and `install` registers on that module a
0-d fp32 buffer `deltamup_<field>_<side>` holding the factor plus a hook that multiplies by it. The buffer is in the
model's state_dict, so a checkpoint carries the factors it was trained with; loading it into a model parametrized
the same way gives bit-identical outputs. A module output that is a tuple (fla's attention layers return
(o, attentions, cache)) has its first element scaled. The hooks are parametrizations/standalone.py's, the file a
training loop uses without deltamup, so both install the same thing.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

from torch import nn

from deltamup.models.config import Multipliers

from . import standalone

SIDES = ("input", "output", "eps")  # eps: a norm's own float eps (readout_eps)
FIELDS = tuple(f.name for f in fields(Multipliers))
uninstall = standalone.uninstall


@dataclass(frozen=True)
class Site:
    """module: its name in model.named_modules(); field: a Multipliers field; side: "input" | "output" | "eps"."""

    module: str
    field: str
    side: str

    @property
    def buffer(self) -> str:
        return f"deltamup_{self.field}_{self.side}"

    def to_list(self) -> list[str]:
        return [self.module, self.field, self.side]


def install(model: nn.Module, sites: Iterable[Site], values: Multipliers | Mapping[str, float]) -> list[Site]:
    """Scale every site by its field's value (a buffer + a hook on the module); returns the sites installed.

    Installing again (another width, another parametrization) replaces the earlier buffer and hook."""
    values = values if isinstance(values, Mapping) else {f: getattr(values, f) for f in FIELDS}
    sites = list(sites)
    for site in sites:
        if site.field not in FIELDS or site.side not in SIDES:
            raise ValueError(f"bad multiplier site {site.to_list()}: field one of {', '.join(FIELDS)}, side "
                             f"{', '.join(SIDES)}")
    standalone.install(model, [dict(module=s.module, field=s.field, side=s.side, factor=values[s.field])
                               for s in sites])
    return sites
