"""reports.analysis on a synthetic sweep whose optima are known in closed form.

Loss(lr, width, seed) = L0(width) + C·(log2 lr − x*(width))² + seed offset (offsets average to 0 over seeds), so the
seed-mean is an exact parabola in log2(lr) and its vertex x* is what the analysis must recover.
- "mup": x* = −7.3 at every width (perfect transfer); one trial failed with an error, one trial is missing.
- "sp":  x* = −5.3 − 2.3·log2(width/256): at 2048 the optimum lies below the grid (a bound); LR 2^−4 diverges at
  widths ≥ 1024 and in one seed at 512 and at 256 (there the optimum's neighbour is diverged: no parabola).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from deltamup.reports import analysis, intervals
from deltamup.sweeps import store

WIDTHS = [256, 512, 1024, 2048]
LOG2_LRS = list(range(-12, -3))  # 2^-12 … 2^-4
SEEDS = [0, 1, 2]
C = 0.05
SPEC = {"name": "synthetic", "widths": WIDTHS, "lrs": [2.0 ** x for x in range(-12, -3)],
        "parametrizations": ["mup", "sp"], "optimizers": ["adamw"], "seeds": SEEDS,
        "model": {"kind": "gdn", "depth": 2}, "steps": 50, "weight_decay": 0.1, "warmup_steps": 5}
MISSING = dict(parametrization="mup", optimizer="adamw", width=2048, lr=2.0 ** -12, seed=2)
FAILED = dict(parametrization="mup", optimizer="adamw", width=512, lr=2.0 ** -9, seed=1)


def x_star(parametrization: str, width: int) -> float:
    return -7.3 if parametrization == "mup" else -5.3 - 2.3 * math.log2(width / 256)


def base_loss(width: int) -> float:
    return 3.0 - 0.2 * math.log2(width / 256)


def diverges(parametrization: str, width: int, log2_lr: int, seed: int) -> bool:
    if parametrization != "sp" or log2_lr != -4:
        return False
    return width >= 1024 or (width == 512 and seed == 0) or (width == 256 and seed == 2)


def synthetic_trials(val_loss: bool = False) -> pl.DataFrame:
    rows = []
    for p in SPEC["parametrizations"]:
        for w in WIDTHS:
            for x in LOG2_LRS:
                for s in SEEDS:
                    lr = 2.0 ** x
                    if dict(parametrization=p, optimizer="adamw", width=w, lr=lr, seed=s) == MISSING:
                        continue
                    failed = dict(parametrization=p, optimizer="adamw", width=w, lr=lr, seed=s) == FAILED
                    div = diverges(p, w, x, s)
                    loss = base_loss(w) + C * (x - x_star(p, w)) ** 2 + 0.01 * (s - 1)
                    rows.append(dict(
                        trial_id=f"{p}-{w}-{x}-{s}", parametrization=p, optimizer="adamw", width=w, lr=lr, seed=s,
                        kind="gdn", depth=2, householder=1, steps=50, batch_size=8, seq_len=64, weight_decay=0.1,
                        final_train_loss=None if failed else (float("nan") if div else loss + 0.02),
                        val_loss=(loss if val_loss and not div and not failed else None),
                        smoothed_loss=None if failed else (float("nan") if div else loss),
                        diverged=div, diverged_step=17 if div else None, tokens=25600, wall_seconds=1.0,
                        tokens_per_s=25600.0, status="error" if failed else ("diverged" if div else "ok"),
                        error="CUDA out of memory" if failed else None))
    return pl.DataFrame(rows, infer_schema_length=None)


def surface_trials(slopes: dict[str, float], seeds: int, noise: float, rng_seed: int = 0, x0: float = -7.3,
                   horizon_shift: dict[int, float] | None = None, seed_offset: float = 0.02) -> pl.DataFrame:
    """Trials from a known loss surface plus noise, for every parametrization in `slopes`:
    loss = base_loss(w) + C·(log2 lr − x*(w))² + an offset per seed (the same at every LR and width) + noise·N(0, 1)
    per trial, with the optimum x*(w) = x0 + slope·log2(w/256). With horizon_shift {percent: octaves} the trials
    also record val_loss_h<percent>, whose optimum sits that many octaves off x*(w) (val_loss is 100%)."""
    rng = np.random.default_rng(rng_seed)
    offsets = seed_offset * rng.standard_normal(seeds)
    shifts = {100: 0.0, **(horizon_shift or {})}
    rows = []
    for p, slope in slopes.items():
        for w in WIDTHS:
            for x in LOG2_LRS:
                for s in range(seeds):
                    losses = {pct: base_loss(w) + C * (x - x0 - slope * math.log2(w / 256) - shift) ** 2 + offsets[s]
                              + noise * rng.standard_normal() for pct, shift in shifts.items()}
                    rows.append(dict(trial_id=f"{p}-{w}-{x}-{s}", parametrization=p, optimizer="adamw", width=w,
                                     lr=2.0 ** x, seed=s, status="ok", diverged=False, val_loss=losses[100],
                                     smoothed_loss=losses[100] + 0.01, final_train_loss=losses[100] + 0.02,
                                     **{f"val_loss_h{pct}": v for pct, v in losses.items() if pct != 100}))
    return pl.DataFrame(rows)


def surface_spec(trials: pl.DataFrame) -> dict:
    """The spec a surface_trials sweep ran."""
    return {**SPEC, "parametrizations": trials["parametrization"].unique(maintain_order=True).to_list(),
            "seeds": sorted(trials["seed"].unique().to_list())}


def write_sweep(path: Path, trials: pl.DataFrame | None = None, spec: dict | None = None) -> Path:
    """A sweep directory in the sweeps engine's format: spec.yaml, trials.parquet, curves.parquet."""
    path.mkdir(parents=True, exist_ok=True)
    trials = synthetic_trials() if trials is None else trials
    (path / "spec.yaml").write_text(yaml.safe_dump(spec or SPEC))
    trials.write_parquet(path / "trials.parquet")
    curves = [dict(trial_id=t, step=step, tokens=step * 512, train_loss=5.0 / (1 + step) + 2, lr=lr)
              for t, lr in zip(trials["trial_id"], trials["lr"]) for step in (0, 10, 20)]
    pl.DataFrame(curves).write_parquet(path / "curves.parquet")
    return path


@pytest.fixture()
def result(tmp_path: Path) -> analysis.Analysis:
    return analysis.analyze(write_sweep(tmp_path / "sweep"))


def row(table: pl.DataFrame, **keys) -> dict:
    rows = table.filter(*(pl.col(k) == v for k, v in keys.items())).to_dicts()
    assert len(rows) == 1, keys
    return rows[0]


def test_interior_optimum_is_refined_to_the_parabola_vertex(result: analysis.Analysis) -> None:
    for p, widths in (("mup", WIDTHS), ("sp", [512, 1024])):
        for w in widths:
            r = row(result.optima, parametrization=p, width=w)
            assert r["refined"] and not r["bound"] and r["edge"] is None
            assert r["log2_best_lr"] == pytest.approx(x_star(p, w), abs=1e-9)
            assert r["best_lr_grid"] == 2.0 ** round(x_star(p, w))
            assert r["best_loss"] == pytest.approx(base_loss(w), abs=1e-9)
            assert r["best_loss_grid"] > r["best_loss"]
            assert r["metric"] == "smoothed_loss"


def test_standard_error_across_seeds(result: analysis.Analysis) -> None:
    r = row(result.optima, parametrization="mup", width=1024)
    offsets = 0.01 * (np.array(SEEDS) - 1.0)
    assert r["n_seeds"] == 3
    assert r["best_loss_se"] == pytest.approx(offsets.std(ddof=1) / math.sqrt(3))


def test_edge_of_grid_is_a_bound(result: analysis.Analysis) -> None:
    r = row(result.optima, parametrization="sp", width=2048)
    assert r["bound"] and r["edge"] == "low" and not r["refined"]
    assert r["best_lr"] == r["best_lr_grid"] == 2.0 ** -12
    assert r["best_lr_lo"] == 0 and r["best_lr_hi"] >= 2.0 ** -12  # open below: the optimum may lie lower still


def test_diverged_seed_makes_the_lr_infinite_and_blocks_the_parabola(result: analysis.Analysis) -> None:
    curve = row(result.curves, parametrization="sp", width=512, lr=2.0 ** -4)
    assert math.isinf(curve["loss"]) and curve["n_diverged"] == 1 and curve["n_seeds"] == 3
    r = row(result.optima, parametrization="sp", width=256)  # argmin 2^-5, neighbour 2^-4 diverged in one seed
    assert not r["refined"] and not r["bound"]
    assert r["best_lr"] == r["best_lr_grid"] == 2.0 ** -5
    assert row(result.optima, parametrization="sp", width=1024)["n_diverged_lrs"] == 1


def test_a_finite_loss_above_the_uniform_predictions_is_diverged_and_moves_no_seed_offset() -> None:
    """Seed 0 over the whole grid, seeds 1 and 2 at the optimum and its neighbours (the studies' design); seed 1 blows
    up at 2^-4 to 12 nats, finite but above ln 256 = 5.55. It counts as diverged, and seed 0's lone cells keep their
    true seed-mean value: the blown-up loss is not taken for seed 1's luck (which would shift every seed-0 cell)."""
    offsets = {0: 0.02, 1: -0.01, 2: -0.01}
    rows = []
    for x in range(-9, -3):
        for s in (0, 1, 2) if x >= -6 else (0,):
            loss = 12.0 if (x, s) == (-4, 1) else 2.4 + C * (x + 6) ** 2 + offsets[s]
            rows.append(dict(parametrization="gdn-mup", optimizer="sgd", width=256, lr=2.0 ** x, seed=s,
                             status="ok", diverged=False, val_loss=loss, vocab_size=256))
    curves = analysis.lr_curves(pl.DataFrame(rows), "val_loss")
    blown = row(curves, lr=2.0 ** -4)
    assert math.isinf(blown["loss"]) and blown["n_diverged"] == 1 and blown["n_seeds"] == 3
    for x in (-9, -8, -7):
        r = row(curves, lr=2.0 ** x)
        assert r["seed_adjusted"] and r["loss"] == pytest.approx(2.4 + C * (x + 6) ** 2, abs=1e-9)
    assert math.isfinite(row(analysis.lr_curves(pl.DataFrame(rows).drop("vocab_size"), "val_loss"),
                             lr=2.0 ** -4)["loss"])  # without a vocabulary no threshold applies


def test_failed_trial_is_left_out_not_counted_as_diverged(result: analysis.Analysis) -> None:
    curve = row(result.curves, **{k: v for k, v in FAILED.items() if k != "seed"})
    assert curve["n_seeds"] == 2 and curve["n_failed"] == 1 and curve["n_diverged"] == 0
    assert math.isfinite(curve["loss"])
    assert result.failed.select("parametrization", "width", "lr", "seed").to_dicts() == [
        {k: FAILED[k] for k in ("parametrization", "width", "lr", "seed")}]


def test_missing_trials_are_listed(result: analysis.Analysis) -> None:
    assert len(analysis.expand_grid(SPEC)) == 2 * 4 * 9 * 3
    missing = result.missing.to_dicts()
    assert len(missing) == 1
    assert {k: missing[0][k] for k in MISSING} == pytest.approx(MISSING)


def test_transfer_metrics(result: analysis.Analysis) -> None:
    mup = row(result.transfer, parametrization="mup")
    assert mup["spread_octaves"] == pytest.approx(0, abs=1e-9)
    assert mup["slope"] == pytest.approx(0, abs=1e-9)
    assert mup["max_loss_lost"] == pytest.approx(0, abs=1e-12) and mup["n_bound"] == 0
    sp = row(result.transfer, parametrization="sp")
    found = [-5.0, x_star("sp", 512), x_star("sp", 1024), -12.0]  # 256: unrefined; 2048: the bound
    assert sp["spread_octaves"] == pytest.approx(max(found) - min(found))
    assert sp["slope"] == pytest.approx(np.polyfit(np.log2(WIDTHS), found, 1)[0])
    assert sp["n_bound"] == 1 and sp["widths"] == 4
    assert sp["slope_lo"] == -math.inf and sp["slope"] <= sp["slope_hi"] < 0  # the widest bound can only steepen it
    assert sp["spread_hi"] == math.inf and 0 < sp["spread_lo"] <= sp["spread_octaves"]
    assert sp["base_width"] == 256 and sp["base_lr_grid"] == 2.0 ** -5


def test_wider_is_better(result: analysis.Analysis) -> None:
    """µP's optimum stays put and the loss floor falls with width: wider is better, at the transferred LR too. SP's
    optimum drifts by 2.3 octaves a doubling, so its base width's LR costs more at each wider width."""
    mup, sp = row(result.transfer, parametrization="mup"), row(result.transfer, parametrization="sp")
    assert mup["wider_better"] is True and mup["wider_better_at_base_lr"] is True
    assert sp["wider_better"] is True and sp["wider_better_at_base_lr"] is False


def test_wider_is_better_needs_two_widths_and_no_divergence() -> None:
    assert analysis._decreasing(pl.Series([None, 1.0], dtype=pl.Float64)) is None
    assert analysis._decreasing(pl.Series([1.5, None, 1.2])) is True  # the LR not run at the middle width
    assert analysis._decreasing(pl.Series([1.5, 1.5])) is False
    assert analysis._decreasing(pl.Series([1.5, math.inf, 1.2])) is False


def test_loss_lost_with_the_base_widths_lr(result: analysis.Analysis) -> None:
    for w in WIDTHS:
        r = row(result.optima, parametrization="sp", width=w)
        grid_min = min(C * (x - x_star("sp", w)) ** 2 for x in LOG2_LRS)
        assert r["loss_lost"] == pytest.approx(C * (-5 - x_star("sp", w)) ** 2 - grid_min, abs=1e-9)
        assert r["loss_at_base_lr"] == pytest.approx(base_loss(w) + C * (-5 - x_star("sp", w)) ** 2, abs=1e-9)
    assert row(result.optima, parametrization="sp", width=256)["loss_lost"] == 0


def test_validation_loss_is_used_when_every_finished_trial_has_one(tmp_path: Path) -> None:
    trials = synthetic_trials(val_loss=True).with_columns(pl.col("smoothed_loss") + 1.0)
    result = analysis.analyze(write_sweep(tmp_path / "sweep", trials))
    r = row(result.optima, parametrization="mup", width=256)
    assert r["metric"] == "val_loss" and r["best_loss"] == pytest.approx(base_loss(256), abs=1e-9)
    some_missing = trials.with_columns(pl.when(pl.col("width") == 256).then(None).otherwise(pl.col("val_loss"))
                                       .alias("val_loss"))
    assert analysis.loss_metric(some_missing) == "smoothed_loss"


def test_all_diverged_width_has_no_optimum() -> None:
    trials = synthetic_trials().filter(pl.col("parametrization") == "sp").with_columns(
        pl.when(pl.col("width") == 2048).then(True).otherwise(pl.col("diverged")).alias("diverged"))
    result = analysis.estimate(trials)
    r = row(result.optima, parametrization="sp", width=2048)
    assert r["best_lr"] is None and r["n_diverged_lrs"] == len(LOG2_LRS) and r["loss_lost"] is None
    assert r["best_lr_lo"] is None and r["interval_method"] is None
    assert row(result.transfer, parametrization="sp")["widths"] == 3


def test_parabola_vertex() -> None:
    x = np.array([-3.0, -2.0, 0.0])
    vx, vy = intervals.parabola_vertex(x, 2.0 * (x + 1.7) ** 2 + 0.5)
    assert (vx, vy) == (pytest.approx(-1.7), pytest.approx(0.5))
    assert np.isnan(intervals.parabola_vertex(x, np.array([1.0, 0.5, -0.5]))).all()  # collinear
    assert intervals.parabola_vertex(x, np.array([1.0, 0.5, 0.1]))[0] == 0.0  # vertex beyond x[2]: clamped
    assert np.isnan(intervals.parabola_vertex(x, np.array([1.0, 0.5, np.inf]))).all()
    rows = np.array([2.0 * (x + 1.7) ** 2, 3.0 * (x + 2.5) ** 2])  # rows at once: (2, 3)
    assert intervals.parabola_vertex(np.broadcast_to(x, rows.shape), rows)[0] == pytest.approx([-1.7, -2.5])


def test_a_grid_finer_than_an_octave_fits_every_lr_within_an_octave() -> None:
    # half-octave LRs: the vertex is the least-squares parabola's through the five within an octave of the best, so a
    # bump on one neighbour moves it much less than it moves the parabola through the best and its two neighbours
    x = np.arange(-10.0, -6.75, 0.5)
    y = 0.012 * (x + 8.6) ** 2 + np.where(x == -9.0, 0.004, 0.0)
    window = np.abs(x - x[np.argmin(y)]) <= 1.0
    c2, c1, _ = np.polyfit(x[window], y[window], 2)
    v = intervals.vertices(x, y)
    assert window.sum() == 5 and v.refined[0] and v.x[0] == pytest.approx(-c1 / (2 * c2))
    three = intervals.parabola_vertex(x[3:6], y[3:6])[0]
    assert abs(v.x[0] + 8.6) < abs(three + 8.6) / 2
    # an octave grid keeps the three-point parabola; a diverged LR inside the window leaves the grid LR
    octave = np.arange(-10.0, -6.5, 1.0)
    curve = 0.012 * (octave + 8.6) ** 2
    assert intervals.vertices(octave, curve).x[0] == intervals.parabola_vertex(octave[1:], curve[1:])[0]
    diverged = intervals.vertices(x, np.where(x == -8.0, np.inf, y))
    assert not diverged.refined[0] and diverged.x[0] == x[np.argmin(y)]


def test_bad_spec_is_refused_by_field() -> None:
    with pytest.raises(ValueError, match="widths"):
        analysis.expand_grid({k: v for k, v in SPEC.items() if k != "widths"})
    with pytest.raises(ValueError, match=r"lrs\[1\]"):
        analysis.expand_grid({**SPEC, "lrs": [0.1, -1.0]})


def test_tables_are_written(tmp_path: Path, result: analysis.Analysis) -> None:
    written = analysis.write_tables(result, tmp_path / "out")
    assert {p.name for p in written} == {"optima.csv", "optima.parquet", "transfer.csv", "transfer.parquet",
                                         "verdicts.csv", "verdicts.parquet", "lr_curves.csv", "head_to_head.csv",
                                         "missing.csv"}
    assert pl.read_parquet(tmp_path / "out" / "optima.parquet").equals(result.optima)
    finished = dataclasses.replace(result, missing=result.missing.clear())  # the same report, its sweep finished
    assert "missing.csv" not in {p.name for p in analysis.write_tables(finished, tmp_path / "out")}
    assert not (tmp_path / "out" / "missing.csv").exists()  # not left over from the report before


def test_a_running_sweep_is_read_from_its_results(tmp_path: Path) -> None:
    """The engine writes results/<trial>.json as trials finish and trials.parquet only at the end."""
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    done = synthetic_trials().filter(pl.col("width") == 256)
    curve = {c: [] for c in store.CURVE_COLUMNS}
    for record in done.to_dicts():
        store.write_trial(tmp_path, record, curve)
    result = analysis.analyze(tmp_path)
    assert result.optima["width"].to_list() == [256, 256]
    assert len(result.missing) == result.grid_size - len(done)
    assert row(result.optima, parametrization="mup", width=256)["log2_best_lr"] == pytest.approx(-7.3)


def test_a_sweep_without_trials_yet(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    result = analysis.analyze(tmp_path)
    assert result.optima.is_empty() and result.transfer.is_empty()
    assert len(result.missing) == result.grid_size == 2 * 4 * 9 * 3


def test_not_a_sweep_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no spec.yaml"):
        analysis.load_sweep(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        analysis.load_sweep(tmp_path / "nope")
