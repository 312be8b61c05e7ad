"""Which build of the corpus did a sweep's trials read? For trials that predate the record's `data` fingerprint.

    python3 studies/data_build.py SWEEP_DIR CORPUS [CORPUS…] [--runs 3,13,68] [--tries 3]

`deltamup data prepare` builds the default corpus from the installed packages' sources, so two installs can build
two corpora that differ by hundreds to tens of thousands of bytes (582 and 29,390 between the builds in
studies/corpus-builds/) and draw other batches at the same seed. A trial's first training loss (its curve's step 0:
the initial model on the first batch) depends on its seed's initial weights and on that batch alone, so it names the
build. The trials of one driver run (the record's `run`) read one build (one machine, one corpus); for each run, up
to --tries of its narrowest trials (each another model or seed) have their first batch from each candidate CORPUS
run through the same initial model on this CPU in fp32, printed beside the recorded losses as one markdown table.
The build read agrees to bf16's rounding at initialisation (1e-4 to 5e-4 nats at the default multipliers, more with
larger logits); another build differs by 1e-3 to 2e-2 on most batches but can come as close on one, hence several
trials, their distances summed.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.parametrizations.hparams import BaseHparams, parse_label
from deltamup.scaling.data import get_task
from deltamup.scaling.train import lm_loss
from deltamup.sweeps import store


def first_batch_loss(record: dict, corpus: Path) -> float:
    """The trial's initial model (its seed) on its first training batch from `corpus`, fp32 on the CPU (nats)."""
    fields = tuple((k, record[k]) for k in ModelConfig.__dataclass_fields__ if record.get(k) is not None)
    return _first_batch_loss(fields, record["parametrization"], record["optimizer"], record["seed"],
                             record["hparams"] or "", record["batch_size"], record["seq_len"], corpus)


@functools.cache  # the trials of many runs share a model and seed: one forward each
def _first_batch_loss(fields: tuple, parametrization: str, optimizer: str, seed: int, hparams: str,
                      batch_size: int, seq_len: int, corpus: Path) -> float:
    model = build_model(ModelConfig(**dict(fields)), parametrization, optimizer, seed=seed,
                        hparams=BaseHparams.of(parse_label(hparams)))
    task = get_task({"name": "corpus", "path": str(corpus)})
    batch = next(task.train_batches(batch_size, seq_len, seed))
    with torch.no_grad():
        return lm_loss(model, batch, bf16=False).item()


def recorded_first_loss(sweep: Path, trial_id: str) -> float | None:
    """The curve's step-0 training loss (None: no curve, or no step 0 in it)."""
    import pyarrow.parquet as pq

    path = store.curve_path(sweep, trial_id)
    if not path.exists():
        return None
    curve = pq.read_table(path).to_pydict()
    return next((loss for step, loss in zip(curve["step"], curve["train_loss"]) if step == 0), None)


MARGIN = 3.0  # the build read is this many times nearer than any other, summed over the trials checked
APART = 5e-4  # nats a trial by which every other build is farther (two builds can draw the same first batch)
FARTHEST = 5e-3  # nats a trial: bf16's rounding at initialisation stays below it (4e-3 at 16× the logits)


def nearest_build(distances: dict[str, float], trials: int) -> str | None:
    """The build with the smallest summed |recomputed − recorded| over `trials` trials, if that is under FARTHEST a
    trial and every other build's sum is MARGIN times larger and APART a trial farther; None where none stands out
    (bf16's rounding at initialisation, 1e-4 to 4e-3 nats, can come as close to the recorded loss as another
    build's batch, and a batch the builds' difference does not reach is the same in both)."""
    best, *others = sorted(distances, key=distances.get)
    d = distances[best]
    if d > FARTHEST * trials or any(distances[r] < max(MARGIN * d, d + APART * trials) for r in others):
        return None
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("corpora", type=Path, nargs="+", metavar="CORPUS")
    parser.add_argument("--tries", type=int, default=3, help="trials checked a run (default 3)")
    parser.add_argument("--runs", type=lambda text: {int(x) for x in text.split(",")},
                        help="only these driver runs (comma-separated; default: every run)")
    args = parser.parse_args(argv)
    for corpus in args.corpora:
        if not (corpus / "manifest.json").is_file():
            sys.exit(f"data_build.py: {corpus} is not a prepared corpus (no manifest.json)")
    records = [r for r in store.read_records(args.sweep) if r.get("status") == "ok"]
    if not records:
        sys.exit(f"data_build.py: no finished trials in {args.sweep}")
    builds = {c: json.loads((c / "manifest.json").read_text())["tokens_sha256"][:16] for c in args.corpora}
    runs: dict[int | None, list[dict]] = {}
    for r in records:
        if args.runs is None or r.get("run") in args.runs:
            runs.setdefault(r.get("run"), []).append(r)
    torch.set_grad_enabled(False)
    print(f"{args.sweep}: the step-0 training loss of up to {args.tries} trials a driver run (its narrowest, each "
          "another model or seed), recorded on the GPU, against the same recomputed here (fp32) on each build: "
          f"the summed distances; the build read is {MARGIN:g}× and {APART:g} nats a trial nearer than any other\n")
    print("| run | trials | checked | recorded | " + " | ".join(f"{sha}: loss; Σ distance" for sha in builds.values())
          + " | read |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in builds) + " | --- |")
    for run, members in sorted(runs.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        checked, recorded, seen = [], [], set()
        for r in sorted(members, key=lambda r: (r["width"], r["seed"], r["trial_id"])):
            key = (r["width"], r["parametrization"], r["seed"], r["hparams"])
            loss = recorded_first_loss(args.sweep, r["trial_id"]) if key not in seen else None
            if loss is not None and len(checked) < args.tries:
                seen.add(key)
                checked.append(r)
                recorded.append(loss)
        if not checked:
            continue
        losses = {sha: [first_batch_loss(r, c) for r in checked] for c, sha in builds.items()}
        distances = {sha: sum(abs(a - b) for a, b in zip(values, recorded)) for sha, values in losses.items()}
        read = nearest_build(distances, len(checked))
        print(f"| {run} | {len(members)} | {', '.join(r['trial_id'] for r in checked)} | "
              + ", ".join(f"{x:.4f}" for x in recorded) + " | "
              + " | ".join(", ".join(f"{x:.4f}" for x in losses[sha]) + f"; {distances[sha]:.4f}" for sha in losses)
              + f" | {read or 'not told'} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
