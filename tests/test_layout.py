"""The package's shape: one `deltamup` namespace, and imports that only go down the layers.

Layers, lowest first (a module may import its own layer and the ones below it, never above):
kernels → models → parametrizations → scaling (training, data, tasks, coord check) → sweeps → reports → cli.
deltamup.console imports nothing of deltamup and may be used anywhere; the root package imports nothing eagerly.
Every import counts, also one inside a function: a function-level import may keep an optional dependency optional,
but it cannot hide a cycle from this test.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["kernels", "models", "parametrizations", "scaling", "sweeps", "reports", "cli"]


def modules() -> dict[str, Path]:
    """{dotted module name: file} for every module of the deltamup namespace, from pyproject's package-dir."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {}
    for package in config["packages"]:
        parent = max((p for p in config["package-dir"] if package == p or package.startswith(p + ".")), key=len)
        folder = ROOT / config["package-dir"][parent] / package[len(parent):].lstrip(".").replace(".", "/")
        for file in folder.glob("*.py"):
            found[package if file.stem == "__init__" else f"{package}.{file.stem}"] = file
    return found


def imports(name: str, file: Path, known: dict[str, Path]) -> set[str]:
    """The deltamup modules `name` imports anywhere in its file (module level or inside functions)."""
    package = name if file.stem == "__init__" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    resolved = set()
    for t in targets:
        while t and t not in known:
            t = t.rpartition(".")[0]
        if t.startswith("deltamup") and t != name:
            resolved.add(t)
    return resolved


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


GRAPH = {name: imports(name, file, modules()) for name, file in modules().items()}


def test_every_folder_is_in_the_namespace():
    names = set(GRAPH)
    assert {f"deltamup.{layer}" for layer in LAYERS} <= names
    assert {"deltamup.kernels.triton.chunk_fwd", "deltamup.scaling.data.corpus", "deltamup.cli.sweep"} <= names


def test_imports_only_go_down():
    upward = [f"{a} imports {b}" for a, targets in GRAPH.items() for b in targets
              if layer(a) is not None and layer(b) is not None and layer(b) > layer(a)]
    assert not upward, "\n".join(sorted(upward))
    assert not GRAPH["deltamup.console"], "deltamup.console must not import deltamup"
    assert not GRAPH["deltamup"], "the root package imports lazily (module __getattr__)"


def test_no_import_cycles():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(" ↔ ".join(sorted(component)))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not cycles, "\n".join(cycles)


def test_the_layer_test_sees_a_planted_cycle(tmp_path):
    """The checks above are only worth something if they would fail: an upward import is found."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from deltamup.reports import analysis\n")
    found = imports("deltamup.kernels.planted", planted, modules())
    assert "deltamup.reports.analysis" in found and layer("deltamup.reports.analysis") > layer("deltamup.kernels")


def test_a_trial_process_imports_fsdp_only_when_it_shards():
    """FSDP's modules (torch.distributed.fsdp, .tensor, .checkpoint) take seconds to import; every Ray trial
    process imports the trial module, and only a sharded trial needs them (scaling.data_parallel imports them then)."""
    script = ("import sys, deltamup.sweeps.trial, deltamup.sweeps.parallel; "
              "print([m for m in ('torch.distributed.fsdp', 'torch.distributed.tensor', "
              "'torch.distributed.checkpoint') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr[-2000:]


def test_generic_top_level_packages_do_not_shadow_deltamup(tmp_path):
    """Packages called `kernels`, `models`, `reports`, … first on the path change nothing: deltamup imports only
    `deltamup.…`, and builds and runs a model."""
    for name in ("kernels", "models", "reports", "sweeps", "scaling", "parametrizations"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('the dummy {name} was imported')\n")
    script = textwrap.dedent("""
        import torch
        from deltamup.models import ModelConfig
        from deltamup.parametrizations import build_model, build_optimizer
        from deltamup.cli import main
        model = build_model(ModelConfig(kind="gdn", width=32, depth=1, heads=2, base_width=32), "gdn-mup", seed=0)
        loss = model(torch.randint(0, 256, (1, 16))).float().logsumexp(-1).mean()
        loss.backward()
        build_optimizer(model, "gdn-mup", "adamw", lr=1e-3).step()
        print("ok")
        raise SystemExit(main(["describe", "-p", "sp", "--width", "512"]))
    """)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("ok\n"), run.stderr[-2000:]
    assert "sp · adamw · width 512" in run.stdout  # the CLI too: `deltamup describe`


def test_the_wheel_holds_only_deltamup(tmp_path):
    """Built as a wheel (what `pip install .` installs), the project is one top-level package, data files included."""
    pytest.importorskip("setuptools", minversion="68")  # what pyproject.toml builds with
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("deltamup-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"deltamup", wheel.name.split("-py")[0] + ".dist-info"}
    assert {"deltamup/kernels/triton/chunk_fwd.py", "deltamup/sweeps/specs/quickstart.yaml",
            "deltamup/scaling/data/assets/sample.txt", "deltamup/cli/__init__.py"} <= set(names)


def test_ruff_is_clean():
    """The lint configured in pyproject.toml (ruff, line length 120) passes on the whole repository."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (scripts/install --test installs it)")
    lint = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert lint.returncode == 0, lint.stdout[-3000:]
