"""Property tests: a valid export document or sweep spec, mutated at one place (a value replaced by arbitrary
plain data, a key deleted, an unknown key added), is either accepted and round-trips, or refused with a one-line
ValueError naming a field — never another exception."""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import typing

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamup.models import ModelConfig
from deltamup.parametrizations import export as ex
from deltamup.scaling.train import TrainConfig
from deltamup.sweeps import spec as specs

EXPORT = ex.make_export("gdn-mup", "adamw", ModelConfig(width=64, depth=1, heads=2, base_width=32), lr=3e-3,
                        weight_decay=0.1, tuned_width=32, train={"betas": (0.9, 0.95), "warmup_steps": 3},
                        provenance={"sweep": "synthetic", "task": {"name": "sample"}, "bound": False}).to_dict()
EXPORT = json.loads(json.dumps(EXPORT))  # as a file holds it
SPEC = {"name": "prop", "model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "task": "sample",
        "widths": [32, 64], "lrs": [1e-3, 1e-2], "parametrizations": ["sp", "gdn-mup"], "optimizers": ["adamw"],
        "seeds": [0], "steps": 10, "batch_size": 4, "seq_len": 32, "warmup_steps": 2, "betas": [0.9, 0.95],
        "eval": {"batches": 2, "smooth_last": 0.2}, "resources": {"cpu": 1, "gpu": {32: 0.25, 64: 0.5}},
        "failure": {"retries": 1}, "search": "grid", "optuna": {"trials": 3, "sampler": "tpe"},
        "limits": {"max_width": 4096}}

plain = st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                  max_size=3), max_leaves=6)
# values near the valid ones: what a user mistypes most
nearby = st.sampled_from([0, 1, -1, 2, 0.5, -0.5, 1e9, 10**7, "", "abc", "wide", "fast", "1e-3", True, None, [],
                          {}, [1, 2], math.inf, -math.inf, math.nan, "gdn", "adamw", "sgd", "cosine"])


def paths(doc: typing.Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into nested mappings and lists."""
    found = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        found.append((*prefix, key))
        found += paths(value, (*prefix, key))
    return found


@st.composite
def mutated(draw: st.DrawFn, doc: dict) -> tuple[dict, tuple]:
    doc = copy.deepcopy(doc)
    path = draw(st.sampled_from(paths(doc)))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    if action == "replace":
        parent[path[-1]] = draw(nearby | plain)
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=6))] = draw(nearby | plain)
    else:
        parent.append(draw(nearby | plain))
    return doc, path


def one_line(error: ValueError) -> str:
    message = str(error)
    assert "\n" not in message and 0 < len(message) <= 400, message
    return message


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(EXPORT))
def test_a_mutated_export_loads_and_round_trips_or_names_a_field(case: tuple[dict, tuple]) -> None:
    doc, _ = case
    try:
        exp = ex.from_dict(doc)
    except ValueError as e:
        message = one_line(e)
        assert message.startswith("export field '") or "field 'schema'" in message, message
        return
    assert ex.from_dict(json.loads(json.dumps(exp.to_dict()))) == exp
    assert ex.from_dict(yaml.safe_load(yaml.safe_dump(exp.to_dict()))) == exp


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(SPEC))
def test_a_mutated_spec_parses_and_round_trips_or_names_a_field(case: tuple[dict, tuple]) -> None:
    raw, _ = case
    try:
        spec = specs.parse(raw)
    except ValueError as e:
        assert one_line(e).startswith("spec field '"), str(e)
        return
    assert specs.parse(spec.to_dict()) == spec
    assert specs.parse(yaml.safe_load(yaml.safe_dump(spec.to_dict()))) == spec


def test_the_exports_train_keys_are_train_config_fields() -> None:
    hints = typing.get_type_hints(TrainConfig)
    fields = {f.name for f in dataclasses.fields(TrainConfig)} - {"optimizer", "lr", "seed", "steps"}
    assert set(ex.TRAIN_TYPES) == fields
    assert all(ex.TRAIN_TYPES[k] == hints[k] for k in fields)


def test_the_issues_bad_exports_name_their_field() -> None:
    for change, field in (({"width": "wide"}, "width"), ({"lr": "fast"}, "lr"), ({"lr": -1}, "lr"),
                          ({"parametrization": "nope"}, "parametrization"), ({"surprise": 1}, "surprise")):
        try:
            ex.from_dict({**EXPORT, **change})
        except ValueError as e:
            assert f"'{field}'" in one_line(e)
        else:
            raise AssertionError(f"{change} was accepted")
    groups = copy.deepcopy(EXPORT["groups"])
    groups["hidden"]["lr"] = "abc"
    try:
        ex.from_dict({**EXPORT, "groups": groups})
    except ValueError as e:
        assert "'groups.hidden.lr'" in one_line(e)
