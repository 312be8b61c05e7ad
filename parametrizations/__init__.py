"""Parametrizations: every rule in tables.py, applied to models and optimizers by registry.py.

    model = parametrizations.build_model(ModelConfig(kind="gdn", width=1024), "gdn-mup", optimizer="adamw", seed=0)
    opt = parametrizations.build_optimizer(model, "gdn-mup", "adamw", lr=3e-3, weight_decay=0.1)
    exp = parametrizations.load_export("train.yaml")      # tuned hyperparameters for a target width
    p = parametrizations.parametrize(fla_model, "gdn-mup", "adamw", base_model=fla_base, roles="fla")  # any model

table.py (the Parametrization data type), tables.py (SP, naive µP, GDN-µP: the rules as data), scale.py (power laws
of m and d), registry.py (lookup, init, param groups, optimizers), hparams.py (the base model's tunable
hyperparameters other than the LR), rolemap.py (roles of other libraries' models by name), infer.py (roles from how
shapes grow with width), multipliers.py (forward multipliers as buffers + hooks), apply.py (parametrize: all of it in
one call), export.py (the deltamup.export/1 document), param_groups.py and standalone.py (a param-groups file and the
torch-only loader a training loop applies it with).
"""
from __future__ import annotations

from .apply import Parametrized, parametrize, restore_multipliers
from .export import Export, load_export
from .hparams import BaseHparams
from .param_groups import write_param_groups
from .registry import (
                       build_model,
                       build_optimizer,
                       check_optimizer,
                       describe_multipliers,
                       describe_rows,
                       expected_slope,
                       get,
                       initialize,
                       multipliers,
                       names,
                       param_groups,
                       resolve,
)
from .rolemap import FLA, QWEN3_NEXT, RoleMap
from .table import OPTIMIZERS, Parametrization, RoleRule, Slope

__all__ = ["Parametrization", "RoleRule", "Slope", "OPTIMIZERS", "Export", "BaseHparams", "names", "get", "resolve",
           "multipliers", "build_model", "initialize", "param_groups", "build_optimizer", "describe_rows",
           "describe_multipliers", "expected_slope", "check_optimizer", "load_export", "parametrize", "Parametrized",
           "restore_multipliers", "RoleMap", "FLA", "QWEN3_NEXT", "write_param_groups"]
