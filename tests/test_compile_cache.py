"""Compiled sweeps reuse compiled code (docs/sweeps-compile.md): the compile warm-up compiles each distinct graph once
into DIR/compile-cache, every trial's process then finds it there (FX graph cache hits, no misses, a first step far
shorter than the cold one), and the record and the cost summary carry the time before the first step.

One real compile on the CPU (Inductor's C++ backend, about 40 s on a shared 2-core machine): the warm-up's."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from deltamup.sweeps import cost, store, warmup
from deltamup.sweeps import spec as specs
from deltamup.sweeps.progress import print_summary
from deltamup.sweeps.runner import run_sweep
from deltamup.sweeps.trial import result_columns, trial_config

# width 2 × base width: SP and GDN-µP have different forward multipliers there (GDN-µP's readout 4, logits 1/2),
# buffers of the model, so one graph serves both trials;
# DeltaNet (no decay gate): 26 C++ kernels to compile where Gated DeltaNet has 32 (58 against 77 CPU-s)
COMPILED = {"name": "compiled", "model": {"kind": "deltanet", "depth": 1, "heads": 1, "base_width": 8},
            "task": {"name": "sample"}, "widths": [16], "lrs": [1e-3], "parametrizations": ["sp", "gdn-mup"],
            "steps": 2, "batch_size": 1, "seq_len": 16, "log_every": 1, "compile": True, "eval": {"batches": 1},
            "resources": {"cpu": 1, "gpu": 0}, "failure": {"retries": 0}}
EMPTY_CURVE = {c: [] for c in store.CURVE_COLUMNS}


def test_a_compiled_sweep_compiles_each_graph_once_and_its_trials_load_it(cluster, tmp_path, capsys, monkeypatch):
    out = tmp_path / "sweep"
    run_sweep(specs.parse(COMPILED), out, progress_every=600)
    (run,) = store.read_runs(out)
    warmed = run["warmup_grid"]
    assert warmed["graphs"] == 1 and warmed["failed"] == 0  # sp and gdn-mup: one graph
    assert (store.compile_cache_dir(out) / "inductor" / "fxgraph").is_dir()
    records = store.read_trials(out)
    assert len(records) == 2 and {r.status for r in records} == {"ok"}
    # every trial found its graph: on disk (its process's first trial) or in memory (a reused Ray actor)
    assert all(r.compile_cache_misses == 0 for r in records)
    assert any(r.compile_cache_hits == 2 for r in records)  # the forward and the backward graph, from disk
    # the compile happened once, in the warm-up: the counters above say so (no miss); each trial records its first
    # step's time (trace, load, one step), a wall time this test does not bound (it varies with the machine's load)
    assert all(r.first_step_seconds > 0 for r in records)
    # each trial names the GPU memory it held: none on a CPU, an explicit null in its file (a GPU trial's in GiB)
    assert all(json.loads(p.read_text())["peak_memory_gib"] is None for p in (out / "results").glob("*.json"))
    (width,) = cost.per_width(out)
    assert 0 < width["first_step_share"] < 1
    assert width["first_step_share"] == pytest.approx(sum(r.first_step_seconds for r in records) /
                                                      sum(r.wall_seconds for r in records))
    assert cost.totals(out)["warmup_seconds"] == pytest.approx(warmed["seconds"])
    capsys.readouterr()
    print_summary(out)
    printed = capsys.readouterr().out
    assert "compile warm-up" in printed and "of trial time before the first step" in printed
    assert f"width 16 {width['first_step_share']:.0%}" in printed
    # a later run of the sweep (one more LR) finds the graph stamped in the cache: no warm-up, and its trial loads it
    (stamp,) = (store.compile_cache_dir(out) / "deltamup-warmed").glob("*.json")
    run_sweep(specs.parse({**COMPILED, "lrs": [1e-3, 2e-3]}), out, resume=True, progress_every=600)
    assert store.read_runs(out)[1]["warmup_grid"] == {"graphs": 0, "seconds": pytest.approx(0, abs=5), "failed": 0,
                                                       "stamped": 1}
    later = [r for r in store.read_trials(out) if r.run == 2]
    assert len(later) == 2 and all(r.status == "ok" and r.compile_cache_misses == 0 for r in later)
    assert "warmed in this cache before" in capsys.readouterr().out
    # the same cache carried to another machine (another boot) has no stamp for its graph there: it warms it again
    spec = specs.parse(COMPILED)
    cfg = trial_config(spec, next(iter(spec.grid())), out, run=3)
    assert warmup.stamp_path(cfg, on_gpu=False) == stamp
    monkeypatch.setattr(warmup, "machine_boot", lambda: "another machine")
    assert not warmup.stamp_path(cfg, on_gpu=False).exists()


def test_the_graph_key_holds_what_the_graph_depends_on(tmp_path):
    """Shapes and the output norm's eps make a graph; the forward multipliers (buffers), the learning rate and the
    seed do not."""
    spec = specs.parse({**COMPILED, "widths": [16, 32], "lrs": [1e-3, 2e-3],
                        "parametrizations": ["sp", "mup", "gdn-mup", "gdn-mup-nosqrtd", "gdn-mup-normeps"],
                        "seeds": [0, 1], "hparams": {"output_mult": [1.0, 2.0]}})
    keys = {(p.parametrization, p.width, p.lr, p.seed, dict(p.hparams)["output_mult"]):
            warmup.graph_key(trial_config(spec, p, tmp_path, run=1), on_gpu=False) for p in spec.grid()}
    for width in (16, 32):
        same = keys[("sp", width, 1e-3, 0, 1.0)]
        assert keys[("sp", width, 2e-3, 1, 1.0)] == same and keys[("sp", width, 1e-3, 0, 2.0)] == same
        assert keys[("mup", width, 1e-3, 0, 2.0)] == same and keys[("gdn-mup", width, 1e-3, 0, 1.0)] == same
        assert keys[("gdn-mup-nosqrtd", width, 1e-3, 0, 1.0)] == same
        assert keys[("gdn-mup-normeps", width, 1e-3, 0, 1.0)] != same  # its output norm's eps: 1e-6 / d
    assert keys[("sp", 32, 1e-3, 0, 1.0)] != keys[("sp", 16, 1e-3, 0, 1.0)]
    assert len(set(keys.values())) == 4  # per width: one graph, and one for the eps variant


def test_the_record_and_the_summary_carry_the_time_before_the_first_step(tmp_path, capsys):
    """An uncompiled run records its first step too; the cost tables sum it per width against the trials' wall."""
    from deltamup.models import ModelConfig
    from deltamup.parametrizations import build_model
    from deltamup.scaling.train import TrainConfig, train

    spec = specs.parse({**COMPILED, "compile": False})
    cfg = trial_config(spec, spec.grid()[0], tmp_path, run=1)
    model = build_model(ModelConfig(**cfg["model"]), "sp", "adamw", seed=0)
    batches = iter([(torch.randint(0, 32, (1, 16)), torch.randint(0, 32, (1, 16)))] * 3)
    result = train(model, "sp", TrainConfig(steps=3, log_every=1), batches)
    assert 0 < result.first_step_seconds <= result.seconds and result.compile_cache == {}
    columns = result_columns(cfg, result, {"val_loss": 3.0}, 1)
    assert columns["first_step_seconds"] == result.first_step_seconds
    assert columns["compile_cache_hits"] is None and columns["compile_cache_misses"] is None
    for trial_id, width, first, wall in (("a", 16, 3.0, 10.0), ("b", 16, 1.0, 10.0), ("c", 32, 5.0, 20.0),
                                         ("d", 32, None, 20.0)):
        store.write_trial(tmp_path, dict(trial_id=trial_id, run=1, width=width, status="ok", tokens=10,
                                         started_at=0.0, finished_at=wall, wall_seconds=wall,
                                         first_step_seconds=first), EMPTY_CURVE)
    store.append_run(tmp_path, {"run": 1, "started_at": 0.0, "finished_at": 30.0, "wall_seconds": 30.0,
                                "warmup_grid": {"graphs": 2, "seconds": 7.0, "failed": 0}})
    rows = {r["width"]: r for r in cost.per_width(tmp_path)}
    assert rows[16]["first_step_share"] == pytest.approx(4 / 20) and rows[16]["first_step_seconds"] == 2.0
    assert rows[32]["first_step_share"] == pytest.approx(5 / 20)  # d has no first step: left out of both sums
    total = cost.totals(tmp_path)
    assert total["first_step_share"] == pytest.approx(9 / 40) and total["warmup_seconds"] == 7.0
    print_summary(tmp_path)
    printed = capsys.readouterr().out
    assert "compile warm-up 7s, 22% of trial time before the first step" in printed
    assert "width 16 20% (mean 2.0 s), width 32 25% (mean 5.0 s)" in printed


def test_keep_sh_leaves_the_compile_cache_out_or_tars_it_apart(tmp_path):
    import subprocess
    import tarfile

    sweep = tmp_path / "sweep"
    for name in ("results/a.json", "compile-cache/inductor/fxgraph/x", "compile-cache/triton/k/k.cubin", "spec.yaml"):
        (sweep / name).parent.mkdir(parents=True, exist_ok=True)
        (sweep / name).write_text("{}")
    keep = ["bash", str(Path(__file__).parents[1] / "maintainers/gpu/keep.sh"), str(sweep), str(tmp_path / "sweep.tgz")]
    subprocess.run(keep, check=True)
    names = tarfile.open(tmp_path / "sweep.tgz").getnames()
    assert "./results/a.json" in names and not any("compile-cache" in n for n in names)
    assert not (tmp_path / "cache.tgz").exists()
    subprocess.run(keep + [str(tmp_path / "cache.tgz")], check=True)
    cache = sorted(m.name for m in tarfile.open(tmp_path / "cache.tgz").getmembers() if m.isfile())
    assert cache == ["./inductor/fxgraph/x", "./triton/k/k.cubin"]  # what SWEEP_DIR/compile-cache/ holds
    restore = keep[:2] + ["--restore", str(tmp_path / "cache.tgz")]
    subprocess.run(restore + [str(tmp_path / "whole")], check=True)
    assert (tmp_path / "whole/triton/k/k.cubin").read_text() == "{}"


def test_keep_sh_returns_a_cache_over_a_returned_file_s_size_in_parts_that_restore_whole(tmp_path):
    """A compile cache over the size a file may have on its way back comes as CACHE.tgz.00, .01, … (the whole
    CACHE.tgz of an earlier round removed), and `--restore` untars the parts as one archive."""
    import os
    import subprocess

    cubin = os.urandom(5000)  # incompressible: the archive stays over 2 parts of 2048 bytes
    sweep = tmp_path / "sweep"
    (sweep / "compile-cache/triton/k").mkdir(parents=True)
    (sweep / "compile-cache/triton/k/k.cubin").write_bytes(cubin)
    (tmp_path / "cache.tgz").write_text("an earlier round's whole archive")
    keep_sh = str(Path(__file__).parents[1] / "maintainers/gpu/keep.sh")
    subprocess.run(["bash", keep_sh, str(sweep), str(tmp_path / "sweep.tgz"), str(tmp_path / "cache.tgz")],
                   check=True, env={**os.environ, "KEEP_PART_BYTES": "2048"})
    parts = sorted(p.name for p in tmp_path.glob("cache.tgz*"))
    assert parts == ["cache.tgz.00", "cache.tgz.01", "cache.tgz.02"]
    assert all((tmp_path / p).stat().st_size <= 2048 for p in parts)
    subprocess.run(["bash", keep_sh, "--restore", str(tmp_path / "cache.tgz"), str(tmp_path / "restored")], check=True)
    assert (tmp_path / "restored/triton/k/k.cubin").read_bytes() == cubin


def test_keep_sh_every_round_tars_what_finished_and_finishes_the_round_when_stopped(tmp_path):
    """keep.sh --every (beside part.sh's parts on the GPU machine): each round tars every WORK/sweep* directory into
    OUT/NAME.tgz, renamed into place when whole (no temporary file left), so a trial that finished after the first
    round is in a later one; SIGTERM ends the loop after its round."""
    import signal
    import subprocess
    import tarfile
    import time

    work, out = tmp_path / "work", tmp_path / "out"
    for name in ("sweep/results/a.json", "sweep-clip20/results/b.json", "other/results/c.json"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("{}")
    out.mkdir()
    loop = subprocess.Popen(["bash", str(Path(__file__).parents[1] / "maintainers/gpu/keep.sh"), "--every", "0.2",
                             str(work), str(out)])

    def names(tgz: Path) -> list[str]:
        try:
            return tarfile.open(tgz).getnames()
        except (FileNotFoundError, tarfile.TarError, EOFError):
            return []
    try:
        deadline = time.time() + 30
        while "./results/b.json" not in names(out / "sweep-clip20.tgz") and time.time() < deadline:
            time.sleep(0.1)
        (work / "sweep/results/d.json").write_text("{}")  # a trial finishing after the first rounds
        while "./results/d.json" not in names(out / "sweep.tgz") and time.time() < deadline:
            time.sleep(0.1)
    finally:
        loop.send_signal(signal.SIGTERM)
        assert loop.wait(timeout=30) == 0
    assert {"./results/a.json", "./results/d.json"} <= set(names(out / "sweep.tgz"))
    assert sorted(p.name for p in out.iterdir()) == ["sweep-clip20.tgz", "sweep.tgz"]  # not `other`, no .part


def test_keep_sh_every_stops_when_its_caller_is_gone(tmp_path):
    """part.sh killed from outside without its children: the snapshot loop it started notices at its next round
    and stops, instead of writing into $OUT on a machine that stays warm."""
    import os
    import subprocess
    import time

    (tmp_path / "work/sweep").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    keep = Path(__file__).parents[1] / "maintainers/gpu/keep.sh"
    loop = f"bash {keep} --every 0.2 {tmp_path / 'work'} {tmp_path / 'out'} >/dev/null 2>&1 &"
    caller = subprocess.run(["bash", "-c", f"{loop} echo $!; sleep 0.5"], capture_output=True, text=True, timeout=30)
    pid = int(caller.stdout.strip())
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 15)
        raise AssertionError("keep.sh --every outlived its caller")
    assert (tmp_path / "out/sweep.tgz").exists()
