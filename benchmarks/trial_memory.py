"""What a GPU trial held, against sweeps/packing.py's estimate: one Markdown row per driver run of each sweep
directory whose trials all ran at one width, from its gpu.csv (nvidia-smi's memory used, per GPU, every second or
so), its trial records (which GPU, when) and its spec as run.

    python3 benchmarks/trial_memory.py studies/gdn-adamw-8l/sweep studies/gdn-sgd/sweep …

Per run: the most trials that ran at once on one GPU, the most memory that GPU held while they ran (not during the
compile warm-up, whose one-step tasks of other widths may share it), and that over the trials at once (GiB a trial:
an upper bound where fewer ran at the peak, nvidia-smi's CUDA context included), beside the estimate for the same
model, batch and optimizer with the activation bytes of the spec's precision and compile on a GPU
(packing.activation_bytes), and the measured / estimate ratio. Other processes on the same GPU count as the
trial's: nvidia-smi cannot tell them apart. Runs without gpu.csv samples or with trials of several widths are left
out.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from deltamup.sweeps import packing, store
from deltamup.sweeps import spec as specs

COLUMNS = ("sweep", "run", "width", "depth", "n_h", "compiled", "optimizer", "trials at once", "GiB a trial (measured)",
           "GiB a trial (estimate)", "measured / estimate")


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of these (start, end) intervals that overlap at one time."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def rows(sweep: Path) -> list[list[str]]:
    """The Markdown cells of each qualifying run of one sweep directory."""
    stored = store.read_spec(sweep)
    if stored is None:
        raise ValueError(f"{sweep} has no spec.yaml: not a sweep directory")
    spec = specs.parse(stored, open_task=False)
    samples = store.read_gpu_samples(sweep)
    trials = [r for r in store.read_trials(sweep) if r.finished and r.started_at and r.finished_at]
    out = []
    for run in sorted(store.read_runs(sweep), key=lambda r: r["run"]):
        mine = [r for r in trials if r.run == run["run"]]
        if not mine or len({r.width for r in mine}) > 1 or not all(r.gpu_ids for r in mine):
            continue
        on_gpu = defaultdict(list)
        for r in mine:
            for gpu in r.gpu_ids:
                on_gpu[str(gpu)].append((r.started_at, r.finished_at))
        held = {gpu: max((mib for t, g, _, mib in samples if g == gpu and any(a <= t <= b for a, b in spans)),
                         default=None) for gpu, spans in on_gpu.items()}  # while its trials ran: no warm-up
        per_trial = [mib / most_at_once(on_gpu[gpu]) for gpu, mib in held.items() if mib]
        if not per_trial:
            continue
        first = mine[0]
        config = spec.model_config(first.width)
        measured = max(per_trial) * 2**20
        estimate = packing.trial_memory_bytes(config, first.optimizer, spec.batch_size, spec.seq_len,
                                              activation=packing.activation_bytes(spec.train, on_gpu=True))
        at_once = max(most_at_once(on_gpu[gpu]) for gpu in held if held[gpu])
        name = f"{sweep.parent.name}/{sweep.name}"
        out.append([name, str(run["run"]), str(first.width), str(config.depth), str(config.householder),
                    "yes" if spec.train.get("compile") else "no", first.optimizer, str(at_once),
                    f"{measured / 2**30:.1f}", f"{estimate / 2**30:.1f}", f"{measured / estimate:.2f}"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", type=Path, nargs="+")
    args = parser.parse_args(argv)
    try:
        table = [row for sweep in args.sweeps for row in rows(sweep)]
    except ValueError as error:
        print(f"trial_memory.py: {error}", file=sys.stderr)
        return 2
    print("| " + " | ".join(COLUMNS) + " |\n" + "| --- " * len(COLUMNS) + "|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
