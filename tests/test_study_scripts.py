"""The studies' run scripts: studies/optima.py picks the next part's learning rates from the trials a sweep
directory holds, and every studies/*/run.sh parses and refuses an unknown part in one line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_SCRIPTS = sorted(ROOT.glob("studies/*/run.sh"))


def optima(out: Path, *args: str) -> str:
    result = subprocess.run([sys.executable, str(ROOT / "studies/optima.py"), str(out), *args], capture_output=True,
                            text=True, check=True)
    return result.stdout.strip()


def write_trials(out: Path, losses: dict[tuple[int, int], float], status: str = "ok") -> None:
    """Trial records of SP at width 256: {(log2 lr, seed): val_loss}."""
    (out / "results").mkdir(parents=True, exist_ok=True)
    for (octave, seed), loss in losses.items():
        record = {"width": 256, "parametrization": "sp", "lr": 2.0 ** octave, "seed": seed, "status": status,
                  "val_loss": loss}
        (out / "results" / f"sp.w256.lr{octave}.s{seed}.{status}.json").write_text(json.dumps(record))


def test_optimum_seed0_and_edges(tmp_path: Path) -> None:
    # seed 0 alone prefers 2^-8; over 3 seeds 2^-9 is best, and it is the grid's smallest LR: an edge
    write_trials(tmp_path, {(-9, 0): 1.02, (-8, 0): 1.00, (-7, 0): 1.05,
                            (-9, 1): 0.95, (-8, 1): 1.01, (-7, 1): 1.06,
                            (-9, 2): 0.96, (-8, 2): 1.00, (-7, 2): 1.04})
    assert optima(tmp_path, "seed0", "256", "sp", "-5") == "-8"
    assert optima(tmp_path, "optimum", "256", "sp", "-5") == "-9"
    assert optima(tmp_path, "edges") == "256 sp -10"
    assert optima(tmp_path, "optimum", "512", "sp", "-5") == "-5"      # nothing at that width: the default
    assert optima(tmp_path, "seed0", "256", "gdn-mup", "-6") == "-6"


def test_unfinished_trials_and_too_few_seeds_do_not_count(tmp_path: Path) -> None:
    write_trials(tmp_path, {(-9, 0): 1.0, (-8, 0): 0.9, (-7, 0): 1.1, (-9, 1): 1.0, (-8, 1): 0.9})
    write_trials(tmp_path, {(-6, 0): 0.1}, status="diverged")
    assert optima(tmp_path, "seed0", "256", "sp", "0") == "-8"        # the diverged 2^-6 is not an optimum
    assert optima(tmp_path, "optimum", "256", "sp", "-4") == "-4"     # no LR has 3 seeds yet
    assert optima(tmp_path, "edges") == ""


@pytest.mark.parametrize("script", RUN_SCRIPTS, ids=lambda p: p.parent.name)
def test_run_scripts_parse_and_refuse_an_unknown_part(script: Path, tmp_path: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
    result = subprocess.run(["bash", str(script), str(tmp_path / "sweep"), str(tmp_path / "corpus"), "nope"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("unknown part nope")
