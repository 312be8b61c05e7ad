"""Learning-rate sweeps across widths on Ray Tune: a YAML spec → one trial per (parametrization, optimizer, width,
lr, seed) → one directory of results (trials.parquet, curves.parquet) that a killed sweep resumes from.

    from deltamup.sweeps import runner, spec
    runner.run_sweep(spec.load(spec.SPECS_DIR / "quickstart.yaml"), out="runs/sweeps/quickstart")

spec (the YAML format, checked before Ray starts), record (the typed trial record, deltamup.trial/1), trial (one
training run → one record), store (the sweep directory), runner (the driver: what is missing, on Ray), tuner
(resources and configs handed to Ray Tune), warmup (each distinct compiled graph once, before the trials),
tracebacks (every failed attempt's traceback), refine (a finer grid around each width's optimum), search (Optuna),
tracking (TensorBoard, MLflow, W&B), packing (GPU shares and limits from a memory estimate), time_limit (no trial
starts that would end past the command's limit), plan (what a sweep would run and cost), progress, cost and
gpu_monitor (what the run cost). docs/sweeps.md describes horizons, refinement, Optuna and tracking;
docs/sweeps-reliability.md retries, damaged files and limits; docs/sweeps-compile.md the compile cache and warm-up.
"""
