"""Run a deltamup CLI command with another tree's code (maintainers/gpu/tree.sh) in place of the installed one.

    python3 maintainers/gpu/run_tree.py TREE coord-check …       TREE: the folder tree.sh wrote (holding deltamup/)

The editable install's import finder is taken out of sys.meta_path first (it would otherwise answer for deltamup
before TREE does), and the process says on stderr which models/lm.py it imported. A tree older than the CLI's lazy
imports imports tensorboardX with its sweeps; where that is not installed a placeholder stands in (a command that
writes TensorBoard files fails there).

A sweep trains its trials in Ray's worker processes, which import deltamup themselves: from PYTHONPATH, which this
sets to TREE first, but before that from the working directory, where a checkout's deltamup/ would win. So `sweep`
runs from TREE itself or any folder without a deltamup/ (paths absolute):

    (cd TREE && python3 /…/maintainers/gpu/run_tree.py . sweep /…/spec.yaml --out /…/DIR …)
"""
import os
import sys
import types
from pathlib import Path

if len(sys.argv) < 3 or not (Path(sys.argv[1]) / "deltamup" / "__init__.py").is_file():
    sys.exit("usage: run_tree.py TREE ARGS…  (TREE: a folder maintainers/gpu/tree.sh wrote, holding deltamup/)")
tree = str(Path(sys.argv[1]).resolve())
other = Path.cwd() / "deltamup"
if sys.argv[2] == "sweep" and other.is_dir() and other.resolve() != Path(tree) / "deltamup":
    sys.exit(f"run_tree.py: a sweep's workers would import {other} (the working directory's) instead of TREE's: run "
             "it from TREE or a folder without a deltamup/, with absolute paths")
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (repr(f) + type(f).__module__).lower()]
sys.path.insert(0, tree)
# processes this one starts (a local Ray cluster's workers, which train a sweep's trials) import TREE's deltamup too:
# PYTHONPATH comes before site-packages, where the editable install's finder would answer
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p)
try:
    import tensorboardX  # noqa: F401
except ImportError:
    placeholder = types.ModuleType("tensorboardX")
    placeholder.SummaryWriter = object
    sys.modules["tensorboardX"] = placeholder
import deltamup.models.lm as lm  # noqa: E402

if not lm.__file__.startswith(tree):
    sys.exit(f"run_tree.py: imported {lm.__file__}, not {tree}'s")
print(f"run_tree.py: {lm.__file__}", file=sys.stderr)
from deltamup.cli import main  # noqa: E402

sys.exit(main(sys.argv[2:]))
