"""The typed trial record (sweeps/record.py): what a trial writes is what the store, the cost tables and the
analysis read; records written before the schema existed (tests/fixtures/sweep-v0: three trials of a GPU study)
still load and still count as finished."""
from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deltamup.reports.analysis import load_sweep
from deltamup.sweeps import cost, store
from deltamup.sweeps import spec as specs
from deltamup.sweeps.record import IDENTITY, SCHEMA, TrialRecord, trial_id
from deltamup.sweeps.trial import base_record, trial_config

FIXTURE = Path(__file__).parent / "fixtures" / "sweep-v0"
EMPTY_CURVE = {c: [] for c in store.CURVE_COLUMNS}


@pytest.fixture
def old_sweep(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "sweep"))


def test_version_0_records_load_with_every_field(old_sweep: Path) -> None:
    for path in sorted(store.results_dir(old_sweep).glob("*.json")):
        raw = json.loads(path.read_text())
        record = TrialRecord.from_row(raw)
        assert record.schema is None and record.finished and record.extra == {}
        assert record.model["kind"] == "gdn" and record.config["seq_len"] == 1024
        row = record.to_row()
        assert {k: row[k] for k in raw} == raw  # nothing changed, nothing lost
        assert row["tracebacks"] is None and row["gpu_util"] is None  # fields it predates: None


def test_an_old_id_still_matches_its_grid_point(old_sweep: Path) -> None:
    """The old ids rounded the LR to 6 digits (lr0.00195312 for 2^-9): a resume must still find the trial done."""
    spec = specs.parse(store.read_spec(old_sweep), open_task=False)
    done = store.finished_ids(old_sweep)
    assert len(done) == 3 and done <= {p.key for p in spec.grid()}
    assert trial_id("gdn-mup", "adamw", 1024, 2.0 ** -9, 0) in done


def test_the_analysis_and_the_cost_read_old_records(old_sweep: Path) -> None:
    sweep = load_sweep(old_sweep)
    assert sweep.trials.columns[:len(IDENTITY) + 1] == ["schema", *IDENTITY]
    assert sweep.trials.height == 3 and set(sweep.trials["status"]) == {"ok"}
    assert {r["width"]: r["trials"] for r in cost.per_width(old_sweep)} == {1024: 2, 1536: 1}


def test_what_a_trial_writes_is_the_record(tmp_path: Path) -> None:
    """base_record's keys are exactly the record's identity, model and config fields; task metrics are extra
    columns of trials.parquet."""
    spec = specs.parse({"widths": [32], "lrs": [1e-3], "steps": 2, "model": {"kind": "gdn", "depth": 1, "heads": 2,
                                                                             "base_width": 32}})
    cfg = trial_config(spec, spec.grid()[0], tmp_path, run=1)
    row = base_record(cfg) | {"status": "ok", "val_loss": 3.5, "acc@128": 0.75, "scaled_acc_test_len": 0.1}
    record = TrialRecord.from_row(row)
    assert record.schema == SCHEMA and record.key == cfg["trial_id"]
    assert record.extra == {"acc@128": 0.75, "scaled_acc_test_len": 0.1}  # nothing of base_record lands here
    assert store.write_trial(tmp_path, row, EMPTY_CURVE)
    assert store.consolidate(tmp_path) == (1, 0)
    (written,) = pq.read_table(tmp_path / "trials.parquet").to_pylist()
    assert written["acc@128"] == 0.75 and written["schema"] == SCHEMA and written["val_loss"] == 3.5


def test_a_curve_is_stored_losslessly_and_small(tmp_path: Path) -> None:
    """A 1200-step curve comes back bit for bit, in under 60% of the bytes pyarrow's defaults take."""
    spec = specs.parse({"widths": [32], "lrs": [1e-3], "steps": 2, "model": {"kind": "gdn", "depth": 1, "heads": 2,
                                                                             "base_width": 32}})
    cfg = trial_config(spec, spec.grid()[0], tmp_path, run=1)
    rng = random.Random(0)
    curve = {"trial_id": [cfg["trial_id"]] * 1200, "step": list(range(1, 1201)),
             "tokens": [16384 * s for s in range(1, 1201)],
             "train_loss": [3.0 * 0.999 ** s + rng.gauss(0, 0.02) for s in range(1200)],
             "lr": [1e-3 * math.cos(s / 800) for s in range(1200)], "grad_norm": [rng.lognormvariate(0, 0.3)
                                                                                 for _ in range(1200)]}
    assert store.write_trial(tmp_path, base_record(cfg) | {"status": "ok", "val_loss": 1.0}, curve)
    path = store.curve_path(tmp_path, cfg["trial_id"])
    assert pq.read_table(path).to_pydict() == curve
    pq.write_table(pq.read_table(path), tmp_path / "default.parquet")
    assert path.stat().st_size < 0.6 * (tmp_path / "default.parquet").stat().st_size


@pytest.mark.parametrize("change, field", [({"width": "wide"}, "width"), ({"lr": -1.0}, "lr"),
                                           ({"gpu_ids": "0"}, "gpu_ids"), ({"diverged": "no"}, "diverged"),
                                           ({"acc": {"a": 1}}, "acc"), ({"status": None}, "status"),
                                           ({"schema": "deltamup.trial/9"}, "schema")])
def test_a_bad_field_is_named(change: dict, field: str) -> None:
    row = json.loads(next(store.results_dir(FIXTURE).glob("*.json")).read_text())
    with pytest.raises(ValueError, match=f"'{field}'"):
        TrialRecord.from_row(row | change)


def test_a_version_1_record_names_its_identity_in_full() -> None:
    row = {"schema": SCHEMA, "trial_id": "sp.adamw.w32.lr0.00100000.s0", "status": "ok", "phase": "grid", "run": 1,
           "parametrization": "sp", "optimizer": "adamw", "width": 32, "lr": 1e-3, "seed": 0}
    assert TrialRecord.from_row(row).key == "sp.adamw.w32.lr0.001.s0"
    with pytest.raises(ValueError, match="'seed' is missing"):
        TrialRecord.from_row({k: v for k, v in row.items() if k != "seed"})
    assert TrialRecord.from_row({"trial_id": "t", "status": "ok"}).key == "t"  # version 0: partial rows load


def test_a_trial_on_a_prepared_corpus_records_its_data_and_code_fingerprints(tmp_path: Path, capsys) -> None:
    """`data`: the tokens sha256 (16 hex digits) of the corpus the trial trained on, `code`, the fingerprint of
    the code that trained it, and `versions`, the part of it that is not sources, config columns of the record,
    through the trial's own functions (train, record, store); a run of the sweep on other data, or by other code,
    says it would mix them; the same says nothing."""
    import dataclasses
    import importlib

    import torch

    from deltamup.scaling.code import PACKAGES, code_fingerprint, fingerprint_of
    from deltamup.scaling.data.inputs import text_files
    from deltamup.scaling.data.prepare import prepare
    from deltamup.sweeps.runner import warn_if_other_code, warn_if_other_data
    from deltamup.sweeps.trial import train_and_evaluate, trial_record

    (tmp_path / "a.txt").write_text("fingerprinted corpus text " * 400)
    sha = prepare(text_files([str(tmp_path / "a.txt")]), tmp_path / "c", progress=False)["tokens_sha256"]
    spec = specs.parse({"name": "fp", "model": {"kind": "gdn", "depth": 1, "heads": 1, "base_width": 16},
                        "task": {"name": "corpus", "path": str(tmp_path / "c")}, "widths": [16], "lrs": [1e-3],
                        "steps": 2, "batch_size": 2, "seq_len": 16, "log_every": 1, "eval": {"batches": 1},
                        "resources": {"cpu": 1, "gpu": 0}})
    out = tmp_path / "sweep"
    out.mkdir()
    store.write_spec(out, spec.to_dict())
    cfg = trial_config(spec, spec.grid()[0], out, run=1)
    outcome = train_and_evaluate(cfg, torch.device("cpu"), lambda *_, **__: None, None)
    store.write_trial(out, *trial_record(cfg, outcome, {"device": "cpu", "threads": 1, "gpu_ids": [],
                                                        "node_id": "test", "started_at": 0.0, "finished_at": 1.0}))
    record = TrialRecord.from_row(store.read_records(out)[0])
    assert record.config["data"] == sha[:16] and record.status == "ok"
    assert record.config["code"] == code_fingerprint() and len(record.config["code"]) == 16
    sources = {name: Path(importlib.import_module(f"deltamup.{name}").__file__).parent for name in PACKAGES}
    assert fingerprint_of(sources, record.config["versions"]) == record.config["code"]  # what `deltamup code` needs
    warn_if_other_data(spec, out)
    warn_if_other_code(out)
    assert capsys.readouterr().out == ""
    (tmp_path / "b.txt").write_text("another corpus, other bytes " * 400)
    other = prepare(text_files([str(tmp_path / "b.txt")]), tmp_path / "d", progress=False)["tokens_sha256"]
    warn_if_other_data(dataclasses.replace(spec, task={"name": "corpus", "path": str(tmp_path / "d")}), out)
    assert capsys.readouterr().out == (f"warning: {out}'s finished trials trained on data {sha[:16]}; this run's task "
                                       f"reads {other[:16]}: the sweep would mix them (pin the corpus with "
                                       "tokens_sha256 to refuse other data)\n")
    result = next((out / "results").glob("*.json"))  # as if an earlier version of the code had trained it
    result.write_text(result.read_text().replace(code_fingerprint(), "0123456789abcdef"))
    warn_if_other_code(out)
    assert capsys.readouterr().out == (f"warning: {out}'s finished trials were trained by code 0123456789abcdef; this "
                                       f"run's is {code_fingerprint()}: the sweep would mix them (`deltamup report` "
                                       "counts the trials of each)\n")


def test_the_code_fingerprint_follows_the_sources_not_their_times(tmp_path: Path) -> None:
    """An edit, a new file, a move or other versions change the fingerprint; rewriting a file's same bytes (its
    mtime) does not; the process's fingerprint is the one of its own package folders."""
    import importlib
    import os

    from deltamup.scaling.code import PACKAGES, code_fingerprint, fingerprint_of, installed_version, versions_text

    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "a.py").write_text("x = 1\n")
    (tmp_path / "m").mkdir()
    roots = {"kernels": tmp_path / "k", "models": tmp_path / "m"}
    first = fingerprint_of(roots, "torch 1")
    os.utime(tmp_path / "k" / "a.py", (1, 1))
    assert fingerprint_of(roots, "torch 1") == first
    assert fingerprint_of(roots, "torch 2") != first
    (tmp_path / "k" / "a.py").write_text("x = 2\n")
    edited = fingerprint_of(roots, "torch 1")
    assert edited != first
    (tmp_path / "k" / "a.py").rename(tmp_path / "m" / "a.py")
    assert fingerprint_of(roots, "torch 1") not in (first, edited)
    (tmp_path / "m" / "b.py").write_text("")
    moved_and_added = fingerprint_of(roots, "torch 1")
    assert len({first, edited, moved_and_added}) == 3
    real = {name: Path(importlib.import_module(f"deltamup.{name}").__file__).parent for name in PACKAGES}
    assert code_fingerprint() == fingerprint_of(real, versions_text(installed_version("torch"),
                                                                     installed_version("triton")))
