"""Trial checkpoints (scaling/checkpoint.py, spec `checkpoint.every_s`): a run killed mid-way continues from its last
checkpoint and ends exactly as the uninterrupted run; a checkpoint of another configuration is not loaded; a sweep
whose driver is killed resumes its running trial from its checkpoint; a checkpoint holds the state of its save()
call although it is written in the background, a failed write raises, and train() leaves no write running. Tiny
models (width 32, depth 1) on the CPU."""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from test_sweeps import tiny_spec

from deltamup.cli import main
from deltamup.models import ModelConfig
from deltamup.parametrizations import build_model
from deltamup.scaling.checkpoint import Checkpointing, fingerprint, save, sharded, wait
from deltamup.scaling.data import get_task
from deltamup.scaling.data_parallel import Ranks
from deltamup.scaling.train import TrainConfig, TrainResult, loss_function, make_optimizer, optimizer_step, train
from deltamup.sweeps import spec as specs
from deltamup.sweeps import store
from deltamup.sweeps.runner import run_sweep
from deltamup.sweeps.trial import train_and_evaluate, trial_config

HERE = Path(__file__).resolve().parent
MODEL = ModelConfig(kind="gdn", depth=1, heads=2, base_width=32, width=32, vocab_size=256)
CONFIG = TrainConfig(lr=1e-2, steps=40, warmup_steps=4, log_every=4)
HORIZONS = (10, 20, 40)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as a trial of one CPU: runs compare bit for bit only at the same thread count (and one is
    far faster than two for a tiny model on a shared machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class Stop(Exception):
    """Raised at a log boundary to stop a run part-way."""


def run(path: str | None, config: TrainConfig = CONFIG, pause_s: float = 0.0, threads: int | None = None,
        ranks: Ranks | None = None, stop_at: int | None = None) -> tuple[TrainResult, torch.nn.Module, dict, list[int]]:
    """(result, model, extra, steps evaluated) of CONFIG's run of the tiny model on the sample text, checkpointed to
    `path` at every log boundary (None: not checkpointed), sleeping pause_s at each (raising Stop at step stop_at);
    the horizons' "validation loss" (the train loss there) is kept in the checkpoint's extra."""
    if threads is not None:
        torch.set_num_threads(threads)
    model = build_model(MODEL, "gdn-mup", "adamw", seed=0)
    extra: dict[str, float] = {}
    checkpointing = Checkpointing(Path(path), 0.0, fingerprint(config.to_dict()), extra) if path else None
    evaluated: list[int] = []

    def on_eval(step: int, result: TrainResult) -> None:
        extra[f"h{step}"] = result.final_loss
        evaluated.append(step)

    def on_log(step: int, rows: list) -> None:
        time.sleep(pause_s)
        if step + 1 == stop_at:
            raise Stop

    result = train(model, "gdn-mup", config, get_task("sample").train_batches(4, 32, seed=0), on_log=on_log,
                   eval_steps=HORIZONS, on_eval=on_eval, ranks=ranks, checkpointing=checkpointing)
    return result, model, extra, evaluated


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_a_run_killed_mid_way_continues_from_its_checkpoint_bit_for_bit(tmp_path):
    path = tmp_path / "run.pt"
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); from test_checkpoint import run; "
            f"run({str(path)!r}, pause_s=0.1, threads={torch.get_num_threads()})")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not path.exists() and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # a few more log boundaries: the kill lands anywhere, also during a save
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL, "the run ended before it was killed"
    reference, model, extra, _ = run(None)
    resumed, resumed_model, resumed_extra, evaluated = run(str(path))
    assert 0 < resumed.resumed_from_step < CONFIG.steps and reference.resumed_from_step == 0
    assert resumed.losses == reference.losses and [s for s, _, _ in resumed.losses] == list(range(CONFIG.steps))
    assert resumed.grad_norms == reference.grad_norms and resumed.tokens == reference.tokens
    assert same_weights(resumed_model, model)
    assert resumed_extra == extra and len(extra) == len(HORIZONS)  # the horizons before the kill: from the file
    assert evaluated == [h for h in HORIZONS if h > resumed.resumed_from_step]  # and not evaluated again


def test_a_checkpoint_is_loaded_only_by_the_same_configuration(tmp_path, capsys):
    path = tmp_path / "run.pt"
    first, model, extra, _ = run(str(path))  # leaves its checkpoint after the last step
    again, again_model, again_extra, evaluated = run(str(path))
    assert again.resumed_from_step == CONFIG.steps and evaluated == []  # nothing left to train
    assert again.losses == first.losses and again_extra == extra and same_weights(again_model, model)
    other = TrainConfig(**{**CONFIG.to_dict(), "lr": 2e-2})
    reference = run(None, other)[0]
    changed = run(str(path), other)[0]
    assert changed.resumed_from_step == 0 and changed.losses == reference.losses != first.losses
    assert f"checkpoint {path} is of another configuration: removed, training starts from step 0" in \
        capsys.readouterr().err
    path.write_bytes(b"not a checkpoint")
    assert run(str(path), other)[0].losses == reference.losses
    assert f"checkpoint {path} is unreadable" in capsys.readouterr().err
    assert torch.load(path, weights_only=True)["fingerprint"] == fingerprint(other.to_dict())  # saved anew
    # saved by code that groups the parameters otherwise (one parameter moved to the next group): not loaded at all
    state = torch.load(path, weights_only=True)
    groups = state["optimizer"]["param_groups"]
    groups[0]["params"], groups[1]["params"] = groups[0]["params"][:-1], groups[1]["params"] + groups[0]["params"][-1:]
    torch.save(state, path)
    regrouped, regrouped_model, _, _ = run(str(path), other)
    assert regrouped.resumed_from_step == 0 and regrouped.losses == reference.losses
    assert f"checkpoint {path} is of other param groups" in capsys.readouterr().err
    assert same_weights(regrouped_model, run(None, other)[1])


def writers() -> list[threading.Thread]:
    """The checkpoint writer threads alive in this process."""
    return [thread for thread in threading.enumerate() if thread.name.startswith("checkpoint writer")]


def stepped_model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A width-512 model (7.5M parameters: a write takes far longer than changing them) and its AdamW after a step."""
    config = ModelConfig(kind="gdn", depth=2, heads=4, base_width=32, width=512, vocab_size=256)
    model = build_model(config, "gdn-mup", "adamw", seed=0)
    optimizer = make_optimizer(model, "gdn-mup", CONFIG)
    batch = next(get_task("sample").train_batches(4, 32, seed=0))
    optimizer_step(model, optimizer, loss_function(CONFIG)(model, batch), 0, CONFIG)
    return model, optimizer


def test_a_checkpoint_holds_the_state_its_save_was_called_with(tmp_path):
    model, optimizer = stepped_model()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    moments = [{k: v.clone() for k, v in state.items()} for state in optimizer.state.values()]
    checkpointing = Checkpointing(tmp_path / "run.pt", 0.0, "run", {"h10": 1.0})
    save(checkpointing, model, optimizer, TrainResult(steps=1))
    with torch.no_grad():  # the next steps change every tensor in place while the write runs
        torch._foreach_add_([*model.parameters(), *(v for s in optimizer.state.values() for v in s.values())], 1.0)
    checkpointing.extra["h20"] = 2.0
    wait(checkpointing)
    saved = torch.load(checkpointing.path, weights_only=True)
    assert saved["model"].keys() == weights.keys()
    assert all(torch.equal(saved["model"][k], v) for k, v in weights.items())
    saved_moments = list(saved["optimizer"]["state"].values())
    assert len(saved_moments) == len(moments) and all(
        saved_state.keys() == state.keys() and all(torch.equal(saved_state[k], v) for k, v in state.items())
        for saved_state, state in zip(saved_moments, moments))
    assert saved["extra"] == {"h10": 1.0} and saved["step"] == 1


def test_a_failed_write_raises_at_wait_at_the_next_save_and_out_of_train(tmp_path):
    blocker = tmp_path / "file"  # a checkpoint "inside" a regular file: no folder can be made (also as root)
    blocker.write_text("")
    path = blocker / "run.pt"
    model, optimizer = stepped_model()
    checkpointing = Checkpointing(path, 0.0, "run")
    save(checkpointing, model, optimizer, TrainResult(steps=1))  # the write fails in the background
    with pytest.raises(FileExistsError) as failed:
        wait(checkpointing)
    assert f"writing the checkpoint {path}" in failed.value.__notes__
    wait(checkpointing)  # raised once
    save(checkpointing, model, optimizer, TrainResult(steps=1))
    with pytest.raises(FileExistsError):
        save(checkpointing, model, optimizer, TrainResult(steps=2))
    with pytest.raises(FileExistsError):
        run(str(path))
    with pytest.raises(Stop) as stopped:  # saved at step 4, stopped at step 8 before its save: noted on the Stop
        run(str(path), stop_at=8)
    (note,) = stopped.value.__notes__
    assert note.startswith("and writing the checkpoint failed: FileExistsError")
    assert not writers()


@pytest.mark.parametrize("stop_at, last", [(None, CONFIG.steps), (24, 20)])
def test_train_leaves_no_write_running_and_its_last_snapshot_on_disk(tmp_path, stop_at, last):
    """Returned (saved at its last step) or raised (at step 24, after the save at step 20): the file is the last
    snapshot as soon as train() is left."""
    path = tmp_path / "run.pt"
    if stop_at is None:
        result, model, _, _ = run(str(path))
    else:
        with pytest.raises(Stop):
            run(str(path), stop_at=stop_at)
    assert not writers()
    saved = torch.load(path, weights_only=True)
    assert saved["step"] == last and len(saved["result"]["losses"]) == last
    if stop_at is None:
        assert saved["result"]["losses"] == result.losses
        assert all(torch.equal(saved["model"][k], v) for k, v in model.state_dict().items())
    assert [p.name for p in tmp_path.iterdir()] == ["run.pt"]  # no temporary file left


def data_parallel_rank(rank: int, folder: str, sharding: str) -> None:
    """One of two gloo ranks: an uninterrupted run, a run stopped at step 24 and its continuation, and a run at an LR
    that diverges; the losses and the final (full) weights of the first and the third, and where the diverging run
    stopped, written to FOLDER/rank<rank>.pt."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    ranks, path = Ranks(rank, 2, sharding), f"{folder}/run.pt"
    reference, model, _, _ = run(None, ranks=ranks)
    assert sharded(model) == (sharding == "fsdp")  # FSDP's parameters are DTensors, DDP's plain tensors
    with contextlib.suppress(Stop):
        run(path, ranks=ranks, stop_at=24)
    dist.barrier()  # the rerun starts once the stopped run is gone on every rank (as a retry's fresh workers)
    resumed, resumed_model, _, _ = run(path, ranks=ranks)
    weights = [{k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in m.state_dict().items()}
               for m in (model, resumed_model)]  # FSDP's shards gathered (every rank, collectively)
    diverged, _, _, _ = run(None, dataclasses.replace(CONFIG, lr=1e3), ranks=ranks)
    torch.save({"losses": [reference.losses, resumed.losses], "from": resumed.resumed_from_step,
                "weights": weights, "diverged": (diverged.diverged, diverged.diverged_step, diverged.steps)},
               f"{folder}/rank{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.parametrize("sharding", ["ddp", "fsdp"])
def test_data_parallel_ranks_continue_from_the_checkpoint_rank_0_saved(tmp_path, sharding):
    """fsdp: the state every rank gathered and rank 0 wrote is sharded again when the ranks continue from it. A
    diverging run stops every rank at the same loss check (the losses are averaged over the ranks before the check;
    a rank left behind would wait forever in its next collective)."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); from test_checkpoint import data_parallel_rank as r; r"
    children = [subprocess.Popen([sys.executable, "-c", f"{code}({rank}, {str(tmp_path)!r}, {sharding!r})"])
                for rank in (0, 1)]
    try:
        assert [child.wait(timeout=120) for child in children] == [0, 0]
    finally:
        for child in children:
            child.kill()
    for rank in (0, 1):
        done = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert done["from"] == 20  # the last log boundary before the stop (every 4 steps)
        reference, resumed = done["losses"]
        assert resumed == reference and len(resumed) == CONFIG.steps
        assert all(torch.equal(a, b) for a, b in zip(*(w.values() for w in done["weights"]), strict=True))
    stops = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)["diverged"] for rank in (0, 1)]
    assert stops[0] == stops[1] and stops[0][0] and stops[0][1] < stops[0][2] <= 2 * CONFIG.log_every, stops


def test_an_interrupted_driver_keeps_its_running_trials_checkpoint_for_the_resume(cluster, kill_driver, tmp_path):
    """SIGINT (a time limit's signal) stops the sweep gracefully: Ray Tune stops the running trial, which must keep
    its checkpoint (only a pruner's stop, recorded by the driver, drops it), so the resume continues from it."""
    spec_path = tiny_spec(tmp_path, widths=[32], parametrizations=["sp"], lrs=[1e-3], steps=400, log_every=25,
                          checkpoint={"every_s": 0.2}, max_concurrent=1)
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"
    (point,) = spec.grid()
    partial = store.partial_path(out, point.key)
    kill_driver(spec_path, out, until=partial.exists, timeout=120, sig=signal.SIGINT)
    assert not store.record_path(out, point.key).exists(), "interrupted while it ran"
    assert partial.exists(), "the interrupt threw the running trial's checkpoint away"
    assert run_sweep(spec, out, resume=True, progress_every=60)["launched"] == 1
    (record,) = store.read_trials(out)
    assert record.status == "ok" and 0 < record.resumed_from_step < 400
    assert not partial.exists()


@pytest.mark.parametrize("setting, problem", [
    ({"every_s": -1}, "'checkpoint.every_s': must be ≥ 0 seconds"),
    ({"every_s": "often"}, "'checkpoint.every_s': expected a number"),
    ({"every": 60}, "'checkpoint.every': unknown key (known: every_s)"),
    (300, "'checkpoint': expected a mapping"),
])
def test_a_bad_checkpoint_setting_is_one_line_before_anything_starts(tmp_path, capsys, setting, problem):
    out = tmp_path / "out"
    spec_path = tiny_spec(tmp_path, checkpoint=setting)
    assert main(["sweep", str(spec_path), "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("deltamup sweep: error: spec field ") and problem in line, line
    assert not out.exists()


def test_a_killed_driver_resumes_its_running_trial_from_its_checkpoint_and_reruns_no_finished_one(cluster,
                                                                                                 kill_driver,
                                                                                                 tmp_path):
    """Two trials one after the other; the driver is killed once the first has finished and the second has saved a
    checkpoint. The resume leaves the finished trial's files alone and continues the second from its checkpoint."""
    spec_path = tiny_spec(tmp_path, widths=[32], parametrizations=["sp"], lrs=[1e-3, 2e-3], steps=200, log_every=25,
                          checkpoint={"every_s": 0.2}, max_concurrent=1)
    spec = specs.load(spec_path)
    out = tmp_path / "sweep"

    def partials() -> list:
        return [p for p in spec.grid() if store.partial_path(out, p.key).exists()]

    kill_driver(spec_path, out, until=lambda: store.finished_ids(out) and partials(), timeout=120)
    (finished,), (point,) = store.finished_ids(out), partials()
    assert finished != point.key and not store.record_path(out, point.key).exists(), "killed while the second ran"
    before = {p.name: p.read_bytes() for p in store.results_dir(out).glob(f"{finished}*")}
    assert run_sweep(spec, out, resume=True, progress_every=60)["launched"] == 1
    assert {p.name: p.read_bytes() for p in store.results_dir(out).glob(f"{finished}*")} == before  # untouched
    records = {r.trial_id: r for r in store.read_trials(out)}
    assert sorted(records) == sorted(p.key for p in spec.grid()) and {r.status for r in records.values()} == {"ok"}
    assert [records[finished].run, records[point.key].run] == [1, 2]
    record = records[point.key]
    assert record.steps == 200 and record.attempts == 1
    assert 0 < record.resumed_from_step < 200 and record.resumed_from_step % 25 == 0  # a log boundary
    partial = store.partial_path(out, point.key)
    curve = pq.read_table(store.curve_path(out, point.key)).to_pydict()
    assert curve["step"] == list(range(200))  # every step once: the steps before the checkpoint from the file
    assert not any(partial.parent.iterdir())  # removed once the row was written
    # the trial as one uninterrupted run, here (one thread, as the trial's one CPU)
    cfg = trial_config(spec, point, out, run=1) | {"checkpoint": {"every_s": 0}}
    result, val_losses, _, _ = train_and_evaluate(cfg, torch.device("cpu"), lambda *_, **__: None, None)
    assert curve["train_loss"] == [loss for _, loss, _ in result.losses]
    assert {c: record.extra[c] for c in val_losses} == val_losses and len(val_losses) == 3  # every horizon
