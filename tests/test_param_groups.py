"""The param-groups file and its PyTorch-only loader: a plain training loop that applies them trains the same model,
bit for bit, as deltamup's parametrize + build_optimizer."""
from __future__ import annotations

import ast
import importlib.util
import json

import pytest
import torch
from user_model import UserLM

from deltamup.parametrizations import parametrize, write_param_groups
from deltamup.parametrizations.param_groups import LOADER

WIDTH, BASE, DELTA = 96, 32, 64


def loader_module(path):
    spec = importlib.util.spec_from_file_location("deltamup_param_groups", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(model, optimizer, steps=3):
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    for step in range(steps):
        for g in optimizer.param_groups:  # a schedule, as a training loop sets it
            g["lr"] = g["base_lr"] * (1 - step / steps)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten()).backward()
        optimizer.step()


@pytest.mark.parametrize("parametrization,optimizer", [("gdn-mup", "adamw"), ("gdn-mup-code", "sgd"),
                                                       ("mup", "adamw")])
def test_plain_loop_with_the_loader_trains_the_same_model(tmp_path, parametrization, optimizer):
    torch.manual_seed(0)
    p = parametrize(UserLM(WIDTH), parametrization, optimizer, base_model=UserLM(BASE), delta_model=UserLM(DELTA))
    files = write_param_groups(p, tmp_path / "param_groups.json", lr=3e-3, weight_decay=0.1)
    assert [f.name for f in files] == ["param_groups.json", LOADER]
    tree = ast.parse(files[1].read_text())  # the loader needs PyTorch only
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "functools", "json", "pathlib", "torch"}
    doc = json.loads(files[0].read_text())
    assert doc["multipliers"] and [(m["module"], m["field"], m["factor"]) for m in doc["multipliers"]] == [
        (s.module, s.field, getattr(p.multipliers, s.field)) for s in p.sites]
    dpg = loader_module(files[1])
    twin = UserLM(WIDTH)
    twin.load_state_dict({k: v for k, v in p.model.state_dict().items() if "deltamup" not in k})
    dpg.install_multipliers(twin, dpg.load(files[0]))
    assert twin.state_dict().keys() == p.model.state_dict().keys()
    train(p.model, p.build_optimizer(lr=3e-3, weight_decay=0.1))
    train(twin, dpg.build_optimizer(twin, dpg.load(files[0])))
    for (name, a), b in zip(p.model.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(a, b), name


def test_loader_initializes_at_the_tables_std_and_refuses_another_model(tmp_path):
    p = parametrize(UserLM(WIDTH), "gdn-mup", "adamw", base_model=UserLM(BASE), delta_model=UserLM(DELTA))
    path = write_param_groups(p, tmp_path / "pg.json", lr=1e-2)[0]
    dpg = loader_module(tmp_path / LOADER)
    doc = dpg.load(path)
    fresh = UserLM(WIDTH)
    dpg.initialize(fresh, doc, generator=torch.Generator().manual_seed(0))
    hidden = next(g for g in doc["groups"] if g["role"] == "hidden")
    drawn = torch.cat([fresh.get_parameter(n).detach().flatten() for n in hidden["params"]])
    assert drawn.std().item() == pytest.approx(hidden["init_std"], rel=0.03)
    with pytest.raises(ValueError, match="does not match the param-groups file"):
        dpg.param_groups(UserLM(WIDTH, depth=3), doc)
    with pytest.raises(ValueError, match="not a deltamup param-groups file"):
        (tmp_path / "other.json").write_text('{"schema": "x"}')
        dpg.load(tmp_path / "other.json")
