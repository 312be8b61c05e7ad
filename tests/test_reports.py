"""The report of a synthetic sweep (tests/test_analysis.py's): files, HTML content, and the page in headless
Chromium."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import numpy as np
import polars as pl
import pytest
from test_analysis import MISSING, WIDTHS, surface_spec, surface_trials, synthetic_trials, write_sweep

from deltamup.models import ModelConfig
from deltamup.reports.report import Report, build_report
from deltamup.scaling.coord_check import CoordCheck, fit_slopes, write

CHROMIUM = shutil.which("chromium")
FIGURES = ["loss_vs_lr", "shifted_loss", "optimum_vs_width", "coord_check_0"]


def write_coord_check(path: Path) -> Path:
    """A coord-check directory as `deltamup coord-check` writes it: probe sizes ∝ width^exponent, slopes fitted by
    scaling.coord_check.fit_slopes (block1.q grows with width at t = 0, off its expected −0.5)."""
    path.mkdir(parents=True)
    exponents = {"block0.q": -0.5, "block1.q": 0.3, "logits": -0.5, "block0.mixer_out": 0.0}
    rows = [dict(width=w, step=s, probe=p, rms=0.1 * w ** e, l1=0.08 * w ** e, delta_rms=None if s == 0 else 0.01)
            for w in (64, 128, 256) for s in (0, 1, 2) for p, e in exponents.items()]
    coords = pl.DataFrame(rows, schema_overrides={"delta_rms": pl.Float64})
    check = CoordCheck(ModelConfig(depth=2), "gdn-mup", "adamw", (64, 128, 256), steps=2)
    write(check, coords, fit_slopes(coords, "gdn-mup", "adamw", "gdn"), path)
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    sweep = write_sweep(tmp_path_factory.mktemp("report") / "gdn-study" / "sweep")  # a study's layout
    write_coord_check(sweep / "coord-check")
    return build_report(sweep)


def test_report_writes_tables_and_figures(report: Report) -> None:
    names = {p.name for p in report.files}
    for name in FIGURES:
        assert {f"{name}.png", f"{name}.svg"} <= names
        assert (report.out / f"{name}.png").stat().st_size > 10_000
        assert (report.out / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    assert {"optima.csv", "transfer.csv", "missing.csv", "index.html"} <= names
    assert report.out == report.analysis.sweep.path / "report"


def test_page_is_self_contained_and_says_what_is_missing(report: Report) -> None:
    page = report.page.read_text()
    assert "<title>deltamup report — gdn-study</title>" in page  # studies/<name>/sweep is named after its study
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing from the network
    assert len(re.findall(r'<img src="data:image/png;base64,', page)) == len(FIGURES)
    assert f"1 of {report.analysis.grid_size} grid trials have no result" in page
    assert f"<td>{MISSING['width']}</td>" in page and "CUDA out of memory" in page  # missing and failed trials
    assert "sp/adamw @2048 (low)" in page  # the bound
    # the heading names the run (check.json), not the folder; block1.q is off, and no deviation documents it
    assert "Coordinate check: gdn depth 2 · gdn-mup · adamw · widths 64–256 · 2 steps · lr 0.01" in page
    assert '<tr class="bad">' in page and "0 documented deviations (scaling/deviations.py" in page
    assert "parametrizations:\n- mup\n- sp" in page  # the spec


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp / 'profile'}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_page_renders_in_headless_chromium_with_every_image_loaded(report: Report, tmp_path: Path) -> None:
    # The page has no scripts; a copy gets one that records, after load, each image's decoded size in the DOM.
    probe = tmp_path / "probe.html"
    probe.write_text(report.page.read_text().replace("</body>", """<script>
window.addEventListener("load", () => { for (const img of document.images)
  img.setAttribute("data-natural", img.naturalWidth + "x" + img.naturalHeight); });</script></body>"""))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri(), tmp=tmp_path).stdout
    sizes = re.findall(r'data-natural="(\d+)x(\d+)"', dom)
    assert len(sizes) == len(FIGURES)
    assert all(int(w) > 300 and int(h) > 200 for w, h in sizes)
    shot = tmp_path / "shot.png"
    chromium("--window-size=1280,1600", f"--screenshot={shot}", report.page.as_uri(), tmp=tmp_path)
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (1600, 1280)
    assert (pixels.std(axis=(0, 1)) > 0.05).all()  # drawn: text, tables and figures, not a blank page
    assert np.mean(np.abs(pixels - pixels.mean(axis=(0, 1))).sum(-1) > 0.3) > 0.01


def test_figures_are_the_same_bytes_each_time(tmp_path: Path) -> None:
    """Regenerating a committed report changes no figure whose data did not change (no dates, fixed SVG ids)."""
    import matplotlib.pyplot as plt

    from deltamup.reports import plots

    for run in ("first", "second"):
        fig, ax = plt.subplots()
        ax.plot([1, 2, 3], [3, 1, 2], marker="*")
        plots.save(fig, tmp_path / run, "figure")
    for name in ("figure.svg", "figure.png"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


def test_the_budget_gives_tokens_per_parameter_where_trials_record_params(tmp_path: Path) -> None:
    """With each trial's parameter count recorded, the verdict's budget says how many tokens a parameter saw at the
    narrowest and widest widths (25,600 tokens a trial over width² parameters); without it, nothing is made up."""
    from deltamup.reports import analysis
    from deltamup.reports.interpretation import budget_text

    trials = surface_trials({"sp": -1.0}, 3, noise=0.01)
    plain = budget_text(analysis.analyze(write_sweep(tmp_path / "plain", trials, surface_spec(trials))))
    assert plain == "50 steps, 0.0256M tokens per trial, depth 2, widths 256–2048"
    counted = trials.with_columns((pl.col("width") ** 2).alias("params"))
    text = budget_text(analysis.analyze(write_sweep(tmp_path / "counted", counted, surface_spec(counted))))
    assert text == plain + f", {25600 / 256 ** 2:.2g} → {25600 / 2048 ** 2:.2g} tokens per parameter"


def test_summary_is_the_headline_table(report: Report) -> None:
    """summary.md: the generated paragraph, then one row per parametrization with its verdict and intervals, widths
    as columns (best LR and its interval), bounds marked, wider-is-better flags."""
    text = (report.out / "summary.md").read_text()
    assert text.startswith("Verdict on smoothed_loss, 90% intervals (50 steps, 0.0256M tokens per trial, depth 2, "
                           "widths 256–2048): mup/adamw transfers: slope +0.00 [+0.00, +0.00]")
    assert "sp/adamw drifts" in text and "What would change it: a wider LR grid where the optimum is on its edge: " \
        "sp/adamw @2048 (low)" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    header = rows["parametrization"].split(" | ")
    assert header[2:6] == ["verdict", "slope [90%]", "spread (octaves) [90%]", "seeds"]
    assert header[6:10] == ["best_lr @256", "best_lr @512", "best_lr @1024", "best_lr @2048"]
    mup, sp = rows["mup"].split(" | "), rows["sp"].split(" | ")
    assert mup[2:6] == ["**transfers**", "+0.00 [+0.00, +0.00]", "0.00 [0.00, 0.00]", "3 (seeds)"]
    assert mup[6:10] == ["0.0063 [0.0063, 0.0063]"] * 4  # 2^-7.3 at every width; seed offsets do not move it
    assert sp[2] == "**drifts**" and sp[9].startswith("≤ 0.00024")  # the bound at 2048 (2^-12)
    assert sp[-2:] == ["yes", "**no** |"]  # SP's LR does not carry
    assert "1 of the grid's 216 trials have no result yet" in text and "Metric: smoothed_loss." in text


def test_report_of_a_sweep_with_horizons_and_metrics_that_disagree(tmp_path: Path) -> None:
    """Trials that record val_loss at 25/50/100% of the steps, whose final_train_loss optimum drifts: the page has the
    horizon section and figure, and lists the disagreeing metric."""
    trials = surface_trials({"gdn-mup": 0.0}, 3, noise=0.005, horizon_shift={25: 1.5, 50: 0.4})
    x = np.log2(trials["lr"].to_numpy())
    tilt = 0.05 * (x + 7.3 + np.log2(trials["width"].to_numpy() / 256)) ** 2 - 0.05 * (x + 7.3) ** 2
    trials = trials.with_columns(pl.col("final_train_loss") + tilt)
    report = build_report(write_sweep(tmp_path / "sweep", trials, surface_spec(trials)))
    page = report.page.read_text()
    assert "optimum_vs_horizon.png" in {p.name for p in report.files}
    assert "<h2>Horizon</h2>" in page and '<tr class="moving">' in page
    assert "<h2>Verdict under the other metrics</h2>" in page and '<tr class="disagrees">' in page
    assert page.index("<h2>Verdict</h2>") < page.index("<h2>Status</h2>")
    assert "under final_train_loss, gdn-mup/adamw drifts" in page
    assert "a longer budget: the optimum still moves with the horizon at gdn-mup/adamw at widths 256, 512, 1024, " \
           "2048" in page
    assert (report.out / "horizon.csv").is_file() and (report.out / "verdicts.csv").is_file()


def test_error_bars_stop_where_a_bound_leaves_the_interval_open() -> None:
    from deltamup.reports import plots

    bars = plots.lr_bars([2.0, 2.0, 2.0], [1.0, 0.0, 1.5], [4.0, 3.0, float("inf")])
    assert bars.tolist() == [[1.0, 0.0, 0.5], [2.0, 1.0, 0.0]]  # below, above; none toward 0 or inf


def test_legends_list_only_what_is_drawn(tmp_path: Path, monkeypatch) -> None:
    """No divergence, no bound, one seed: the legends name widths, the optimum and the fitted lines only."""
    import matplotlib.pyplot as plt

    from deltamup.reports import analysis, plots

    legends: dict[str, list[str]] = {}

    def keep(fig, out, name):  # the figure's legend texts instead of files
        boxes = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        legends[name] = [t.get_text() for box in boxes for t in box.get_texts()]
        plt.close(fig)
        return []

    monkeypatch.setattr(plots, "save", keep)
    trials = surface_trials({"gdn-mup": 0.0, "sp": -1.0}, 1, noise=0.0)
    plots.all_figures(analysis.analyze(write_sweep(tmp_path / "sweep", trials, surface_spec(trials))), tmp_path)
    assert legends["loss_vs_lr"] == [f"width {w}" for w in WIDTHS] + ["optimum, 90% interval"]
    assert [t.split(":")[0] for t in legends["optimum_vs_width"]] == ["gdn-mup", "sp"]
    assert "optimum_vs_horizon" not in legends
    legends.clear()
    plots.all_figures(analysis.analyze(write_sweep(tmp_path / "bounds", synthetic_trials())), tmp_path)
    assert legends["loss_vs_lr"][4:] == ["seed range (min–max)", "optimum, 90% interval",
                                         "bound (low edge of the grid)", "diverged"]
    assert "bound (grid edge)" in legends["optimum_vs_width"]


def test_a_few_blown_up_losses_do_not_flatten_the_panel() -> None:
    """The plain view keeps every loss of well-behaved curves, but cuts a 15-nat outlier (SGD at its largest LR)
    at 3× the best loss's distance to the upper quartile; the shifted view ends at the upper quartile."""
    from deltamup.reports.plots import panel_top

    tame = np.array([1.2, 1.3, 1.35, 1.4, 1.5, 1.6, 1.7])  # an AdamW panel: every point shown
    wild = np.array([1.8, 1.85, 1.9, 2.0, 2.2, 2.4, 15.6])
    assert panel_top(tame, shifted=False) == pytest.approx(1.7)
    assert panel_top(wild, shifted=False) == pytest.approx(1.8 + 3 * (np.quantile(wild, 0.75) - 1.8))
    assert panel_top(wild, shifted=False) < 4
    assert panel_top(wild, shifted=True) == pytest.approx(np.quantile(wild, 0.75))
