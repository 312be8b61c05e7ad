"""docs/api.md's end-to-end example runs as written: tune on deltamup's model, export, apply to fla's model at
another width, train a few steps, write the param-groups file."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

pytest.importorskip("fla.models", reason="flash-linear-attention 0.6 is not installed",
                    exc_type=ModuleNotFoundError)  # an fla that fails to import fails the tests

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def example() -> str:
    section = DOC.read_text().split("## End to end", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_end_to_end_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "api_example"}
    exec(compile(example(), str(DOC), "exec"), namespace)
    losses = [float(m) for m in re.findall(r"step \d: loss ([\d.]+)", capsys.readouterr().out)]
    assert len(losses) == 5 and all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]  # it trains
    p, exp = namespace["p"], namespace["exp"]
    assert (p.width, p.base_width, exp.base_width, exp.width) == (96, 64, 64, 128)
    assert p.multipliers.readout == pytest.approx(96 ** 0.5) and p.multipliers.logits == pytest.approx(64 / 96)
    doc = json.loads((tmp_path / "param_groups.json").read_text())
    assert {g["role"] for g in doc["groups"]} >= {"hidden", "gate_matrix", "gate_scalar", "embedding", "readout"}
    assert (tmp_path / "deltamup_param_groups.py").is_file()
