"""The one module that reads, merges and writes a sweep directory:

    DIR/spec.yaml                      the spec as run
    DIR/driver.lock                    locked while a driver runs the sweep
    DIR/results/<trial_id>.json        one finished (or errored) trial's record (sweeps/record.py), written by the
                                       trial itself (by the driver for a trial Ray gave up on)
    DIR/results/<trial_id>.curve.parquet   its curve: loss, LR and gradient norm per step (written before the row)
    DIR/results/<trial_id>.attempt<N>.traceback.txt   the full traceback of each failed attempt
    DIR/results/quarantine/            result files found damaged, moved aside (their trials count as missing)
    DIR/partial/<trial_id>.pt          a running (or killed) trial's last checkpoint (scaling.checkpoint), removed
                                       once its row is written; a rerun of the trial continues from it
    DIR/runs.jsonl                     one line per driver invocation (wall time, trials launched, compile
                                       warm-ups: sweeps.warmup)
    DIR/gpu.csv                        nvidia-smi samples (time, gpu index, utilisation %, memory MiB), if any
    DIR/tensorboard/<trial_id>/        each trial's TensorBoard scalars (sweeps.tracking)
    DIR/optuna.db                      Optuna's studies (search: optuna; sweeps.search)
    DIR/compile-cache/                 torch.compile's and Triton's caches, shared by the sweep's trials
                                       (scaling.compile_cache; machine-specific, left out of archives)
    DIR/trials.parquet, curves.parquet merged from results/ (derived: rebuilt any time)

results/ is the source of truth: a row there exists only once its trial has finished, a finished row is never
replaced, and a resumed sweep runs exactly the trials that have none. Every row is checked against the record's
schema when read: a damaged one (not JSON, not an object, a field missing or mistyped) is named in one line on
stderr and moved to results/quarantine/, and its trial counts as missing.
"""
from __future__ import annotations

import bisect
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from .record import FINISHED, TrialRecord, columns

CURVE_COLUMNS = ("trial_id", "step", "tokens", "train_loss", "lr", "grad_norm")  # grad_norm: before clipping


def results_dir(out: Path) -> Path:
    return Path(out) / "results"


def record_path(out: Path, trial_id: str) -> Path:
    return results_dir(out) / f"{trial_id}.json"


def curve_path(out: Path, trial_id: str) -> Path:
    return results_dir(out) / f"{trial_id}.curve.parquet"


def partial_path(out: Path, trial_id: str) -> Path:
    """The trial's checkpoint: it depends on the trial id only, so a retry and a resumed sweep both find it."""
    return Path(out) / "partial" / f"{trial_id}.pt"


def compile_cache_dir(out: Path) -> Path:
    return Path(out) / "compile-cache"


def quarantine_dir(out: Path) -> Path:
    return results_dir(out) / "quarantine"


def traceback_paths(out: Path, trial_id: str) -> list[Path]:
    """The trial's failed attempts' tracebacks, in attempt order."""
    paths = results_dir(out).glob(f"{trial_id}.attempt*.traceback.txt")
    return sorted(paths, key=lambda p: int(p.name[len(trial_id) + len(".attempt"):].split(".")[0]))


def write_traceback(out: Path, trial_id: str, text: str) -> Path:
    """Stores one failed attempt's traceback as results/<trial_id>.attempt<N>.traceback.txt (N = 1, 2, …)."""
    path = results_dir(out) / f"{trial_id}.attempt{len(traceback_paths(out, trial_id)) + 1}.traceback.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _atomic_path(path)
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def _atomic_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")


def write_trial(out: Path, record: TrialRecord | dict[str, Any], curve: dict[str, list]) -> bool:
    """Writes a trial's curve, then its row, each atomically. A finished row already there is kept (the first
    finisher wins: a trial rerun after a kill cannot replace a result); an error row is replaced. A dict is checked
    as a record first (TrialRecord.from_row). Returns whether the row was written."""
    record = record if isinstance(record, TrialRecord) else TrialRecord.from_row(record)
    path = record_path(out, record.trial_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = read_record(path)
    if previous is not None and previous["status"] in FINISHED:
        return False
    write_parquet(pa.table({c: curve[c] for c in CURVE_COLUMNS}), curve_path(out, record.trial_id))
    tmp = _atomic_path(path)
    tmp.write_text(json.dumps(record.to_row(), indent=1))
    if record.finished:
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


def load_trial(path: Path) -> TrialRecord | None:
    """The record in `path`; None when there is none, or when it is damaged (then named on stderr and moved to
    results/quarantine/ with its curve, so its trial counts as missing)."""
    try:
        return TrialRecord.from_row(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except ValueError as e:  # also bad JSON and bad UTF-8
        quarantine(path, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


def quarantine(path: Path, problem: str) -> None:
    """Moves a damaged result file (and its curve) to results/quarantine/, saying so in one line."""
    folder = quarantine_dir(path.parent.parent)
    where = f"moved to {folder}/"
    try:
        folder.mkdir(exist_ok=True)
        for src in (path, path.with_name(path.name.removesuffix(".json") + ".curve.parquet")):
            if src.exists():
                dest = folder / src.name
                n = 1
                while dest.exists():  # an earlier damaged copy of the same trial stays too
                    dest, n = folder / f"{src.name}.{n}", n + 1
                os.replace(src, dest)
    except FileNotFoundError:
        return  # another reader moved it first
    except OSError as e:
        where = f"left in place (cannot move it: {e.strerror})"
    print(f"damaged result file {path} ({problem}): skipped, {where}; its trial counts as missing",
          file=sys.stderr, flush=True)


def read_record(path: Path) -> dict[str, Any] | None:
    """The record in `path` as a flat row (every field present), or None (see load_trial)."""
    record = load_trial(path)
    return None if record is None else record.to_row()


def read_trials(out: Path) -> list[TrialRecord]:
    """Every valid record in DIR/results, sorted by trial id, less error rows of grid points that also have a
    finished row (under an id written in an older format)."""
    folder = results_dir(out)
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    records = [r for r in map(load_trial, paths) if r is not None]
    finished = {r.key for r in records if r.finished}
    return [r for r in records if r.finished or r.key not in finished]


def read_records(out: Path) -> list[dict[str, Any]]:
    """read_trials as flat rows (every field of the record present; None where unknown)."""
    return [r.to_row() for r in read_trials(out)]


def finished_ids(out: Path) -> set[str]:
    """Trials (record.key) with a finished (ok, diverged or pruned) row: a resumed sweep never runs these again."""
    return {r.key for r in read_trials(out) if r.finished}


def skipped(out: Path) -> list[str]:
    """Damaged result files in results/quarantine/ whose trial has no valid record now."""
    folder = quarantine_dir(out)
    have = {r.trial_id for r in read_trials(out)}
    return sorted(p.name for p in folder.glob("*.json*") if p.name.split(".json")[0] not in have) \
        if folder.is_dir() else []


def write_parquet(table: pa.Table, path: Path) -> None:
    """Atomically writes `table`, losslessly and small (a 1200-step curve: ≈ 20 kB, not 43 kB): zstd, the float
    columns byte-stream split, dictionaries only for the strings."""
    tmp = _atomic_path(path)
    floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
    strings = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    pq.write_table(table, tmp, compression="zstd", compression_level=9, use_byte_stream_split=floats,
                   use_dictionary=strings)
    os.replace(tmp, path)


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (TrialRecord.to_row(), possibly with different extra keys) as one table in the record's column order;
    lists and mappings become JSON text."""
    return pa.table({c: pa.array([_cell(r.get(c)) for r in rows]) for c in columns(rows)})


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (dict, list)) else value


def consolidate(out: Path) -> tuple[int, int]:
    """Rebuilds DIR/trials.parquet and DIR/curves.parquet from DIR/results (with each trial's mean GPU
    utilisation while it ran, where gpu.csv has samples); a trial whose curve cannot be read is quarantined.
    Returns (trials, curve rows)."""
    out = Path(out)
    samples = read_gpu_samples(out)
    records, curves = [], []
    for trial in read_trials(out):
        path = curve_path(out, trial.trial_id)
        try:
            curves += [pq.read_table(path)] if path.exists() else []
        except (OSError, pa.ArrowException) as e:
            quarantine(record_path(out, trial.trial_id), f"its curve is unreadable: {str(e).splitlines()[0]}")
            continue
        trial.gpu_util = trial_gpu_util(trial.to_row(), samples)
        records.append(trial.to_row())
    curve_table = (pa.concat_tables(curves, promote_options="permissive") if curves else
                   pa.table({c: pa.array([], pa.float64()) for c in CURVE_COLUMNS}))
    if records:
        write_parquet(rows_table(records), out / "trials.parquet")
    write_parquet(curve_table, out / "curves.parquet")
    return len(records), curve_table.num_rows


def read_gpu_samples(out: Path) -> list[tuple[float, str, float, float]]:
    """(unix time, gpu index, utilisation %, memory used MiB) rows from DIR/gpu.csv, in time order."""
    path = Path(out) / "gpu.csv"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) == 4:
            rows.append((float(parts[0]), parts[1], float(parts[2]), float(parts[3])))
    return sorted(rows, key=lambda row: row[0])


def trial_gpu_util(record: dict[str, Any], samples: list[tuple[float, str, float, float]]) -> float | None:
    """Mean utilisation (%) of the trial's GPUs while it ran; None without GPUs or samples. `samples` in time order
    (read_gpu_samples): the trial's window is found by bisection, not a scan of every sample."""
    gpus = {str(g) for g in record.get("gpu_ids") or []}
    start, end = record.get("started_at") or 0.0, record.get("finished_at") or 0.0
    first = bisect.bisect_left(samples, start, key=lambda row: row[0])
    last = bisect.bisect_right(samples, end, key=lambda row: row[0])
    window = [u for _, g, u, _ in samples[first:last] if g in gpus]
    return sum(window) / len(window) if window else None


def append_run(out: Path, run: dict[str, Any]) -> None:
    with open(Path(out) / "runs.jsonl", "a") as f:
        f.write(json.dumps(run) + "\n")


def read_runs(out: Path) -> list[dict[str, Any]]:
    """One dict per driver invocation: its start line merged with its end line (absent if it was killed). A line
    that is not a run's JSON object (cut short by a full disk) is skipped."""
    path = Path(out) / "runs.jsonl"
    runs: dict[int, dict[str, Any]] = {}
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("run"), int):
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
