"""Intervals and verdicts on synthetic sweeps whose optimum is known: trials from a loss surface plus noise
(tests/test_analysis.py's surface_trials), analysed as a sweep directory."""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_analysis import WIDTHS, row, surface_spec, surface_trials, write_sweep

from deltamup.reports import analysis, intervals, verdict
from deltamup.reports.summary import summary_markdown
from deltamup.reports.tuned import export_from_sweep

X0 = -7.3


def log2_interval(r: dict) -> tuple[float, float]:
    return math.log2(r["best_lr_lo"]), math.log2(r["best_lr_hi"])


def true_optimum(slope: float, width: int) -> float:
    return X0 + slope * math.log2(width / 256)


def test_known_optimum_lies_inside_its_interval() -> None:
    """One noise draw: every width's interval holds the true optimum, and each slope's interval the true slope. (A
    90% interval misses one time in ten: over 8 widths most draws miss somewhere; the next test checks the rate.)"""
    slopes = {"flat": 0.0, "drift": -1.0}
    result = analysis.estimate(surface_trials(slopes, seeds=8, noise=0.01, rng_seed=2))
    for r in result.optima.iter_rows(named=True):
        lo, hi = log2_interval(r)
        assert lo <= true_optimum(slopes[r["parametrization"]], r["width"]) <= hi, r
        assert lo <= r["log2_best_lr"] <= hi and hi - lo < 0.5
        assert r["interval_method"] == "seeds" and r["fit_noise"] is None
    for p, slope in slopes.items():
        t = row(result.transfer, parametrization=p)
        assert t["slope_lo"] <= slope <= t["slope_hi"] and t["n_seeds"] == 8


def test_intervals_cover_the_truth_about_as_often_as_they_say() -> None:
    """Over 10 noise draws × 2 parametrizations × 4 widths, the 90% intervals (3 seeds: a seed bootstrap widened for
    small samples; 1 seed: the fit bootstrap at the noise floor, which equals the true noise here) cover the true
    optimum at least 80% of the time."""
    for seeds in (1, 3):
        hits = []
        for draw in range(10):
            slopes = {"flat": 0.0, "drift": -1.0}
            optima = analysis.estimate(surface_trials(slopes, seeds, noise=0.01, rng_seed=draw)).optima
            for r in optima.iter_rows(named=True):
                lo, hi = log2_interval(r)
                hits.append(lo <= true_optimum(slopes[r["parametrization"]], r["width"]) <= hi)
        assert np.mean(hits) >= 0.8, (seeds, np.mean(hits))


def test_a_three_seed_interval_holds_a_known_optimum_nine_times_in_ten() -> None:
    """1500 simulated widths of 3 seeds (a bowl in log2 LR, seed offsets and per-trial scatter of the 8-layer
    study's size, LRs 2^-10 … 2^-7): the seed interval (point ± z·SD of the replicates) holds the true optimum about
    90% of the time; the percentiles of the same replicates, which cut the 3-seed bootstrap's rare tail resamples,
    hold it less often."""
    rng = np.random.default_rng(0)
    x = np.arange(-10.0, -6.0)
    held: dict[str, list[bool]] = {"seeds": [], "fit": []}  # "fit": the replicates' 5th-95th percentiles
    for _ in range(1500):
        x_star = rng.uniform(-9.0, -8.5)
        per_seed = 1 + 0.012 * (x - x_star) ** 2 + rng.normal(0, 0.008, (3, 1)) + rng.normal(0, 0.006, (3, len(x)))
        width = intervals.Width(x, per_seed, per_seed.mean(0), np.full(len(x), 3), 3, "seeds")
        replicates = intervals.replicate_optima([width], 0.01, rng, rng)[:, 0]
        point = intervals.vertices(x, width.curve).x[0]
        for method, hits in held.items():
            lo, hi = intervals.interval(replicates, point, method)
            hits.append(bool(lo <= x_star <= hi))
    seeds, percentiles = np.mean(held["seeds"]), np.mean(held["fit"])
    assert 0.87 <= seeds <= 0.93 and percentiles < seeds - 0.02, (seeds, percentiles)


def test_the_seed_lr_scatter_is_what_the_seeds_offsets_leave() -> None:
    """Around the seed-mean curve's best LR and its two neighbours: the residual of the additive seed + LR fit on
    (S − 1)(3 − 1) degrees of freedom. Seed offsets alone leave nothing, LRs farther out do not count, and a seed
    with one LR of the three drops out."""
    rng = np.random.default_rng(4)
    x = np.arange(-11.0, -5.0)
    offsets, scatter = rng.normal(0, 0.02, (4, 1)), rng.normal(0, 0.005, (4, len(x)))
    per_seed = 1 + 0.05 * (x + 8.8) ** 2 + offsets + scatter
    assert np.argmin(per_seed.mean(0)) == 2

    def two_way(y: np.ndarray) -> float:
        return float(((y - y.mean(1, keepdims=True) - y.mean(0) + y.mean()) ** 2).sum())

    ss, dof = intervals.seed_lr_scatter(per_seed, per_seed.mean(0))
    assert dof == 6 and ss == pytest.approx(two_way(per_seed[:, 1:4]))
    assert intervals.seed_lr_scatter(per_seed - scatter, per_seed.mean(0))[0] == pytest.approx(0, abs=1e-12)
    far = per_seed.copy()
    far[:, [0, 4, 5]] += rng.normal(0, 1, (4, 3))
    assert intervals.seed_lr_scatter(far, per_seed.mean(0)) == pytest.approx((ss, 6))
    thin = per_seed.copy()
    thin[3, 1:3] = np.nan
    assert intervals.seed_lr_scatter(thin, per_seed.mean(0)) == pytest.approx((two_way(per_seed[:3, 1:4]), 4))


def test_seeds_that_agree_by_chance_get_the_sweeps_scatter_as_a_floor() -> None:
    """Three seeds whose curves differ by their offsets alone: the seed bootstrap has no spread, and the scatter
    floor (σ measured across the sweep) spreads the width's interval as far as that scatter moves an optimum of three
    seeds, × t(dof)/z. A width whose own seeds scatter more than the floor keeps its replicates."""
    x = np.arange(-10.0, -6.0)
    rng = np.random.default_rng(5)
    agree = 1 + 0.012 * (x + 8.7) ** 2 + rng.normal(0, 0.008, (3, 1))
    width = intervals.Width(x, agree, agree.mean(0), np.full(4, 3), 3, "seeds", scatter_floor=(0.006, 16))
    point = intervals.vertices(x, width.curve).x[0]
    seeds_only = intervals.replicate_optima([width], 0.01, rng, rng)
    assert np.ptp(seeds_only) < 1e-9
    floored, raised = intervals.with_scatter_floor([width], seeds_only, rng)
    lo, hi = intervals.interval(floored[:, 0], point, "seeds")
    noisy = width.curve + 0.006 / math.sqrt(3) * rng.standard_normal((20000, 4))
    spread = np.std(intervals.vertices(x, noisy).x) * intervals.student_t(16)
    assert raised[0] and lo < point < hi and (hi - lo) / 2 == pytest.approx(spread, rel=0.1)
    apart = agree + rng.normal(0, 0.02, (3, 4))
    width = intervals.Width(x, apart, apart.mean(0), np.full(4, 3), 3, "seeds", scatter_floor=(0.002, 16))
    replicates = intervals.replicate_optima([width], 0.01, rng, rng)
    kept, raised = intervals.with_scatter_floor([width], replicates, rng)
    assert not raised[0] and np.array_equal(kept, replicates, equal_nan=True)


def test_the_scatter_floor_holds_the_optimum_where_three_seeds_agreed_by_chance() -> None:
    """600 simulated widths at the 8-layer study's width-256 noise (3 seeds, seed × LR scatter σ 0.004, LRs 2^-10 …
    2^-7), the scatter floor's σ pooled with three other parametrizations' widths of that noise: the intervals the
    seed bootstrap alone made narrower than a quarter octave (a fifth of them) held the optimum 59% of the time; with
    the floor 85%, and all widths together 95%."""
    rng = np.random.default_rng(0)
    x = np.arange(-10.0, -6.0)
    narrow, held, held_alone = [], [], []
    for _ in range(600):
        truths = rng.uniform(-9.0, -8.5, 4)
        groups = [intervals.Width(x, y, y.mean(0), np.full(4, 3), 3, "seeds")
                  for y in (1 + 0.012 * (x - t) ** 2 + rng.normal(0, 0.008, (3, 1)) + rng.normal(0, 0.004, (3, 4))
                            for t in truths)]
        floor = intervals.pooled_sigma(intervals.seed_lr_scatter(w.per_seed, w.curve) for w in groups)
        width = dataclasses.replace(groups[0], scatter_floor=floor)
        point = intervals.vertices(x, width.curve).x[0]
        alone = intervals.replicate_optima([width], 0.01, rng, rng)
        lo, hi = intervals.interval(alone[:, 0], point, "seeds")
        narrow.append(hi - lo < 0.25)
        held_alone.append(lo <= truths[0] <= hi)
        lo, hi = intervals.interval(intervals.with_scatter_floor([width], alone, rng)[0][:, 0], point, "seeds")
        held.append(lo <= truths[0] <= hi)
    narrow, held, held_alone = map(np.array, (narrow, held, held_alone))
    assert 0.15 < narrow.mean() < 0.3
    assert held_alone[narrow].mean() < 0.72 and held[narrow].mean() > 0.78 and held.mean() > 0.9, (
        held_alone[narrow].mean(), held[narrow].mean(), held.mean())


def test_a_widths_scatter_floor_pools_over_the_sweeps_parametrizations() -> None:
    """optima.csv names the scatter floor's σ of each 3-seed width, the same for every parametrization at that width
    (the scatter of both pooled), each one's own piece of it, and whether it set the interval; a 1-seed width has
    none."""
    trials = surface_trials({"a": 0.0, "b": -1.0}, seeds=3, noise=0.006, rng_seed=1)
    est = analysis.estimate(trials, "val_loss")
    for w in WIDTHS:
        rows = est.optima.filter(pl.col("width") == w)
        parts = []
        for p in ("a", "b"):
            t = trials.filter((pl.col("width") == w) & (pl.col("parametrization") == p)).sort("seed", "lr")
            y = t["val_loss"].to_numpy().reshape(3, -1)
            parts.append(intervals.seed_lr_scatter(y, y.mean(0)))
        sigma = math.sqrt(sum(ss for ss, _ in parts) / sum(d for _, d in parts))
        assert rows["scatter_floor"].to_list() == pytest.approx([sigma, sigma])
        mine = rows.sort("parametrization")
        assert mine["scatter_own"].to_list() == pytest.approx([math.sqrt(ss / d) for ss, d in parts])
        assert mine["scatter_own_dof"].to_list() == [d for _, d in parts]
        assert rows["scatter_floored"].dtype == pl.Boolean and rows["scatter_floored"].null_count() == 0
    single = analysis.estimate(surface_trials({"a": 0.0}, seeds=1, noise=0.006), "val_loss").optima
    assert single["scatter_floor"].null_count() == single["scatter_floored"].null_count() == len(single)


def test_the_summary_names_the_widths_the_scatter_floor_set(tmp_path: Path) -> None:
    """Seeds that differ by their offsets alone (SP) beside two parametrizations whose seeds scatter: every width of
    SP gets its interval from their scatter, and the summary's paragraph names exactly the widths the floor set."""
    from deltamup.reports.interpretation import interpretation

    trials = pl.concat([surface_trials({"sp": 0.0}, seeds=3, noise=0.0, rng_seed=1),
                        surface_trials({"gdn-mup": 0.0}, seeds=3, noise=0.006, rng_seed=1),
                        surface_trials({"mup": 0.0}, seeds=3, noise=0.006, rng_seed=2)])
    a = analysis.analyze(write_sweep(tmp_path / "sweep", trials, surface_spec(trials)))
    raised = a.optima.filter(pl.col("scatter_floored"))
    assert set(raised.filter(pl.col("parametrization") == "sp")["width"]) == set(WIDTHS)
    text = interpretation(a)
    named = set(re.findall(r"([\w-]+)/adamw @(\d+)", text.split("scatter floor) at: ")[1].split(".")[0]))
    assert named == {(r["parametrization"], str(r["width"])) for r in raised.iter_rows(named=True)}


def test_the_f_survival_matches_the_tables_critical_values() -> None:
    """P(F > f) at the 5% and 1% points of Snedecor's F in the printed tables, and at the median of F(30, 30)."""
    for f, d1, d2, p in ((3.8379, 4, 8, 0.05), (7.0061, 4, 8, 0.01), (4.9646, 1, 10, 0.05), (3.3682, 10, 20, 0.01),
                         (1.0, 30, 30, 0.5)):
        assert intervals.f_survival(f, d1, d2) == pytest.approx(p, rel=1e-3)
    assert intervals.f_survival(0.5, 2, 2) == pytest.approx(2 / 3)  # F(2, 2): P(F > f) = 1 / (1 + f)


def test_a_parametrization_that_scatters_more_is_floored_apart_and_named(tmp_path: Path) -> None:
    """Three parametrizations with seeds; one scatters ten times the others at every width: the optima name each
    one's own scatter, the summary names every width with that parametrization and its F test, its floor is its own
    scatter and the others' their pool without it; with all three alike the summary names none and every floor is
    the pool of all three."""
    from deltamup.reports.interpretation import interpretation, scatters_unlike

    def sweep(noise_mup: float, name: str) -> analysis.Analysis:
        trials = pl.concat([surface_trials({"mup": 0.0}, seeds=3, noise=noise_mup, rng_seed=1),
                            surface_trials({"sp": 0.0}, seeds=3, noise=0.004, rng_seed=2),
                            surface_trials({"gdn-mup": 0.0}, seeds=3, noise=0.004, rng_seed=3)])
        return analysis.analyze(write_sweep(tmp_path / name, trials, surface_spec(trials)))

    unlike = sweep(0.04, "unlike")
    own = unlike.optima.filter(pl.col("parametrization") == "mup")
    assert (own["scatter_own"] > unlike.optima.filter(pl.col("parametrization") != "mup")["scatter_own"].max()).all()
    named = scatters_unlike(unlike)
    assert [int(re.match(r"@(\d+): mup/adamw ", n).group(1)) for n in named] == sorted(WIDTHS)
    assert all("p = " in n for n in named)
    assert "scatter more than the others'" in interpretation(unlike)
    for _, at in unlike.optima.group_by("width"):
        mine = at.filter(pl.col("parametrization") == "mup")
        rest = at.filter(pl.col("parametrization") != "mup")
        assert mine["scatter_floor"].to_list() == pytest.approx(mine["scatter_own"].to_list())
        pooled = math.sqrt((rest["scatter_own"] ** 2 * rest["scatter_own_dof"]).sum() / rest["scatter_own_dof"].sum())
        assert rest["scatter_floor"].to_list() == pytest.approx([pooled, pooled])
    alike = sweep(0.004, "alike")
    assert scatters_unlike(alike) == [] and "scatter more than the others'" not in interpretation(alike)
    for _, at in alike.optima.group_by("width"):
        pooled = math.sqrt((at["scatter_own"] ** 2 * at["scatter_own_dof"]).sum() / at["scatter_own_dof"].sum())
        assert at["scatter_floor"].to_list() == pytest.approx([pooled] * 3)


def test_the_f_test_steps_down_to_name_every_group_that_scatters_more() -> None:
    """One group that scatters sixteen times the quietest two, another seven times: the first named is tested
    against all three others, the second against the two quiet ones alone (the first has left the pool), each p
    Holm's (never below the one before); the noisy two floored at their own, the quiet two at theirs pooled; one
    noisy group: it alone; all alike: none."""
    two = {"a": (0.080, 4), "b": (0.030, 4), "c": (0.004, 4), "d": (0.005, 4)}
    named = intervals.scatter_unlike(two)
    assert [u.group for u in named] == ["a", "b"]
    assert named[0].rest_dof == 12 and named[1].rest_dof == 8
    assert named[1].rest_sigma == pytest.approx(math.sqrt((0.004 ** 2 + 0.005 ** 2) / 2))
    assert named[1].p >= named[0].p
    single_step = intervals.f_survival(named[0].f, 4, 12) * 4  # b stays in a's pool without the step down
    assert named[0].p == pytest.approx(single_step) and named[0].rest_sigma > 3 * named[1].rest_sigma
    assert [u.group for u in intervals.scatter_unlike({**two, "b": (0.004, 4)})] == ["a"]
    assert intervals.scatter_unlike({g: (0.004, 4) for g in "abcd"}) == []
    floors = intervals.scatter_floors({(g, "adamw", 2048): (sd ** 2 * dof, dof) for g, (sd, dof) in two.items()})
    quiet = math.sqrt((0.004 ** 2 + 0.005 ** 2) / 2)
    assert {g: round(floors[g, "adamw", 2048][0], 6) for g in two} == {
        "a": 0.08, "b": 0.03, "c": round(quiet, 6), "d": round(quiet, 6)}


def test_three_seeds_at_seed_0s_best_alone_still_give_an_interval_that_holds_the_optimum(monkeypatch) -> None:
    """400 simulated widths where seed 0 ran five LRs and seeds 1 and 2 only its best one (the 4x part's head-to-head
    cells; the bowl, offsets and scatter above): a seed draw never reaches the neighbours' scatter, so the seed
    interval adds σ/√n at the LRs fewer than 3 seeds ran. It then holds the true optimum at least nine times in ten
    (0.96 here, σ = 0.01 assumed against 0.006 simulated); without that scatter about half the time."""
    def coverage(rng: np.random.Generator) -> float:
        x, hits = np.arange(-11.0, -6.0), []
        for _ in range(400):
            x_star = rng.uniform(-9.5, -8.5)
            per_seed = (1 + 0.012 * (x - x_star) ** 2 + rng.normal(0, 0.008, (3, 1))
                        + rng.normal(0, 0.006, (3, len(x))))
            per_seed[1:, np.arange(len(x)) != np.argmin(per_seed[0])] = np.nan
            curve = intervals.seed_adjusted(per_seed, np.ones(3))[0]
            n = (~np.isnan(per_seed)).sum(0)
            best = intervals.vertices(x, curve)
            method = "seeds" if n[best.index[0]] >= 3 else "fit"
            width = intervals.Width(x, per_seed, curve, n, int(n[best.index[0]]), method)
            lo, hi = intervals.interval(intervals.replicate_optima([width], 0.01, rng, rng)[:, 0], best.x[0], method)
            lo, hi = intervals.width_interval(float(lo), float(hi), {-1: "low", 1: "high"}.get(int(best.edge[0])),
                                              width)
            hits.append(lo <= x_star <= hi)
        return float(np.mean(hits))

    with_scatter = coverage(np.random.default_rng(2))
    monkeypatch.setattr(intervals, "thin_scatter", lambda width, noise: np.zeros(len(width.x)))
    without = coverage(np.random.default_rng(2))
    assert with_scatter >= 0.9 and without < with_scatter - 0.05, (with_scatter, without)


def test_a_single_seed_interval_holds_a_known_optimum_also_where_the_noise_put_it_on_the_edge() -> None:
    """1000 simulated single-seed widths (the bowl above, the optimum inside LRs 2^-10 … 2^-7, scatter σ = the
    assumed 0.01): where the noise moved the best grid LR to an end of the grid, the interval still holds the true
    optimum at least 80% of the time (a bias-corrected percentile interval held it about a quarter of the time), and
    about nine times in ten overall."""
    rng = np.random.default_rng(1)
    x = np.arange(-10.0, -6.0)
    held: dict[bool, list[bool]] = {True: [], False: []}
    for _ in range(1000):
        x_star = rng.uniform(-9.0, -8.5)
        curve = 1 + 0.012 * (x - x_star) ** 2 + rng.normal(0, 0.01, len(x))
        width = intervals.Width(x, curve[None], curve, np.ones(len(x)), 1, "fit")
        best = intervals.vertices(x, curve)
        replicates = intervals.replicate_optima([width], 0.01, rng, rng)[:, 0]
        lo, hi = intervals.interval(replicates, best.x[0], "fit")
        lo, hi = intervals.width_interval(float(lo), float(hi), {-1: "low", 1: "high"}.get(int(best.edge[0])), width)
        held[bool(best.edge[0])].append(lo <= x_star <= hi)
    assert len(held[True]) >= 40 and np.mean(held[True]) >= 0.8, (len(held[True]), np.mean(held[True]))
    assert 0.87 <= np.mean(held[True] + held[False]) <= 0.99


def test_a_three_seed_bound_holds_an_optimum_halfway_to_its_neighbour() -> None:
    """600 simulated 3-seed widths on three LRs (2^-9 … 2^-7) around a true optimum anywhere from half an octave
    below them to half an octave above: where the best grid LR is an end of the grid, the interval (open beyond it)
    holds the optimum at least 90% of the time; closed where the replicates end instead, about 75%."""
    rng = np.random.default_rng(2)
    x = np.array([-9.0, -8.0, -7.0])
    held: dict[str, list[bool]] = {"halfway": [], "replicates' end": []}
    for _ in range(600):
        x_star = rng.uniform(-9.5, -6.5)
        per_seed = 1 + 0.012 * (x - x_star) ** 2 + rng.normal(0, 0.008, (3, 1)) + rng.normal(0, 0.004, (3, len(x)))
        width = intervals.Width(x, per_seed, per_seed.mean(0), np.full(len(x), 3), 3, "seeds")
        best = intervals.vertices(x, width.curve)
        edge = {-1: "low", 1: "high"}.get(int(best.edge[0]))
        if edge is None:
            continue
        replicates = intervals.replicate_optima([width], 0.01, rng, rng)[:, 0]
        lo, hi = (float(v) for v in intervals.interval(replicates, best.x[0], "seeds"))
        for rule, (a, b) in (("halfway", intervals.width_interval(lo, hi, edge, width)),
                             ("replicates' end", intervals.open_bounds(lo, hi, [1.0], [edge]))):
            held[rule].append(a <= x_star <= b)
    assert len(held["halfway"]) > 200 and np.mean(held["halfway"]) >= 0.9 > np.mean(held["replicates' end"]) + 0.05, \
        {k: (len(v), np.mean(v)) for k, v in held.items()}


def test_intervals_shrink_when_seeds_are_added() -> None:
    def widths(seeds: int) -> tuple[float, float]:
        e = analysis.estimate(surface_trials({"flat": 0.0}, seeds, noise=0.01, rng_seed=1))
        per_width = np.median([hi - lo for lo, hi in map(log2_interval, e.optima.iter_rows(named=True))])
        t = e.transfer.row(0, named=True)
        return per_width, t["slope_hi"] - t["slope_lo"]

    few, more, many = widths(3), widths(6), widths(12)
    assert few[0] > more[0] > many[0] and few[1] > more[1] > many[1]


def test_a_drifting_optimum_drifts_with_seeds_and_one_seed_only_suggests_it() -> None:
    t = analysis.estimate(surface_trials({"sp": -1.0}, 4, noise=0.01)).transfer.row(0, named=True)
    assert t["verdict"] == "drifts" and t["slope_hi"] < -0.75 and t["interval_method"] == "seeds"
    one = analysis.estimate(surface_trials({"sp": -1.0}, 1, noise=0.01)).transfer.row(0, named=True)
    assert one["verdict"] == "undetermined" and one["slope_hi"] < -0.75 and one["interval_method"] == "fit"
    assert one["verdict_note"] == ("one seed at some width (a verdict needs ≥ 3): the interval is fit-based, "
                                   "σ = 0.01 nats assumed; it suggests a drift")


def test_a_flat_optimum_transfers_only_with_enough_seeds() -> None:
    """Many seeds: transfers. One seed: the interval is fit-based, so the verdict stays undetermined however narrow
    the interval; two seeds: the same (a bootstrap over two seeds is too narrow to trust)."""
    many = analysis.estimate(surface_trials({"mup": 0.0}, 8, noise=0.01)).transfer.row(0, named=True)
    assert many["verdict"] == "transfers" and -0.25 <= many["slope_lo"] <= many["slope_hi"] <= 0.25
    for seeds in (1, 2):
        t = analysis.estimate(surface_trials({"mup": 0.0}, seeds, noise=0.01)).transfer.row(0, named=True)
        assert t["verdict"] == "undetermined" and t["interval_method"] == "fit"
        assert "the interval is fit-based" in t["verdict_note"] and f"a verdict needs ≥ {intervals.MIN_SEEDS}" in \
            t["verdict_note"]
    noisy = analysis.estimate(surface_trials({"mup": 0.0}, 1, noise=0.08)).transfer.row(0, named=True)
    assert noisy["verdict"] == "undetermined" and noisy["slope_hi"] - noisy["slope_lo"] > 0.5


def test_where_the_fit_noise_comes_from() -> None:
    exact = analysis.estimate(surface_trials({"mup": 0.0}, 1, noise=0.0)).optima.row(0, named=True)
    assert (exact["fit_noise"], exact["fit_noise_from"]) == (intervals.NOISE_FLOOR, "floor")
    rough = analysis.estimate(surface_trials({"mup": 0.0}, 1, noise=0.05)).optima.row(0, named=True)
    assert rough["fit_noise_from"] == "residual" and 0.02 < rough["fit_noise"] < 0.1
    two = analysis.estimate(surface_trials({"mup": 0.0}, 2, noise=0.05, seed_offset=0.0)).optima.row(0, named=True)
    assert two["fit_noise_from"] == "seeds" and 0.02 < two["fit_noise"] < 0.1


def test_a_bound_opens_the_side_it_could_push() -> None:
    """A linear statistic Σ c·x of optima: a 'low' bound may lie lower still, a 'high' one higher."""
    weights = [-0.3, -0.1, 0.1, 0.3]  # the slope's, over four widths
    assert intervals.open_bounds(-1.2, -0.8, weights, [None, None, None, "low"]) == (-math.inf, -0.8)
    assert intervals.open_bounds(-1.2, -0.8, weights, [None, None, None, "high"]) == (-1.2, math.inf)
    assert intervals.open_bounds(-1.2, -0.8, weights, ["high", None, None, None]) == (-math.inf, -0.8)
    assert intervals.open_bounds(-1.2, -0.8, weights, ["high", None, None, "high"]) == (-math.inf, math.inf)
    assert intervals.open_bounds(-1.2, -0.8, [0.0, 1.0], ["low", None]) == (-1.2, -0.8)  # no weight: no push
    assert intervals.open_bounds(0.1, 0.3, [1.0, -1.0], [None, "low"]) == (0.1, math.inf)  # a horizon shift


def test_a_bound_keeps_only_a_drift_it_cannot_undo() -> None:
    x = np.log2(np.array(WIDTHS, float))
    call, note = verdict.verdict(-math.inf, -0.8, 3, "seeds", x, [None, None, None, "low"])
    assert call == "drifts" and "open beyond the bounds at 2048 (low edge)" in note
    call, note = verdict.verdict(-1.2, math.inf, 3, "seeds", x, [None, None, None, "high"])
    assert call == "undetermined" and "includes 0 (open beyond the bounds at 2048 (high edge))" in note
    call, note = verdict.verdict(-0.1, 0.1, 3, "seeds", x[:3], [None, "low", None])  # 512: the middle, no weight
    assert call == "undetermined" and "optimum on the LR grid's edge at 512 (low edge)" in note
    assert verdict.verdict(-0.1, 0.1, 3, "seeds", x, [None] * 4)[0] == "transfers"
    assert verdict.verdict(None, None, 3, "seeds", x[:1], [None])[0] == "undetermined"


def test_bounds_on_both_sides_leave_the_slope_open_on_one() -> None:
    """Two widths whose optima sit on opposite edges of one two-LR grid (the narrow one high, the wide one low), 3
    seeds: each width's interval is open beyond its bound and closed halfway to the other LR (every replicate sits on
    the bound), the slope is at most its point value and unbounded below, the spread unbounded above, and the drift
    stands (no bound could undo it)."""
    trials = pl.DataFrame([dict(trial_id=f"{w}-{e}-{s}", parametrization="mup", optimizer="adamw", width=w,
                                lr=2.0 ** e, seed=s, status="ok", diverged=False,
                                smoothed_loss=(1.0 if (w == 256) == (e == -8) else 1.1) + 0.001 * s)
                           for w in (256, 1024) for e in (-9, -8) for s in range(3)])
    est = analysis.estimate(trials)
    narrow, wide = (row(est.optima, width=w) for w in (256, 1024))
    assert (narrow["edge"], narrow["best_lr_lo"], narrow["best_lr_hi"]) == ("high", 2.0 ** -8.5, math.inf)
    assert (wide["edge"], wide["best_lr_lo"], wide["best_lr_hi"]) == ("low", 0.0, 2.0 ** -8.5)
    t = est.transfer.row(0, named=True)
    assert (t["slope"], t["slope_lo"], t["slope_hi"]) == (-0.5, -math.inf, -0.5)
    assert (t["spread_lo"], t["spread_hi"]) == (0.0, math.inf) and t["verdict"] == "drifts"


def test_classify() -> None:
    assert verdict.classify(-0.2, 0.2) == "inside"
    assert verdict.classify(0.1, 0.4) == "excludes_zero"
    assert verdict.classify(-0.4, 0.1) == "unclear"
    assert verdict.classify(None, 0.1) == "unclear" and verdict.classify(float("nan"), 0.1) == "unclear"


def test_student_t_and_the_small_sample_factor() -> None:
    assert intervals.student_t(2) == pytest.approx(2.920, rel=0.015)
    assert intervals.student_t(7) == pytest.approx(1.895, rel=0.002)
    assert intervals.small_sample_factor(3) > intervals.small_sample_factor(8) > 1.0


def test_the_spread_interval_holds_the_spread() -> None:
    t = analysis.estimate(surface_trials({"mup": 0.0, "sp": -1.0}, 1, noise=0.01)).transfer
    for r in t.iter_rows(named=True):
        assert 0 <= r["spread_lo"] <= r["spread_octaves"] <= r["spread_hi"]
    assert row(t, parametrization="sp")["spread_lo"] > 2  # 3 octaves of width at −1: about 3 octaves of optimum


def test_every_complete_metric_gets_a_verdict(tmp_path: Path) -> None:
    """The headline metric first; a metric whose optimum drifts where val_loss's does not disagrees in its row."""
    trials = surface_trials({"mup": 0.0}, 4, noise=0.01)
    drift = (0.05 * (np.log2(trials["lr"].to_numpy()) - X0 + np.log2(trials["width"].to_numpy() / 256)) ** 2
             - 0.05 * (np.log2(trials["lr"].to_numpy()) - X0) ** 2)
    trials = trials.with_columns(pl.col("final_train_loss") + drift)
    a = analysis.analyze(write_sweep(tmp_path / "sweep", trials, surface_spec(trials)))
    assert a.metric == "val_loss" and a.verdicts["metric"].to_list() == ["val_loss", "smoothed_loss",
                                                                         "final_train_loss"]
    by_metric = dict(zip(a.verdicts["metric"], a.verdicts["verdict"]))
    assert by_metric == {"val_loss": "transfers", "smoothed_loss": "transfers", "final_train_loss": "drifts"}
    assert a.transfer["metric"].to_list() == ["val_loss"] and a.transfer["steps"].to_list() == [50]
    assert a.transfer["tokens_per_trial"].to_list() == [50 * 8 * 64] and a.transfer["depth"].to_list() == [2]


def test_horizon_table_says_where_the_optimum_still_moves(tmp_path: Path) -> None:
    """val_loss_h25's optimum sits 1.5 octaves above the final one, val_loss_h50's 0.02: moving from 25% to 50%,
    settled from 50% to 100%."""
    trials = surface_trials({"mup": 0.0}, 4, noise=0.002, horizon_shift={25: 1.5, 50: 0.02})
    a = analysis.analyze(write_sweep(tmp_path / "sweep", trials, surface_spec(trials)))
    assert analysis.horizons(trials) == [(25, "val_loss_h25"), (50, "val_loss_h50"), (100, "val_loss")]
    h = a.horizon
    assert len(h) == 3 * len(WIDTHS) and h["horizon"].unique().sort().to_list() == [25, 50, 100]
    first = h.filter(pl.col("horizon") == 25)
    assert first["shift_octaves"].is_null().all() and first["still_moving"].is_null().all()
    mid, last = h.filter(pl.col("horizon") == 50), h.filter(pl.col("horizon") == 100)
    assert (mid["still_moving"] == "moving").all() and mid["shift_octaves"].to_numpy() == pytest.approx(-1.48, abs=0.2)
    assert (last["still_moving"] == "settled").all()
    assert set(a.verdicts["metric"]) == {"val_loss", "smoothed_loss", "final_train_loss", "val_loss_h25",
                                         "val_loss_h50"}
    written = analysis.write_tables(a, tmp_path / "out")
    assert tmp_path / "out" / "horizon.csv" in written
    text = summary_markdown(a)
    rows = [line for w in WIDTHS for line in text.splitlines() if line.startswith(f"| mup | adamw | {w} | ")]
    assert len(rows) == len(WIDTHS) and all(row.endswith(": settled |") for row in rows)  # the horizon table


def test_groups_that_record_every_horizon_get_their_table_when_older_ones_do_not(tmp_path: Path) -> None:
    """A sweep that began recording horizons part-way: the widest width's trials have none (written before). The
    other widths still get their horizon rows, estimated on their own, and those say what the full table says."""
    trials = surface_trials({"mup": 0.0}, 4, noise=0.002, horizon_shift={25: 1.5, 50: 0.02})
    older = pl.col("width") == max(WIDTHS)
    partial = trials.with_columns(*(pl.when(older).then(None).otherwise(pl.col(c)).alias(c)
                                    for c in ("val_loss_h25", "val_loss_h50")))
    assert analysis.horizons(partial) == []  # not complete over the whole sweep
    subset, steps = analysis.horizon_trials(partial)
    assert steps == [(25, "val_loss_h25"), (50, "val_loss_h50"), (100, "val_loss")]
    assert sorted(subset["width"].unique().to_list()) == sorted(WIDTHS)[:-1]
    a = analysis.analyze(write_sweep(tmp_path / "sweep", partial, surface_spec(partial)))
    h = a.horizon
    assert sorted(h["width"].unique().to_list()) == sorted(WIDTHS)[:-1] and len(h) == 3 * (len(WIDTHS) - 1)
    assert (h.filter(pl.col("horizon") == 50)["still_moving"] == "moving").all()
    assert (h.filter(pl.col("horizon") == 100)["still_moving"] == "settled").all()
    assert set(a.verdicts["metric"]) == {"val_loss", "smoothed_loss", "final_train_loss"}  # no verdict per horizon
    assert a.optima.height == len(WIDTHS)  # the optima and verdicts still use every trial


def test_searched_hparams_are_a_table_of_their_own_not_points_of_the_lr_curves(tmp_path: Path) -> None:
    """Optuna trials that sampled hparams (optuna.hparams) join neither the LR curves nor the verdicts; the search
    table shows each group's best trial, which may be one of them, beside the grid's best."""
    grid = surface_trials({"mup": 0.0}, 3, noise=0.002).with_columns(pl.lit("grid").alias("phase"),
                                                                     pl.lit("").alias("hparams"))
    best_grid = grid.filter(pl.col("width") == 256).sort("val_loss").row(0, named=True)
    searched = pl.DataFrame([{**best_grid, "trial_id": f"optuna-{i}", "phase": "optuna", "hparams": hp,
                              "lr": best_grid["lr"] * 1.1, "val_loss": best_grid["val_loss"] + delta}
                             for i, (hp, delta) in enumerate([("output_mult=2", -0.05), ("output_mult=0.5", 0.3)])],
                            schema=grid.schema)
    alone = analysis.analyze(write_sweep(tmp_path / "grid", grid, surface_spec(grid)))
    both = analysis.analyze(write_sweep(tmp_path / "both", pl.concat([grid, searched]), surface_spec(grid)))
    assert both.optima.equals(alone.optima) and both.transfer.equals(alone.transfer)  # the LR analysis: the grid's
    assert alone.search.is_empty()  # no Optuna phase, no search table
    row = both.search.filter(pl.col("width") == 256).row(0, named=True)
    assert row["searched"] == 2 and row["best_trial"] == "optuna-0" and row["best_hparams"] == "output_mult=2"
    assert row["gain"] == pytest.approx(0.05) and row["grid_best_val_loss"] == pytest.approx(best_grid["val_loss"])
    other = both.search.filter(pl.col("width") != 256)
    assert (other["searched"] == 0).all() and (other["best_hparams"] == "").all() and (other["gain"] == 0).all()
    assert "| mup | adamw | 256 | 2 | " in summary_markdown(both) and "output_mult=2" in summary_markdown(both)
    export = export_from_sweep(both, "mup", "adamw", 1024, tuned_width=256, from_search=True)
    assert export.hparams == {"output_mult": 2.0} and export.lr == pytest.approx(best_grid["lr"] * 1.1)
    with pytest.raises(ValueError, match="no Optuna search of mup/adamw at width 256"):
        export_from_sweep(alone, "mup", "adamw", 1024, tuned_width=256, from_search=True)


def test_a_trial_that_diverges_late_still_counts_at_an_early_horizon() -> None:
    trials = surface_trials({"mup": 0.0}, 1, noise=0.0, horizon_shift={50: 0.0})
    late = (pl.col("width") == 256) & (pl.col("lr") == 2.0 ** -7)
    trials = trials.with_columns(pl.when(late).then(True).otherwise(pl.col("diverged")).alias("diverged"),
                                 pl.when(late).then(float("inf")).otherwise(pl.col("val_loss")).alias("val_loss"))
    early = row(analysis.lr_curves(trials, "val_loss_h50"), width=256, lr=2.0 ** -7)
    final = row(analysis.lr_curves(trials, "val_loss"), width=256, lr=2.0 ** -7)
    assert math.isfinite(early["loss"]) and math.isinf(final["loss"]) and final["n_diverged"] == 1


def test_replicates_are_the_same_every_time() -> None:
    trials = surface_trials({"mup": 0.0}, 3, noise=0.01)
    assert analysis.estimate(trials).optima.equals(analysis.estimate(trials).optima)


FIXTURE = Path(__file__).parent / "fixtures" / "cpu-3seeds"  # the quick-start's sweep, run on CPU with 3 seeds


def test_a_committed_multi_seed_sweep_has_the_columns(tmp_path: Path) -> None:
    a = analysis.analyze(FIXTURE)
    analysis.write_tables(a, tmp_path)
    optima, transfer = pl.read_csv(tmp_path / "optima.csv"), pl.read_csv(tmp_path / "transfer.csv")
    assert {"best_lr", "best_lr_lo", "best_lr_hi", "interval_method", "best_lr_grid", "metric"} <= set(optima.columns)
    assert {"slope", "slope_lo", "slope_hi", "spread_octaves", "spread_lo", "spread_hi", "n_seeds", "verdict",
            "metric", "steps", "tokens_per_trial", "depth"} <= set(transfer.columns)
    assert len(optima) == 6 and (optima["interval_method"] == "seeds").all() and (transfer["n_seeds"] == 3).all()
    assert ((optima["best_lr_lo"] <= optima["best_lr"]) & (optima["best_lr"] <= optima["best_lr_hi"])).all()
    assert dict(zip(transfer["parametrization"], transfer["verdict"])) == {"sp": "drifts", "gdn-mup": "undetermined"}
    sp = row(transfer, parametrization="sp")
    assert sp["slope_lo"] <= sp["slope"] <= sp["slope_hi"] < -0.25 and sp["spread_lo"] <= sp["spread_octaves"]
    assert (sp["steps"], sp["tokens_per_trial"], sp["depth"]) == (60, 60 * 8 * 64, 2)


def test_on_the_committed_sweep_intervals_close_as_seeds_are_added() -> None:
    """Fewer optima stay open (a bound, or a fit interval that reaches an end of the grid) as seeds are added."""
    trials = analysis.load_sweep(FIXTURE).trials

    def open_ends(seeds: list[int]) -> int:
        o = analysis.estimate(trials.filter(pl.col("seed").is_in(seeds))).optima
        return int((o["best_lr_lo"] == 0).sum() + o["best_lr_hi"].is_infinite().sum())

    assert open_ends([0]) > open_ends([0, 1]) > open_ends([0, 1, 2])


def test_on_the_committed_sweep_one_seed_is_never_a_verdict() -> None:
    """One seed gives no confident verdict, only what its interval suggests. Seed 2 alone puts GDN-µP's width-128
    optimum on the grid's high edge and its width-64 replicates at the grid's top end, so its slope interval is
    open above and holds 0, as the three seeds' does (a bias-corrected interval of the same replicates lay wholly
    above 0: a drift the three seeds do not support)."""
    trials = analysis.load_sweep(FIXTURE).trials
    for seed in (0, 1, 2):
        t = analysis.estimate(trials.filter(pl.col("seed") == seed)).transfer
        assert set(t["verdict"]) == {"undetermined"} and (t["interval_method"] == "fit").all()
    alone = row(analysis.estimate(trials.filter(pl.col("seed") == 2)).transfer, parametrization="gdn-mup")
    assert alone["slope_lo"] < 0 < alone["slope"] and alone["slope_hi"] == math.inf
    three = row(analysis.estimate(trials).transfer, parametrization="gdn-mup")
    assert three["verdict"] == "undetermined" and three["slope_lo"] < 0 < three["slope_hi"]


def test_a_flat_single_seed_curve_leaves_its_optimum_open() -> None:
    """One seed, three LRs whose losses differ by a third of the assumed noise (the 8-layer study's GDN-µP at width
    1024, 4× the steps): the best LR is the grid's low edge, and a third of the replicates put it at the high edge,
    so the interval spans the grid and is open on both sides; the slope over that width and one with a clear
    optimum is open on both sides too."""
    lrs = [2.0 ** -9, 2.0 ** -8, 2.0 ** -7]
    losses = {256: [0.8900, 0.8514, 0.8850], 1024: [0.7547, 0.7582, 0.7557]}
    trials = pl.DataFrame([dict(parametrization="gdn-mup", optimizer="adamw", width=w, lr=lr, seed=0, status="ok",
                                diverged=False, val_loss=v) for w, ys in losses.items() for lr, v in zip(lrs, ys)])
    est = analysis.estimate(trials, "val_loss")
    flat, clear = row(est.optima, width=1024), row(est.optima, width=256)
    assert flat["edge"] == "low" and (flat["best_lr_lo"], flat["best_lr_hi"]) == (0.0, math.inf)
    assert 2.0 ** -9 <= clear["best_lr_lo"] < clear["best_lr"] < clear["best_lr_hi"] <= 2.0 ** -7
    t = est.transfer.row(0, named=True)
    assert (t["slope_lo"], t["slope_hi"]) == (-math.inf, math.inf) and t["verdict"] == "undetermined"


def test_a_lucky_seed_alone_at_an_lr_does_not_move_the_optimum() -> None:
    """Three seeds at the optimum's grid LR and seed 0 alone at the others, seed 0 0.03 nats luckier than the
    seeds' mean at every LR (as the 8-layer study's 4x part ran): the plain seed mean puts the best grid LR one
    octave low, where seed 0 alone ran; the seed-adjusted mean takes seed 0's offset out and finds the optimum
    where the surface has it."""
    luck = {0: -0.03, 1: 0.015, 2: 0.015}
    trials = (surface_trials({"gdn-mup": 0.0}, seeds=3, noise=0.0, seed_offset=0.0)
              .filter((pl.col("seed") == 0) | (pl.col("lr") == 2.0 ** -7))
              .with_columns(pl.col("val_loss") + pl.col("seed").replace_strict(luck, return_dtype=pl.Float64)))
    plain = trials.group_by("width", "lr").agg(pl.col("val_loss").mean()).sort("val_loss").group_by("width").first()
    assert set(plain["lr"]) == {2.0 ** -8}  # what the plain mean would pick
    est = analysis.estimate(trials, "val_loss")
    assert est.curves["seed_adjusted"].all()
    assert not analysis.estimate(surface_trials({"gdn-mup": 0.0}, seeds=3, noise=0.0), "val_loss").curves[
        "seed_adjusted"].any()  # every seed at every LR: the plain mean
    for w in WIDTHS:
        r = row(est.optima, width=w)
        assert r["best_lr_grid"] == 2.0 ** -7 and (r["n_seeds"], r["interval_method"]) == (3, "seeds")
        assert r["fit_noise"] is not None  # the σ added at the one-seed LRs, named
        assert r["log2_best_lr"] == pytest.approx(X0, abs=1e-9)
        assert r["best_lr_lo"] < 2.0 ** X0 < r["best_lr_hi"]


def test_the_seed_adjusted_mean_is_the_least_squares_fit_of_lr_and_seed_effects() -> None:
    """On a random design with holes and draw weights it matches the constrained least-squares solution; with every
    seed at every LR it is the plain weighted mean; a drawn seed's divergence makes its LR +inf."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=(4, 6))
    y[rng.random(y.shape) < 0.4] = np.nan
    w = np.array([2.0, 1.0, 0.0, 3.0])
    cells = [(s, j) for s in range(4) for j in range(6) if not np.isnan(y[s, j]) and w[s] > 0]
    x = np.zeros((len(cells) + 1, 10))
    for k, (s, j) in enumerate(cells):
        x[k, j] = x[k, 6 + s] = math.sqrt(w[s])
    x[-1, 6:] = 1e6 * w  # Σ w·δ = 0
    b = np.array([math.sqrt(w[s]) * y[s, j] for s, j in cells] + [0.0])
    mu = np.linalg.lstsq(x, b, rcond=None)[0][:6]
    fitted = intervals.seed_adjusted(y, w)[0]
    ran = np.isfinite(mu) & (np.abs(x[:-1, :6]).sum(0) > 0)
    assert intervals.unbalanced(y)
    np.testing.assert_allclose(fitted[ran], mu[ran], atol=1e-9)
    assert np.isnan(fitted[~ran]).all()
    full = rng.normal(size=(3, 5))
    assert not intervals.unbalanced(full)
    np.testing.assert_allclose(intervals.seed_adjusted(full, [1.0, 2.0, 1.0])[0],
                               (full * [[1.0], [2.0], [1.0]]).sum(0) / 4)
    full[1, 2] = np.inf
    assert intervals.seed_adjusted(full, [1.0, 1.0, 1.0])[0][2] == np.inf
    assert np.isfinite(intervals.seed_adjusted(full, [1.0, 0.0, 1.0])[0]).all()


def test_the_sweep_summary_and_the_report_name_their_best_lr_and_metric(tmp_path: Path, capsys) -> None:
    """The running sweep's summary prints the grid argmin on the smoothed train loss as best_lr_grid; the report
    prints best_lr (fitted vertex) and best_lr_grid on its metric, each table headed by that metric."""
    from deltamup.cli import main
    from deltamup.sweeps import progress, store

    sweep = write_sweep(tmp_path / "sweep")
    for record in pl.read_parquet(sweep / "trials.parquet").filter(pl.col("width") == 256).to_dicts():
        store.write_trial(sweep, record, {c: [] for c in store.CURVE_COLUMNS})
    progress.print_summary(sweep)
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("parametrization"))
    assert "best_lr_grid (smoothed train loss)" in header and " best_lr " not in f" {header} "
    assert main(["report", str(sweep), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "optimum per width on smoothed_loss (best_lr: fitted vertex; best_lr_grid: grid argmin)" in out
    assert "transfer on smoothed_loss (slope: octaves of optimum per octave of width; 90% intervals)" in out
    assert all(pl.read_csv(tmp_path / "report" / f"{name}.csv")["metric"].unique().to_list() == ["smoothed_loss"]
               for name in ("optima", "transfer", "lr_curves"))


def test_the_8_layer_studys_naive_mup_is_floored_apart_at_width_2048() -> None:
    """On the committed 8-layer sweep naive µP's seeds at width 2048 scatter several times GDN-µP's and SP's, the F
    test names it, and it is floored at its own scatter and they at theirs pooled without it; the committed report's
    optima.csv holds those floors."""
    root = Path(__file__).resolve().parents[1] / "studies" / "gdn-adamw-8l"
    est = analysis.estimate(analysis.load_sweep(root / "sweep").trials, "val_loss")
    at = est.optima.filter((pl.col("width") == 2048) & pl.col("scatter_own_dof").is_not_null()  # cells with seeds
                           ).sort("parametrization")
    named = intervals.scatter_unlike({r["parametrization"]: (r["scatter_own"], r["scatter_own_dof"])
                                      for r in at.iter_rows(named=True)})
    assert [u.group for u in named] == ["mup"] and named[0].sigma > 4 * named[0].rest_sigma
    mup, rest = at.filter(pl.col("parametrization") == "mup"), at.filter(pl.col("parametrization") != "mup")
    assert mup["scatter_floor"][0] == pytest.approx(mup["scatter_own"][0])
    pooled = math.sqrt((rest["scatter_own"] ** 2 * rest["scatter_own_dof"]).sum() / rest["scatter_own_dof"].sum())
    assert rest["scatter_floor"].to_list() == pytest.approx([pooled] * len(rest))
    committed = pl.read_csv(root / "report" / "optima.csv").filter(
        (pl.col("metric") == "val_loss") & (pl.col("width") == 2048)
        & pl.col("parametrization").is_in(at["parametrization"].to_list())).sort("parametrization")
    assert committed["scatter_floor"].to_list() == pytest.approx(at["scatter_floor"].to_list())


def test_the_seeds_a_verdict_needs_follow_the_simulated_narrowing() -> None:
    """interpretation.narrowing reproduces how the report's slope intervals narrowed from 3 seeds to 5 and 8 on the
    committed simulated sweeps (studies/interval-coverage/power.md: three widths, an octave grid, each noise level)
    within 0.05; seeds_for_a_verdict names the fewest seeds whose narrowed interval fits the nearer verdict, and says
    when none up to MAX_SEEDS would."""
    from deltamup.reports import interpretation

    power = Path(__file__).resolve().parents[1] / "studies" / "interval-coverage" / "power.md"
    widths: dict[tuple[str, int], float] = {}
    for line in power.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| 256, 1024, 2048 | 4 LRs, 1 octave apart |"):
            widths[(cells[3], int(cells[2]))] = float(cells[6])
    assert len(widths) == 9
    for sigma in {s for s, _ in widths}:
        for n in (5, 8):
            assert widths[(sigma, n)] / widths[(sigma, 3)] == pytest.approx(interpretation.narrowing(n, 3), abs=0.05)
    text = interpretation.seeds_for_a_verdict(0.10, 0.65, 3)
    n = int(re.search(r"about (\d+) seeds for `transfers`", text).group(1))
    assert 0.65 / 2 * interpretation.narrowing(n, 3) < 0.15 <= 0.65 / 2 * interpretation.narrowing(n - 1, 3)
    assert "for `drifts`" in interpretation.seeds_for_a_verdict(0.30, 0.8, 3)
    assert interpretation.seeds_for_a_verdict(0.0, 50.0, 3).startswith("more than")
