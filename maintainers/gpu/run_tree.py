"""Run a deltamup CLI command with another tree's code (maintainers/gpu/tree.sh) in place of the installed one.

    python3 maintainers/gpu/run_tree.py TREE coord-check …       TREE: the folder tree.sh wrote (holding deltamup/)

The editable install's import finder is taken out of sys.meta_path first (it would otherwise answer for deltamup
before TREE does), and the process says on stderr which models/lm.py it imported. A tree older than the CLI's lazy
imports imports tensorboardX with its sweeps; where that is not installed a placeholder stands in (a command that
writes TensorBoard files fails there).
"""
import sys
import types
from pathlib import Path

if len(sys.argv) < 3 or not (Path(sys.argv[1]) / "deltamup" / "__init__.py").is_file():
    sys.exit("usage: run_tree.py TREE ARGS…  (TREE: a folder maintainers/gpu/tree.sh wrote, holding deltamup/)")
tree = str(Path(sys.argv[1]).resolve())
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in (repr(f) + type(f).__module__).lower()]
sys.path.insert(0, tree)
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
