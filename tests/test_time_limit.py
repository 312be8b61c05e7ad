"""A sweep's time limit (sweeps/time_limit.py): trials that the finished trials of their width say would end past it
do not start and stay missing for --resume; a run none of whose trials fits starts no Ray. Real sweeps on the shared
Ray cluster of tests/conftest.py with tiny models (tests/test_sweeps.py's TINY)."""
from __future__ import annotations

import dataclasses
import time

import pytest
from test_sweeps import tiny_spec

from deltamup.cli import main
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.runner import run_sweep
from deltamup.sweeps.time_limit import expected_seconds, starts_in_time
from deltamup.sweeps.trial import trial_config

FIRST = {"widths": [32], "parametrizations": ["gdn-mup"], "lrs": [1e-3], "seeds": [0]}


def test_a_trial_starts_only_where_its_widths_finished_trials_say_it_ends_in_time(cluster, tmp_path, capsys):
    out = tmp_path / "sweep"
    run_sweep(specs.load(tiny_spec(tmp_path, **FIRST)), out, progress_every=60)
    (done,) = store.read_trials(out)
    wall = done.wall_seconds
    assert wall > 0.5
    # seed 1 at width 32 is timed by seed 0's trial; width 64 has no finished trial, so nothing says it cannot end
    spec = specs.load(tiny_spec(tmp_path, **FIRST | {"widths": [32, 64], "seeds": [0, 1],
                                                     "only": [{"widths": [32]}, {"widths": [64], "seeds": [0]}]}))
    late, new = spec.grid()[1], spec.grid()[2]
    assert (late.width, late.seed, new.width, new.seed) == (32, 1, 64, 0)
    assert expected_seconds(store.read_trials(out), trial_config(spec, late, out, run=2)) == wall
    assert expected_seconds(store.read_trials(out), trial_config(spec, new, out, run=2)) is None
    now, records = time.time(), store.read_trials(out)
    assert not starts_in_time(trial_config(spec, late, out, run=2), now + 0.9 * wall, records, now=now)
    assert starts_in_time(trial_config(spec, late, out, run=2), now + wall, records, now=now)
    # another run gives the trial half a GPU where the timed one had a whole: up to twice as long; a run at its
    # own share times it alone (a record without a share, or at a smaller one, is not stretched)
    assert done.gpu_share is None  # no GPU share in this sweep
    cfg, alone = trial_config(spec, late, out, run=2), dataclasses.replace(done, gpu_share=1.0)
    assert expected_seconds([alone], cfg, share=0.5) == pytest.approx(2 * wall)
    assert expected_seconds([alone], cfg, share=1.0) == expected_seconds([done], cfg, share=0.5) == wall
    packed = dataclasses.replace(done, gpu_share=0.5, run=0, wall_seconds=3 * wall)
    assert expected_seconds([alone, packed], cfg, share=0.5) == 3 * wall
    assert not starts_in_time(cfg, now + 1.5 * wall, [alone], now=now, share=0.5)

    line = run_sweep(spec, out, resume=True, progress_every=60, deadline=time.time() + 0.5 * wall)
    assert line["launched"] == 2 and line["not_started"] == 1
    assert store.finished_ids(out) == {done.trial_id, new.key}  # the late trial wrote nothing: a resume runs it
    said = capsys.readouterr().out
    assert "1 of them kept from starting by the time limit" in said
    assert "width    32: 1/1 done" in said and "1 not started (time limit)" in said  # the progress view's count
    waited = []  # the work beside Ray's start (the CLI's kernel check) starts once a trial is to run, and is waited on
    line = run_sweep(spec, out, resume=True, progress_every=60,
                     beside_start=lambda: waited.append("started") or (lambda: waited.append("waited")))
    assert line["launched"] == 1 and "not_started" not in line and late.key in store.finished_ids(out)
    assert waited == ["started", "waited"]


def test_a_run_none_of_whose_trials_fits_starts_no_ray_and_writes_no_trial(cluster, tmp_path, capsys):
    out = tmp_path / "sweep"
    run_sweep(specs.load(tiny_spec(tmp_path, **FIRST)), out, progress_every=60)
    before = {p.name for p in store.results_dir(out).iterdir()}
    spec_path = tiny_spec(tmp_path, **FIRST | {"seeds": [0, 1, 2]})
    assert main(["sweep", str(spec_path), "--out", str(out), "--resume", "--time-limit", "0.01"]) == 0
    said = capsys.readouterr().out
    assert "none of the 2 trial(s) left ends in the 0 s left" in said and "nothing started" in said
    run = store.read_runs(out)[-1]
    assert run["launched"] == 0 and run["not_started"] == 2
    assert not any("ray_head" in r for r in store.read_runs(out) if r["run"] == run["run"])  # Ray never started
    assert {p.name for p in store.results_dir(out).iterdir()} == before
    started = []  # nor the work beside Ray's start (the CLI's kernel check): it would only delay the next command
    line = run_sweep(specs.load(spec_path), out, resume=True, progress_every=60, deadline=time.time() + 0.01,
                     beside_start=lambda: started.append(1) or (lambda: None))
    assert line["launched"] == 0 and started == []


@pytest.mark.parametrize("limit", ["0", "-5", "nan"])
def test_a_time_limit_that_is_not_a_positive_number_is_refused_in_one_line(tmp_path, capsys, limit):
    out = tmp_path / "sweep"
    assert main(["sweep", str(tiny_spec(tmp_path, **FIRST)), "--out", str(out), "--time-limit", limit]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--time-limit must be a positive number of seconds" in err[0]
    assert not out.exists()


def test_an_optuna_sweep_refuses_a_time_limit_before_it_starts(tmp_path, capsys):
    spec_path = tiny_spec(tmp_path, **FIRST | {"search": "optuna", "optuna": {"trials": 6}})
    assert main(["sweep", str(spec_path), "--out", str(tmp_path / "sweep"), "--time-limit", "60"]) == 2
    assert "a time limit needs search: grid or refine" in capsys.readouterr().err
    assert not (tmp_path / "sweep").exists()
