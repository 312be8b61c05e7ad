"""The quick-start's re-run logic (resume by default, --fresh starts over) and its closing verdict, without running
the whole flow (that takes minutes): OUT as an earlier quick-start leaves it, and a tiny synthetic sweep."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_analysis import surface_spec, surface_trials, write_sweep

from deltamup.cli import build_parser, main
from deltamup.cli.quickstart import STUDY, prepare, verdict_lines
from deltamup.reports import analysis
from deltamup.sweeps import store


def earlier_quickstart(out: Path) -> None:
    """What a finished quick-start leaves: a sweep directory with one finished trial, a coordinate check, train.yaml."""
    sweep = out / "sweep"
    sweep.mkdir(parents=True)
    store.write_spec(sweep, {"name": "quickstart"})
    store.write_trial(sweep, {"trial_id": "t0", "status": "ok", "parametrization": "sp", "optimizer": "adamw",
                              "width": 32, "lr": 0.01, "seed": 0}, {c: [] for c in store.CURVE_COLUMNS})
    (out / "coord-check").mkdir()
    (out / "coord-check" / "coords.parquet").write_bytes(b"PAR1")
    (out / "train.yaml").write_text("schema: deltamup.export/1\n")


def test_a_first_run_starts_new(tmp_path: Path) -> None:
    assert prepare(tmp_path, fresh=False) == "new" and prepare(tmp_path, fresh=True) == "new"


def test_a_second_run_resumes_and_keeps_what_is_done(tmp_path: Path) -> None:
    earlier_quickstart(tmp_path)
    assert prepare(tmp_path, fresh=False) == "resume"
    assert store.finished_ids(tmp_path / "sweep") == {"t0"} and (tmp_path / "train.yaml").is_file()


def test_fresh_deletes_only_what_a_quickstart_wrote(tmp_path: Path) -> None:
    earlier_quickstart(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    assert prepare(tmp_path, fresh=True) == "fresh"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert prepare(tmp_path, fresh=False) == "new"


def test_a_folder_a_quickstart_did_not_write_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    earlier_quickstart(tmp_path)
    (tmp_path / "sweep" / "spec.yaml").unlink()
    with pytest.raises(ValueError, match="was not written by a quick-start: pass another --out"):
        prepare(tmp_path, fresh=True)
    assert (tmp_path / "coord-check" / "coords.parquet").is_file()


def test_the_flags_it_prints_exist_and_exclude_each_other(tmp_path: Path, capsys) -> None:
    parser = build_parser()
    assert parser.parse_args(["quickstart", "--resume"]).resume
    assert parser.parse_args(["quickstart", "--fresh"]).fresh
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["quickstart", "--resume", "--fresh"])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_bad_export_width_is_one_line_before_any_work(tmp_path: Path, capsys) -> None:
    assert main(["quickstart", "--out", str(tmp_path / "qs"), "--export-width", "0"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "deltamup quickstart: error: --export-width must be positive, got 0"]
    assert not (tmp_path / "qs").exists()


@pytest.mark.parametrize("seeds,shows", [(4, True), (1, False)])
def test_the_closing_verdict_says_what_the_budget_can_show(tmp_path: Path, seeds: int, shows: bool) -> None:
    """SP drifting and GDN-µP flat: with 4 seeds the verdicts are drifts and transfers and the quick-start says it
    shows the effect; with one seed both stay undetermined (their intervals only suggest it) and it says it only shows
    the machinery."""
    trials = surface_trials({"sp": -1.0, "gdn-mup": 0.0}, seeds, noise=0.01)
    lines = verdict_lines(analysis.analyze(write_sweep(tmp_path / "sweep", trials, surface_spec(trials))))
    assert lines[0] == "verdict on val_loss, 90% intervals (50 steps, 0.0256M tokens per trial, depth 2, widths " \
                       "256–2048):"
    if shows:
        assert lines[1].startswith("  gdn-mup/adamw transfers: slope ") and lines[2].startswith(
            "  sp/adamw drifts: slope -")
        assert lines[3] == "At this budget the quick-start shows the effect: SP's optimal LR drifts with width and " \
                           "GDN-µP's transfers."
    else:
        assert lines[1].startswith("  gdn-mup/adamw undetermined (fit-based interval; it suggests transfer): slope ")
        assert lines[2].startswith("  sp/adamw undetermined (fit-based interval; it suggests a drift): slope -")
        assert lines[3].startswith("This CPU budget cannot show the effect: sp is undetermined (drifts would show "
                                   "it); gdn-mup is undetermined (transfers would show it). It shows the machinery")
        assert lines[3].endswith(f"The GPU study that measures the effect: {STUDY} (its README has the commands).")
    assert not any("FAIL" in line for line in lines)
