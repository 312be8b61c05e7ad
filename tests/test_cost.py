"""A sweep's cost (sweeps/cost.py) from a directory in the engine's format: trial records in results/, runs.jsonl
with a finished and a killed run, gpu.csv samples; and the report's Cost section and tables."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from deltamup.sweeps import cost, store

EMPTY_CURVE = {c: [] for c in store.CURVE_COLUMNS}


def write_cost_sweep(out: Path) -> Path:
    """Run 1 (ended: 100 s of wall) ran two width-256 trials side by side on GPU 0; run 2 was killed after its one
    width-512 trial, which finished 50 s after the run started, on GPU 1."""
    trials = [("a", 1, 256, 1000.0, 1010.0, 8000, 10.0, "0"), ("b", 1, 256, 1000.0, 1020.0, 8000, 20.0, "0"),
              ("c", 2, 512, 2000.0, 2050.0, 16000, 40.0, "1")]
    for trial_id, run, width, start, end, tokens, seconds, gpu in trials:
        store.write_trial(out, dict(trial_id=trial_id, run=run, parametrization="gdn-mup", optimizer="adamw",
                                    width=width, lr=1e-3, seed=0, status="ok", smoothed_loss=3.0, started_at=start,
                                    finished_at=end, tokens=tokens, train_seconds=seconds,
                                    tokens_per_s=tokens / seconds, gpu_ids=[gpu]), EMPTY_CURVE)
    store.append_run(out, {"run": 1, "started_at": 990.0})
    store.append_run(out, {"run": 1, "started_at": 990.0, "finished_at": 1090.0, "wall_seconds": 100.0})
    store.append_run(out, {"run": 2, "started_at": 2000.0})  # killed: no end line
    samples = [(1005.0, "0", 80.0), (1015.0, "0", 60.0), (1030.0, "0", 0.0), (2010.0, "1", 90.0), (2040.0, "1", 70.0)]
    (out / "gpu.csv").write_text("".join(f"{t},{g},{u},1000\n" for t, g, u in samples))
    return out


def test_totals_count_each_runs_wall_time(tmp_path: Path) -> None:
    t = cost.totals(write_cost_sweep(tmp_path))
    assert t["runs"] == 2 and t["trials"] == 3 and t["tokens"] == 32000
    assert t["wall_seconds"] == pytest.approx(100.0 + 50.0)  # the killed run until its last finished trial
    assert t["tokens_per_s"] == pytest.approx(32000 / 150.0)
    assert t["gpu_busy"] == pytest.approx((80 + 60 + 0 + 90 + 70) / 5)
    assert t["gpu_seconds"] == pytest.approx(100.0 * 1 + 50.0 * 1)  # each run's trials on one GPU


def test_gpu_seconds_count_every_gpu_a_run_used(tmp_path: Path) -> None:
    """A run whose trials ran on GPUs 0 and 1 held two GPUs for its wall time; a CPU sweep has no GPU time."""
    for trial_id, gpu in (("a", "0"), ("b", "1"), ("c", "1")):
        store.write_trial(tmp_path / "gpu", dict(trial_id=trial_id, run=1, width=256, status="ok", tokens=10,
                                                 gpu_ids=[gpu]), EMPTY_CURVE)
        store.write_trial(tmp_path / "cpu", dict(trial_id=trial_id, run=1, width=256, status="ok", tokens=10,
                                                 gpu_ids=[]), EMPTY_CURVE)
    for out in (tmp_path / "gpu", tmp_path / "cpu"):
        store.append_run(out, {"run": 1, "started_at": 0.0, "finished_at": 30.0, "wall_seconds": 30.0})
    assert cost.totals(tmp_path / "gpu")["gpu_seconds"] == pytest.approx(60.0)
    assert cost.totals(tmp_path / "cpu")["gpu_seconds"] is None


def test_per_width_sums_trial_time_and_averages_throughput(tmp_path: Path) -> None:
    rows = {r["width"]: r for r in cost.per_width(write_cost_sweep(tmp_path))}
    assert rows[256]["trials"] == 2 and rows[256]["tokens"] == 16000
    assert rows[256]["trial_seconds"] == pytest.approx(30.0)  # overlapping trials: not wall time
    assert rows[256]["tokens_per_s_trial"] == pytest.approx((800.0 + 400.0) / 2)
    assert rows[256]["gpu_util"] == pytest.approx((80 + (80 + 60) / 2) / 2)  # a: the sample at 1005; b: 1005, 1015
    assert rows[512]["tokens_per_s_trial"] == pytest.approx(400.0) and rows[512]["gpu_util"] == pytest.approx(80.0)


def test_a_sweep_without_records_costs_nothing(tmp_path: Path) -> None:
    t = cost.totals(tmp_path)
    assert (t["runs"], t["trials"], t["wall_seconds"], t["tokens_per_s"], t["gpu_seconds"], t["gpu_busy"]) == \
        (0, 0, 0.0, None, None, None)
    assert cost.per_width(tmp_path) == []


def test_report_writes_the_cost(tmp_path: Path) -> None:
    import yaml
    from test_analysis import SPEC

    from deltamup.reports.report import build_report

    sweep = write_cost_sweep(tmp_path / "sweep")
    (sweep / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    report = build_report(sweep)
    assert pl.read_csv(report.out / "cost.csv")["width"].to_list() == [256, 512]
    assert pl.read_csv(report.out / "cost_total.csv")["wall_seconds"].to_list() == [150.0]
    assert pl.read_csv(report.out / "cost_total.csv")["gpu_seconds"].to_list() == [150.0]
    assert "3 trials in 2 run(s), wall 2m30s (150 s" in report.page.read_text()

