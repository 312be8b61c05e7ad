"""`deltamup report` and `deltamup export` on the synthetic sweep of tests/test_analysis.py."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from test_analysis import SPEC, write_sweep, x_star

from deltamup import parametrizations
from deltamup.cli import main
from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.reports.analysis import load_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("cli") / "sweep")


@pytest.fixture(scope="module")
def report(sweep: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One `deltamup report` of the synthetic sweep (its folder and what it printed); the overview tests copy the
    folder under the names they need."""
    folder = tmp_path_factory.mktemp("report") / "rep"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["report", str(sweep), "--out", str(folder)]) == 0
    return folder, printed.getvalue()


def test_report_prints_optima_and_where_the_page_is(report: tuple[Path, str]) -> None:
    folder, out = report
    assert f"report: {folder / 'index.html'}" in out
    assert "incomplete: 1 of 216 grid trials have no result yet" in out
    assert "1 optima lie on the LR grid's edge" in out and "trials not all" not in out
    assert (folder / "index.html").is_file()


def test_report_says_when_trials_did_not_all_record_the_same_data_code_or_gpu(tmp_path: Path, capsys) -> None:
    """Trials whose records name different data (a prepared corpus's tokens sha256) or none: one line saying how
    many trained on which, one for the code that trained them and one for the GPU's model; the synthetic sweep
    above, with none recorded, prints none."""
    import polars as pl
    from test_analysis import synthetic_trials

    trials = synthetic_trials()
    n = len(trials)
    data = ["042b5cd422b837d2"] * 3 + ["e3218175aa000000"] * (n - 5) + [None] * 2
    code = ["00000000000000aa"] * (n - 1) + ["00000000000000bb"]
    gpu = ["NVIDIA H200"] * (n - 4) + ["NVIDIA H100 80GB HBM3"] * 4
    sweep = write_sweep(tmp_path / "sweep", trials.with_columns(pl.Series("data", data), pl.Series("code", code),
                                                                pl.Series("gpu_name", gpu)))
    assert main(["report", str(sweep), "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith("trials not all on the same"))
    assert line.endswith(f"tokens sha256): e3218175aa000000 ({n - 5} trials), 042b5cd422b837d2 (3 trials), "
                         "not recorded (2 trials)")
    line = next(x for x in out if x.startswith("trials not all trained by the same code"))
    assert line.endswith(f"names its commits): 00000000000000aa ({n - 1} trials), 00000000000000bb (1 trials)")
    line = next(x for x in out if x.startswith("trials not all trained on the same GPU model"))
    assert line.endswith(f"gpu_name): NVIDIA H200 ({n - 4} trials), NVIDIA H100 80GB HBM3 (4 trials)")
    summary, page = (tmp_path / "rep" / "summary.md").read_text(), (tmp_path / "rep" / "index.html").read_text()
    assert f"Trials not all trained by the same code (the record's code; `deltamup code DIR` names its commits): " \
           f"00000000000000aa " \
           f"({n - 1} trials), 00000000000000bb (1 trials)." in summary
    assert "Trials not all on the same recorded data" in summary and "Trials not all trained by the same" in page


def test_report_of_a_non_sweep_fails_with_one_line(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"deltamup report: error: {tmp_path} is not a sweep directory: no spec.yaml"]


def test_export_round_trips_to_the_registrys_param_groups(sweep: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "train.yaml"
    assert main(["export", str(sweep), "-p", "mup", "--optimizer", "adamw", "--width", "512", "--out",
                 str(path)]) == 0
    assert f"export (yaml): {path}" in capsys.readouterr().out
    exp = parametrizations.load_export(path)
    assert exp.lr == pytest.approx(2 ** x_star("mup", 256)) and exp.tuned_width == 256 and exp.width == 512
    assert exp.weight_decay == SPEC["weight_decay"] and exp.train["warmup_steps"] == SPEC["warmup_steps"]
    assert exp.provenance["sweep"] == str(sweep.resolve()) and exp.provenance["bound"] is False
    assert exp.provenance["missing_trials"] == 1 and exp.provenance["verdict"] == "transfers"
    assert exp.provenance["best_lr_lo"] <= exp.lr <= exp.provenance["best_lr_hi"] and "warning" not in exp.provenance
    model = build_model(ModelConfig(**SPEC["model"], width=512), "mup", "adamw")
    got = exp.build_optimizer(model)
    want = parametrizations.build_optimizer(model, "mup", "adamw", lr=exp.lr, weight_decay=0.1)
    assert [(g["role"], g["lr"], g["weight_decay"]) for g in got.param_groups] == \
           [(g["role"], g["lr"], g["weight_decay"]) for g in want.param_groups]


def test_export_refuses_a_bound_unless_allowed(sweep: Path, tmp_path: Path, capsys) -> None:
    args = ["export", str(sweep), "-p", "sp", "--optimizer", "adamw", "--width", "2048", "--base-width", "2048",
            "--out", str(tmp_path / "sp.json")]
    assert main(args) == 2
    assert "on the low edge of the LR grid" in capsys.readouterr().err
    assert not (tmp_path / "sp.json").exists()
    assert main([*args, "--allow-bound"]) == 0  # at the width it was tuned at: no transfer, no verdict needed
    doc = json.loads((tmp_path / "sp.json").read_text(),
                     parse_constant=lambda name: pytest.fail(f"not strict JSON: {name}"))
    assert doc["lr"] == 2.0 ** -12 and doc["provenance"]["bound"] is True and doc["tuned_width"] == 2048
    # the low edge leaves the interval open below, and the slope (its widest width) open below: null, not -Infinity
    assert doc["provenance"]["best_lr_lo"] is None and doc["provenance"]["best_lr_hi"] >= 2.0 ** -12
    assert doc["provenance"]["slope_lo"] is None and doc["provenance"]["slope_hi"] < 0
    assert "warning" not in doc["provenance"]


def test_export_refuses_an_lr_that_does_not_transfer(sweep: Path, tmp_path: Path, capsys) -> None:
    """SP drifts: exporting its width-256 LR for width 1024 is refused with one line naming the verdict and the
    flag; with --allow-unverified the console warns and the file's provenance carries the warning."""
    out = tmp_path / "sp.yaml"
    args = ["export", str(sweep), "-p", "sp", "--optimizer", "adamw", "--width", "1024", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the transfer verdict for sp/adamw on smoothed_loss is drifts (slope -2.33" in err[0]
    assert "pass --allow-unverified to export it anyway" in err[0] and not out.exists()
    assert main([*args, "--allow-unverified"]) == 0
    captured = capsys.readouterr()
    assert "WARNING (--allow-unverified): UNVERIFIED: the transfer verdict for sp/adamw" in captured.err
    exp = parametrizations.load_export(out)
    assert exp.provenance["verdict"] == "drifts" and exp.provenance["warning"].startswith("UNVERIFIED: ")
    assert exp.provenance["slope_hi"] < -2 and exp.provenance["n_seeds"] == 3
    assert "UNVERIFIED" in out.read_text()  # in the file a user opens, not only in the parsed document


def test_export_fla_config(sweep: Path, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    assert main(["export", str(sweep), "-p", "mup", "--optimizer", "adamw", "--width", "1024", "--out", str(path),
                 "--format", "fla"]) == 0
    doc = json.loads(path.read_text())
    assert (doc["model_type"], doc["hidden_size"], doc["num_hidden_layers"]) == ("gated_deltanet", 1024, 2)
    assert parametrizations.load_export(path).width == 1024


@pytest.mark.parametrize("args,message", [
    (["-p", "nope", "--optimizer", "adamw", "--width", "512"], "unknown parametrization 'nope'"),
    (["-p", "mup", "--optimizer", "adam", "--width", "512"], "unknown optimizer 'adam'"),
    (["-p", "mup", "--optimizer", "adamw", "--width", "0"], "--width must be positive"),
    (["-p", "gdn-mup", "--optimizer", "adamw", "--width", "512"], "no optimum for gdn-mup/adamw (it has: mup/adamw"),
    (["-p", "mup", "--optimizer", "adamw", "--width", "512", "--base-width", "384"], "no optimum at width 384"),
])
def test_export_bad_input(sweep: Path, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    out = tmp_path / "x.yaml"
    assert main(["export", str(sweep), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_overview_puts_studies_side_by_side(report: tuple[Path, str], tmp_path: Path, capsys) -> None:
    """Two report folders of the synthetic sweep (the second as an 'sgd' study): µP transfers, spread 0.00; SP's
    bound and its base LR not carrying; a cost row per study; the Markdown written to --out as printed."""
    for name in ("study-a", "study-b"):
        shutil.copytree(report[0], tmp_path / name)
    out = tmp_path / "overview.md"
    assert main(["overview", str(tmp_path / "study-a"), str(tmp_path / "study-b"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_text() == text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["parametrization"].startswith("| parametrization | study-a: verdict, slope [90%]; spread (octaves) | "
                                              "study-b: verdict")
    assert "| **transfers**, slope +0.00 [+0.00, +0.00]; 0.00 (4 widths) | **transfers**" in rows["mup"]
    assert "(4 widths, 1 bound; wider **not** better at base LR)" in rows["sp"]
    assert rows["study-a"].startswith("| study-a | 0 | 0 |")  # trials.parquet only: no engine records, no runs


def test_overview_names_a_report_folder_after_its_study(report: tuple[Path, str], tmp_path: Path, capsys) -> None:
    """A folder called `report` (deltamup report's default, studies/<name>/report) is named after the one above."""
    shutil.copytree(report[0], tmp_path / "gdn-adamw" / "report")
    assert main(["overview", str(tmp_path / "gdn-adamw" / "report")]) == 0
    text = capsys.readouterr().out
    assert "| parametrization | gdn-adamw: verdict, slope [90%]; spread (octaves) |" in text
    assert "\n| gdn-adamw | 0 | 0 |" in text
    shutil.copytree(report[0], tmp_path / "gdn-adamw" / "report-wide")
    assert main(["overview", str(tmp_path / "gdn-adamw" / "report-wide")]) == 0  # report-<what>: "<study> (<what>)"
    assert "| parametrization | gdn-adamw (wide): verdict" in capsys.readouterr().out
    assert main(["overview", *(str(tmp_path / "gdn-adamw" / r) for r in ("report", "report-wide"))]) == 0
    text = capsys.readouterr().out
    assert "gdn-adamw (wide): verdict" in text
    assert text.count("\n| gdn-adamw") == 1  # one sweep, one cost row


def test_a_sweep_folder_is_named_after_its_study(tmp_path: Path) -> None:
    """The name reports and figures give a sweep: the study's for sweep/ and sweep-SUFFIX/, else the folder's."""
    for where, name in ((tmp_path / "gdn-sgd" / "sweep", "gdn-sgd"), (tmp_path / "gdn-8l" / "sweep-4l", "gdn-8l (4l)"),
                        (tmp_path / "runs" / "my-sweep", "my-sweep")):
        write_sweep(where)
        assert load_sweep(where).name == name


def test_overview_of_a_folder_without_a_report_fails_with_one_line(tmp_path: Path, capsys) -> None:
    assert main(["overview", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"deltamup overview: error: {tmp_path} is not a report folder of this version: no transfer.csv, "
                   "cost_total.csv (run deltamup report again)"]
