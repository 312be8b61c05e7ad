"""The one module that reads, merges and writes a sweep directory:

    DIR/spec.yaml                      the spec as run
    DIR/driver.lock                    locked while a driver runs the sweep
    DIR/results/<trial_id>.json        one finished (or errored) trial's row, written by the trial itself
    DIR/results/<trial_id>.curve.parquet   its curve: loss, LR and gradient norm per step (written before the row)
    DIR/runs.jsonl                     one line per driver invocation (wall time, trials launched)
    DIR/gpu.csv                        nvidia-smi samples (time, gpu index, utilisation %, memory MiB), if any
    DIR/tensorboard/<trial_id>/        each trial's TensorBoard scalars (sweeps.tracking)
    DIR/optuna.db                      Optuna's studies (search: optuna; sweeps.search)
    DIR/trials.parquet, curves.parquet merged from results/ (derived: rebuilt any time)

results/ is the source of truth: a row there exists only once its trial has finished, a finished row is never
replaced, and a resumed sweep runs exactly the trials that have none.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

FINISHED = ("ok", "diverged", "pruned")  # decided outcomes: never run again (pruned: stopped by an Optuna pruner)
ID_COLUMNS = ("trial_id", "phase", "parametrization", "optimizer", "width", "lr", "seed", "kind", "depth",
              "householder")
CURVE_COLUMNS = ("trial_id", "step", "tokens", "train_loss", "lr", "grad_norm")  # grad_norm: before clipping


def results_dir(out: Path) -> Path:
    return Path(out) / "results"


def record_path(out: Path, trial_id: str) -> Path:
    return results_dir(out) / f"{trial_id}.json"


def curve_path(out: Path, trial_id: str) -> Path:
    return results_dir(out) / f"{trial_id}.curve.parquet"


def _atomic_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")


def write_trial(out: Path, record: dict[str, Any], curve: dict[str, list]) -> bool:
    """Writes a trial's curve, then its row, each atomically. A finished row already there is kept (the first
    finisher wins: a trial rerun after a kill cannot replace a result); an error row is replaced.
    Returns whether the row was written."""
    path = record_path(out, record["trial_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = read_record(path)
    if previous is not None and previous["status"] in FINISHED:
        return False
    write_parquet(pa.table({c: curve[c] for c in CURVE_COLUMNS}), curve_path(out, record["trial_id"]))
    tmp = _atomic_path(path)
    tmp.write_text(json.dumps(record, indent=1))
    if record["status"] in FINISHED:
        try:
            os.link(tmp, path)  # fails if another finisher got there first
        except FileExistsError:
            if (read_record(path) or {}).get("status") in FINISHED:
                tmp.unlink()
                return False
            os.replace(tmp, path)
        else:
            tmp.unlink()
    else:
        os.replace(tmp, path)
    return True


def read_record(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every trial row in DIR/results, sorted by trial id."""
    folder = results_dir(out)
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [r for r in map(read_record, paths) if r is not None]


def finished_ids(out: Path) -> set[str]:
    """Trials with a finished (ok, diverged or pruned) row: a resumed sweep never runs these again."""
    return {r["trial_id"] for r in read_records(out) if r["status"] in FINISHED}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Atomically writes `table` with polars where it is installed (the GPU machine has only pyarrow)."""
    tmp = _atomic_path(path)
    try:
        import polars as pl
    except ImportError:
        pq.write_table(table, tmp)
    else:
        pl.from_arrow(table).write_parquet(tmp)
    os.replace(tmp, path)


def rows_table(rows: list[dict[str, Any]], first: tuple[str, ...] = ()) -> pa.Table:
    """Rows with possibly different keys as one table: the union of columns, `first` ones leading."""
    columns = [c for c in first if any(c in r for r in rows)]
    for row in rows:
        columns += [c for c in row if c not in columns]
    return pa.table({c: pa.array([_cell(r.get(c)) for r in rows]) for c in columns})


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def consolidate(out: Path) -> tuple[int, int]:
    """Rebuilds DIR/trials.parquet and DIR/curves.parquet from DIR/results (with each trial's mean GPU
    utilisation while it ran, where gpu.csv has samples). Returns (trials, curve rows)."""
    out = Path(out)
    records = read_records(out)
    samples = read_gpu_samples(out)
    for record in records:
        record["gpu_util"] = trial_gpu_util(record, samples)
    curves = [pq.read_table(curve_path(out, r["trial_id"])) for r in records
              if curve_path(out, r["trial_id"]).exists()]
    curve_table = (pa.concat_tables(curves, promote_options="permissive") if curves else
                   pa.table({c: pa.array([], pa.float64()) for c in CURVE_COLUMNS}))
    if records:
        write_parquet(rows_table(records, ID_COLUMNS), out / "trials.parquet")
    write_parquet(curve_table, out / "curves.parquet")
    return len(records), curve_table.num_rows


def read_gpu_samples(out: Path) -> list[tuple[float, str, float, float]]:
    """(unix time, gpu index, utilisation %, memory used MiB) rows from DIR/gpu.csv."""
    path = Path(out) / "gpu.csv"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) == 4:
            rows.append((float(parts[0]), parts[1], float(parts[2]), float(parts[3])))
    return rows


def trial_gpu_util(record: dict[str, Any], samples: list[tuple[float, str, float, float]]) -> float | None:
    """Mean utilisation (%) of the trial's GPUs while it ran; None without GPUs or samples."""
    gpus = {str(g) for g in record.get("gpu_ids") or []}
    window = [u for t, g, u, _ in samples
              if g in gpus and record.get("started_at", 0) <= t <= record.get("finished_at", 0)]
    return sum(window) / len(window) if window else None


def append_run(out: Path, run: dict[str, Any]) -> None:
    with open(Path(out) / "runs.jsonl", "a") as f:
        f.write(json.dumps(run) + "\n")


def read_runs(out: Path) -> list[dict[str, Any]]:
    """One dict per driver invocation: its start line merged with its end line (absent if it was killed)."""
    path = Path(out) / "runs.jsonl"
    runs: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        runs.setdefault(event["run"], {}).update(event)
    return list(runs.values())


@contextmanager
def driver_lock(out: Path) -> Iterator[None]:
    """Held while a driver runs the sweep in DIR, so a second driver fails at once (ValueError); the OS releases
    it when the holder exits, also on SIGKILL."""
    with open(Path(out) / "driver.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"another driver is running the sweep in {out}") from None
        yield


def write_spec(out: Path, spec_dict: dict[str, Any]) -> None:
    path = Path(out) / "spec.yaml"
    tmp = _atomic_path(path)
    tmp.write_text(yaml.safe_dump(spec_dict, sort_keys=False))
    os.replace(tmp, path)


def read_spec(out: Path) -> dict[str, Any] | None:
    path = Path(out) / "spec.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else None
