"""The deltamup CLI: describe, coord-check, and one-line errors with exit code 2 for bad input."""
import contextlib
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch

from deltamup.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_describe_prints_every_role_at_width_and_base(capsys):
    assert main(["describe", "--parametrization", "gdn-mup", "--optimizer", "sgd", "--width", "1024"]) == 0
    out = capsys.readouterr().out
    for role in ("embedding", "hidden", "gate_matrix", "gate_scalar", "conv", "norm_gain", "readout"):
        assert role in out
    gate = next(line for line in out.splitlines() if line.startswith("gate_matrix"))
    assert "m^-1/2" in gate and "0.5" in gate          # W_α, W_β: LR × 1/√m under SGD
    scalar = next(line for line in out.splitlines() if line.startswith("gate_scalar"))
    assert "√m" in scalar and " 2 " in scalar           # A_log, dt_bias: LR × √m
    readout = next(line for line in out.splitlines() if line.startswith("readout ") and "√d" in line)
    assert "√d" in readout and "32" in readout and "16" in readout  # the √d before the output RMSNorm


def test_python_dash_m_entry_point():
    result = subprocess.run([sys.executable, "-m", "deltamup", "describe", "-p", "sp"], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0 and "Standard parametrization" in result.stdout


@pytest.mark.parametrize("argv,message", [
    (["describe", "-p", "nope"], "unknown parametrization 'nope'"),
    (["describe", "--optimizer", "lion"], "unknown optimizer 'lion'"),
    (["coord-check", "--model", "mamba", "--out", "x"], None),  # argparse choices: exit 2 too
    (["coord-check", "--widths", "16,32", "--out", "{tmp}"], "too small for 6 heads"),
    (["coord-check", "--lr", "-1", "--out", "{tmp}"], "lr must be positive"),
    (["coord-check", "--widths", "64", "--out", "{tmp}"], "at least two widths"),
    (["coord-check", "--every", "0", "--out", "{tmp}"], "every must be ≥ 1"),
    (["coord-check", "--steps", "5", "--warmup-steps", "5", "--out", "{tmp}"], "leaves no step at the peak LR"),
    (["coord-check", "--schedule", "linear", "--out", "{tmp}"], "unknown schedule 'linear'"),
    (["coord-check", "--adam-eps", "-1", "--out", "{tmp}"], "eps must not be negative"),
    (["coord-check", "--out", "/proc/deltamup-cannot-write"], "cannot create output directory"),
    (["coord-check", "--data", "/nonexistent/corpus", "--out", "{tmp}"], "does not exist"),
    (["kernels", "check", "--kernel", "nope"], "no pass named 'nope'"),
    (["kernels", "check", "--tolerance", "-1"], "--tolerance -1: must be positive"),
    (["kernels", "check", "--head-dims", "64"], None),  # not KxV: argparse, exit 2
    pytest.param(["kernels", "check", "--dtype", "bf16"], "needs a GPU",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="refused only without a GPU")),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path / "out")) for a in argv]
    with pytest.raises(SystemExit) if message is None else contextlib.nullcontext():
        code = main(argv)
        assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    if message is not None:
        assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "out" / "coords.parquet").exists()


def test_coord_check_writes_its_files_and_check_flag_sets_exit_code(tmp_path, capsys):
    out = tmp_path / "cc"
    argv = ["coord-check", "--model", "gdn", "-p", "sp", "--widths", "32,64", "--steps", "2", "--batch-size", "2",
            "--seq-len", "16", "--depth", "1", "--out", str(out)]
    assert main(argv) == 0
    coords = pl.read_parquet(out / "coords.parquet")
    assert set(coords.columns) >= {"width", "step", "probe", "rms", "l1", "delta_rms"}
    assert set(coords["width"].unique()) == {32, 64} and set(coords["step"].unique()) == {0, 1, 2}
    slopes = pl.read_csv(out / "slopes.csv")
    assert slopes.columns[:5] == ["probe", "step", "slope", "expected", "ok"]
    assert (out / "coords.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert ("PASS" in printed) or ("FAIL" in printed)
    failed = slopes.filter(pl.col("ok") == False)  # noqa: E712
    assert main(argv + ["--check"]) == (1 if len(failed) else 0)


def test_describe_lists_every_parametrization_with_its_summary(capsys):
    from deltamup import parametrizations

    assert main(["describe", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in parametrizations.names():
        row = next(line for line in lines if line.split()[0] == name)
        assert parametrizations.get(name).summary in row


def test_readme_lists_every_parametrization_with_its_summary():
    """README's table of the shipped parametrizations is the registry's, in its order, and the sentence before it
    counts the variants: a table added to tables.py without its row fails here."""
    import re

    from deltamup import parametrizations

    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.*) \|$", readme, flags=re.M)
    assert rows == [(name, parametrizations.get(name).summary) for name in parametrizations.names()]
    assert f"and {len(rows) - 4} variants that each change one" in readme


def test_a_reader_that_closes_the_pipe_stops_the_command_quietly():
    """`deltamup describe --list | head -1`: no error line, the exit code a process SIGPIPE ends has."""
    proc = subprocess.Popen([sys.executable, "-m", "deltamup", "describe", "--list"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command writes: it starts Python and imports torch first
    stderr = proc.communicate(timeout=120)[1].decode()
    assert proc.returncode == 141 and stderr == ""
