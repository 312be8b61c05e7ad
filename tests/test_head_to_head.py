"""Parametrizations head to head (reports/head_to_head.py) on synthetic losses with a known answer, and the report's
--widths restriction."""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from deltamup.cli import main
from deltamup.reports import analysis
from deltamup.reports.analysis import analyze, expand_grid, load_sweep, missing_trials, restrict
from deltamup.reports.head_to_head import describe
from deltamup.reports.head_to_head import head_to_head as table_of
from deltamup.reports.intervals import mean_interval, seed_batch_interval, student_t

FIXTURE = Path(__file__).parent / "fixtures" / "cpu-3seeds"
LRS = (1e-3, 2e-3, 4e-3)


def losses(rows: list[tuple[str, int, float, int, float]]) -> pl.DataFrame:
    """(parametrization, width, lr, seed, val_loss) rows as finished trials (status ok, +inf: diverged)."""
    return pl.DataFrame([dict(parametrization=p, optimizer="adamw", width=w, lr=lr, seed=s, val_loss=x,
                              status="ok" if math.isfinite(x) else "diverged") for p, w, lr, s, x in rows])


def head_to_head(trials: pl.DataFrame) -> pl.DataFrame:
    """The table as the analysis makes it: trial losses and the optimum table (its best_lr_grid) of val_loss."""
    return table_of(analysis.trial_losses(trials, "val_loss"),
                    analysis.optima(analysis.lr_curves(trials, "val_loss"), "val_loss"))


def surface(name: str, width: int, best: float, offset: float, noise: list[float]) -> list:
    """A parabola in log2 LR around `best`, shifted by `offset`, plus a per-seed noise shared by every LR."""
    return [(name, width, lr, s, 1.0 + offset + 0.1 * math.log2(lr / best) ** 2 + n)
            for lr in LRS for s, n in enumerate(noise)]


def test_paired_differences_at_own_best_and_at_the_base_lr():
    noise = [0.0, 0.004, -0.002, 0.001]
    rows = (surface("a", 256, 2e-3, 0.0, noise) + surface("b", 256, 2e-3, 0.0, [0.0, 0.0, 0.0, 0.0])
            + surface("a", 1024, 2e-3, -0.02, noise)                    # a's optimum stays
            + surface("b", 1024, 1e-3, 0.0, [0.01, 0.0, 0.01, 0.0]))   # b's optimum moves down an octave
    table = {(r["width"], r["at"]): r for r in head_to_head(losses(rows)).iter_rows(named=True)}
    assert set(table) == {(256, "own best"), (1024, "own best"), (1024, "base LR")}  # base LR = own best at 256
    own = table[(1024, "own best")]
    d = [n - 0.02 - m for n, m in zip(noise, [0.01, 0.0, 0.01, 0.0])]
    mean = sum(d) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 3)
    assert (own["lr_a"], own["lr_b"], own["n_seeds"]) == (2e-3, 1e-3, 4)
    assert own["diff"] == pytest.approx(mean)
    assert own["diff_hi"] - own["diff"] == pytest.approx(student_t(3) * sd / 2)
    assert own["better"] == "a"
    base = table[(1024, "base LR")]  # b at its base LR 2e-3 is one octave off its new optimum: +0.1 nats
    assert (base["lr_a"], base["lr_b"]) == (2e-3, 2e-3)
    assert base["diff"] == pytest.approx(mean - 0.1) and base["better"] == "a"
    assert table[(256, "own best")]["better"] == "neither"  # the same surface, seed noise only


def test_an_own_best_on_its_grids_edge_is_marked_provisional():
    noise = [0.0, 0.003, -0.002]
    rows = (surface("a", 256, 2e-3, 0.0, noise) + surface("b", 256, 2e-3, 0.0, noise)
            + surface("a", 1024, 8e-3, 0.0, noise)    # a's optimum moved past the grid's highest LR, 4e-3
            + surface("b", 1024, 2e-3, 0.0, noise))
    table = {(r["width"], r["at"]): r for r in head_to_head(losses(rows)).iter_rows(named=True)}
    own, base, inside = table[(1024, "own best")], table[(1024, "base LR")], table[(256, "own best")]
    assert (own["lr_a"], own["edge_a"], own["edge_b"]) == (4e-3, "high", None)
    assert base["edge_a"] is None and base["edge_b"] is None  # the base LR is what transfer gives, edge or not
    assert inside["edge_a"] is None and inside["edge_b"] is None
    assert describe(own).endswith("(provisional: a's best is its grid's high LR)")
    assert "provisional" not in describe(base) and "provisional" not in describe(inside)


def test_a_pair_whose_sides_trained_on_different_gpus_or_code_says_so():
    """same_gpu and same_code compare the GPU models and code the paired trials' records name (a record naming
    neither, as before the record kept them, counts as one value): a shift common to one side's seeds is not in the
    interval, and the summary's line names different GPUs."""
    noise = [0.0, 0.003, -0.002]
    trials = losses(surface("a", 256, 2e-3, 0.0, noise) + surface("b", 256, 2e-3, 0.01, noise))
    (row,) = head_to_head(trials).iter_rows(named=True)  # neither side's records name them
    assert row["same_gpu"] is True and row["same_code"] is True
    named = trials.with_columns(pl.lit("H100").alias("gpu_name"), pl.lit("c0de").alias("code"))
    (row,) = head_to_head(named).iter_rows(named=True)
    assert row["same_gpu"] is True and row["same_code"] is True and "different GPUs" not in describe(row)
    for later in (pl.when(pl.col("parametrization") == "b").then(pl.lit("H200")).otherwise(pl.col("gpu_name")),
                  pl.when((pl.col("parametrization") == "b") & (pl.col("seed") == 2)).then(None)
                  .otherwise(pl.col("gpu_name"))):  # one side on another GPU kind; one seed of it not recorded
        (row,) = head_to_head(named.with_columns(later.alias("gpu_name"))).iter_rows(named=True)
        assert row["same_gpu"] is False and row["same_code"] is True
        assert row["better"] == "a"  # a − b = −0.01 on every seed
        assert describe(row).endswith("(the sides' records name different GPUs)")
    (row,) = head_to_head(named.with_columns(pl.when(pl.col("parametrization") == "a").then(pl.lit("0ther"))
                                             .otherwise(pl.col("code")).alias("code"))).iter_rows(named=True)
    assert row["same_gpu"] is True and row["same_code"] is False and "different GPUs" not in describe(row)


def test_the_validation_batches_interval_holds_the_mean_where_the_seeds_alone_do_not():
    """3 seeds × 16 validation batches with a batch effect common to the seeds (the same batches for every trial):
    the interval over the seeds' means misses the true difference 0 far more often than 10%; seed_batch_interval
    holds it about 90% of the time. Without a batch effect the two agree."""
    rng = np.random.default_rng(0)
    held = {"seeds": 0, "seeds and batches": 0}
    for _ in range(2000):
        d = (rng.normal(0, 0.004, (3, 1)) + rng.normal(0, 0.02, (1, 16)) + rng.normal(0, 0.008, (3, 16)))
        for name, (_, lo, hi) in (("seeds", mean_interval(d.mean(axis=1))), ("seeds and batches",
                                                                             seed_batch_interval(d))):
            held[name] += lo <= 0 <= hi
    assert held["seeds"] / 2000 < 0.75
    assert 0.86 <= held["seeds and batches"] / 2000 <= 0.95
    quiet = rng.normal(0, 0.004, (3, 1)) + np.zeros((3, 16))  # seed effects only: no batch variance of its own
    assert seed_batch_interval(quiet) == pytest.approx(mean_interval(quiet.mean(axis=1)))


def test_head_to_head_counts_the_validation_batches_where_every_paired_trial_recorded_them():
    rng = np.random.default_rng(1)
    batch_effect = rng.normal(0, 0.02, 16)
    rows = []
    for p, shift in (("a", -0.01), ("b", 0.0)):
        for lr in LRS:
            for seed in range(3):
                per_batch = 1.0 + shift + 0.1 * math.log2(lr / 2e-3) ** 2 + (batch_effect if p == "a" else 0) \
                    + rng.normal(0, 0.002, 16)
                rows.append(dict(parametrization=p, optimizer="adamw", width=256, lr=lr, seed=seed, status="ok",
                                 val_loss=float(per_batch.mean()), val_batch_losses=json.dumps(per_batch.tolist())))
    with_batches = head_to_head(pl.DataFrame(rows)).row(0, named=True)
    seeds_only = head_to_head(pl.DataFrame(rows).drop("val_batch_losses")).row(0, named=True)
    assert with_batches["val_batches"] == 16 and seeds_only["val_batches"] is None
    assert with_batches["diff"] == pytest.approx(seeds_only["diff"])
    assert with_batches["diff_hi"] - with_batches["diff_lo"] > 2 * (seeds_only["diff_hi"] - seeds_only["diff_lo"])
    one_missing = pl.DataFrame([r | {"val_batch_losses": None} if r["seed"] == 2 and r["parametrization"] == "b"
                                else r for r in rows])
    assert head_to_head(one_missing).row(0, named=True)["val_batches"] is None  # seeds alone, as before
    assert "3 seeds and 16 validation batches" in describe(with_batches)


def test_the_summary_says_which_intervals_leave_the_validation_batches_out(tmp_path):
    """summary.md counts the head-to-head intervals over seeds alone on val_loss; with every trial's per-batch
    losses there are none to count."""
    from test_analysis import surface_spec, surface_trials, write_sweep

    from deltamup.reports.summary import summary_markdown

    trials = surface_trials({"sp": 0.0, "gdn-mup": 0.0}, 3, noise=0.005)
    plain = summary_markdown(analysis.analyze(write_sweep(tmp_path / "plain", trials, surface_spec(trials))))
    rows = plain.split("Head to head (val_loss")[1].count("\n- at width")
    assert f"{rows} of these intervals are over the seeds alone" in plain and rows > 0
    rng = np.random.default_rng(2)

    def per_batch(v: float) -> str:  # four batches whose mean is the trial's val_loss
        spread = rng.normal(0, 0.01, 4)
        return json.dumps((v + spread - spread.mean()).tolist())
    batched = trials.with_columns(pl.col("val_loss").map_elements(per_batch, return_dtype=pl.String)
                                  .alias("val_batch_losses"))
    text = summary_markdown(analysis.analyze(write_sweep(tmp_path / "batched", batched, surface_spec(batched))))
    assert "over the seeds alone" not in text and "3 seeds and 4 validation batches" in text


def test_a_diverged_trial_has_no_interval_and_one_seed_none():
    rows = ([("a", w, LRS[0], s, x) for w, x in ((256, 1.0), (1024, 0.9)) for s in (0, 1)]
            + [("b", 256, LRS[0], s, 1.1) for s in (0, 1)] + [("b", 1024, LRS[1], s, 0.95) for s in (0, 1)]
            + [("b", 1024, LRS[0], 0, 1.0), ("b", 1024, LRS[0], 1, math.inf)])  # b diverges at its base LR
    base = head_to_head(losses(rows)).filter(pl.col("at") == "base LR").row(0, named=True)
    assert base["diff"] == -math.inf and base["diff_lo"] is None and base["better"] == "a"
    (one,) = head_to_head(losses([("a", 256, 1e-3, 0, 1.0), ("b", 256, 1e-3, 0, 1.2)])).iter_rows(named=True)
    assert one["diff"] == pytest.approx(-0.2) and one["diff_lo"] is None and one["better"] is None


def test_report_widths_restricts_the_analysis_and_refuses_absent_widths(tmp_path, capsys):
    sweep = load_sweep(FIXTURE)
    widths = sorted(set(sweep.trials["width"].to_list()))
    kept = restrict(sweep, widths[:2])
    assert sorted(set(kept.trials["width"].to_list())) == widths[:2] and kept.spec["widths"] == widths[:2]
    with pytest.raises(ValueError, match=f"no trials at width {max(widths) * 2}"):
        restrict(sweep, [widths[0], max(widths) * 2])
    out = Path(shutil.copytree(FIXTURE, tmp_path / "sweep"))
    assert main(["report", str(out), "--widths", ",".join(map(str, widths[:2])), "--out", str(tmp_path / "r")]) == 0
    optima = pl.read_csv(tmp_path / "r" / "optima.csv")
    assert sorted(set(optima["width"].to_list())) == widths[:2]
    assert (tmp_path / "r" / "head_to_head.csv").is_file()
    assert "Head to head" in (tmp_path / "r" / "summary.md").read_text()
    for bad in ("0,64", "64,64", "x"):
        with pytest.raises(SystemExit) as exit_:
            main(["report", str(out), "--widths", bad])
        assert exit_.value.code == 2
    assert main(["report", str(out), "--widths", f"{widths[0]},{max(widths) * 2}"]) == 2
    assert not (out / "report").exists()  # refused before any work


def test_restricting_to_widths_the_last_run_spec_lacks_counts_no_missing_trials():
    """A study run in parts stores the last part's spec (e.g. only its widest width): a report restricted to the
    other widths has no grid of its own, so nothing is "missing" there (not the last part's LRs at those widths)."""
    sweep = load_sweep(FIXTURE)
    widths = sorted(set(sweep.trials["width"].to_list()))
    last_part = dataclasses.replace(sweep, spec={**sweep.spec, "widths": [widths[-1]]})
    kept = restrict(last_part, widths[:2])
    assert kept.spec["widths"] == [] and expand_grid(kept.spec).is_empty()
    assert missing_trials(expand_grid(kept.spec), kept.trials).is_empty()
    assert not expand_grid(restrict(sweep, widths[:2]).spec).is_empty()  # a spec naming them keeps its grid
    result = analyze(kept)  # the budget comes from the trials' widths, not the spec's (none)
    assert result.grid_size == 0 and sorted(set(result.optima["width"].to_list())) == widths[:2]
    assert result.budget["steps"] == sweep.trials["max_steps"][0]


def test_restricting_a_spec_with_cells_narrows_the_cells():
    """A part run as `only` cells (seeds around each width's optimum) and then reported over some widths: the cells
    at the other widths go, the grid is what the remaining cells ask for."""
    sweep = load_sweep(FIXTURE)
    widths = sorted(set(sweep.trials["width"].to_list()))
    lrs = sweep.spec["lrs"]
    cells = [{"widths": [w], "lrs": lrs[i:i + 2]} for i, w in enumerate(widths)]
    kept = restrict(dataclasses.replace(sweep, spec={**sweep.spec, "only": cells}), widths[:2])
    assert kept.spec["only"] == cells[:2]
    grid = expand_grid(kept.spec)
    assert sorted(set(grid["width"].to_list())) == widths[:2]
    assert grid.height == 2 * 2 * len(sweep.spec["parametrizations"]) * len(sweep.spec["seeds"])
    assert expand_grid(restrict(dataclasses.replace(sweep, spec={**sweep.spec, "only": cells[2:]}),
                                widths[:2]).spec).is_empty()
