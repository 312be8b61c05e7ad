"""Run a deltamup CLI command with another tree's code (maintainers/gpu/tree.sh) in place of the installed one.

    python3 maintainers/gpu/run_tree.py TREE coord-check …       TREE: the folder tree.sh wrote (holding deltamup/)

The editable install's import finder is taken out of sys.meta_path first (it would otherwise answer for deltamup
before TREE does), and the process says on stderr which models/lm.py it imported. A tree older than the CLI's lazy
imports imports tensorboardX with its sweeps; where that is not installed a placeholder stands in (a command that
writes TensorBoard files fails there).

A sweep trains its trials in Ray's worker processes, which import deltamup themselves, from the working directory
first: `sweep` runs from TREE (paths absolute), on a Ray instance of its own unless --address names one:

    (cd TREE && python3 /…/maintainers/gpu/run_tree.py . sweep /…/spec.yaml --out /…/DIR …)
"""
import os
import sys
import types
from pathlib import Path

if len(sys.argv) < 3 or not (Path(sys.argv[1]) / "deltamup" / "__init__.py").is_file():
    sys.exit("usage: run_tree.py TREE ARGS…  (TREE: a folder maintainers/gpu/tree.sh wrote, holding deltamup/)")
tree = str(Path(sys.argv[1]).resolve())
if sys.argv[2] == "sweep" and Path.cwd().resolve() != Path(tree):
    sys.exit(f"run_tree.py: a sweep runs from TREE (cd {tree}), with absolute paths: Ray's workers import deltamup "
             "from the working directory")
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (repr(f) + type(f).__module__).lower()]
sys.path.insert(0, tree)
if sys.argv[2] == "sweep" and "--address" not in sys.argv:  # an older driver joins a Ray cluster it finds running
    os.environ["RAY_ADDRESS"] = "local"  # on the machine; the package's own starts one of its own, and so does this
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
