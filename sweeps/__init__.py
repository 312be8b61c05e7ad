"""Learning-rate sweeps across widths on Ray Tune: a YAML spec → one trial per (parametrization, optimizer, width,
lr, seed) → one directory of results (trials.parquet, curves.parquet) that a killed sweep resumes from.

    spec = sweeps.spec.load("sweeps/specs/quickstart.yaml")
    sweeps.runner.run_sweep(spec, out="runs/sweeps/quickstart")
"""
