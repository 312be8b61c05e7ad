"""benchmarks/sweep_idle.py: a run's wall split into phases that cover it exactly once."""
from benchmarks.sweep_idle import PHASES, phase_spans
from deltamup.sweeps.record import TrialRecord


def trial(start: float, end: float, first_step: float) -> TrialRecord:
    return TrialRecord(trial_id=f"t{start}", status="ok", started_at=start, finished_at=end,
                       first_step_seconds=first_step)


def test_phases_tile_the_run_and_a_first_step_counts_only_while_no_trial_trains():
    # A trains from 15; B's first step (12–32) overlaps A's training, so only 10–15 is "first steps"; C alone at 60
    spans = phase_spans(0.0, 100.0, [trial(10, 40, 5), trial(12, 50, 20), trial(60, 90, 10)])
    assert spans == {"before trials": [(0.0, 10)], "first steps": [(10, 15), (60, 70)],
                     "training": [(15, 50), (70, 90)], "between trials": [(50, 60)], "after trials": [(90, 100.0)],
                     "runs that finished none": []}
    assert sum(b - a for ss in spans.values() for a, b in ss) == 100.0


def test_a_run_that_finished_no_trial_is_one_phase():
    spans = phase_spans(5.0, 65.0, [TrialRecord(trial_id="cut", status="ok", started_at=6.0)])
    assert spans["runs that finished none"] == [(5.0, 65.0)]
    assert all(spans[p] == [] for p in PHASES if p != "runs that finished none")
