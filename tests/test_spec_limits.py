"""Trial ids that cannot collide, and sizes refused before Ray starts (spec.limits, packing.check_memory, name)."""
from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from deltamup.sweeps import packing
from deltamup.sweeps import spec as specs
from deltamup.sweeps.runner import run_sweep
from deltamup.sweeps.trial import trial_config

VALID = {"name": "t", "widths": [32, 64], "lrs": [1e-3, 1e-2], "steps": 4, "batch_size": 2, "seq_len": 16,
         "model": {"kind": "gdn", "depth": 1, "heads": 2, "base_width": 32}, "resources": {"gpu": 0}}


def test_distinct_lrs_get_distinct_ids() -> None:
    """The id once formatted the LR with 6 digits: 0.001 and 0.0010000001 were one trial."""
    lrs = [1e-3, 0.0010000001, math.nextafter(1e-3, 1.0), 2.0 ** -9, 0.00195312]
    keys = {specs.TrialPoint("sp", "adamw", 32, lr, 0).key for lr in lrs}
    assert len(keys) == len(lrs)
    assert specs.TrialPoint("sp", "adamw", 32, 0.003, 0).key == "sp.adamw.w32.lr0.003.s0"  # short where it can be


@pytest.mark.parametrize("lrs", [[0.001, 0.0010000001], [0.01, 0.001, 0.00100000049]])
def test_near_equal_lrs_are_refused(lrs: list[float]) -> None:
    with pytest.raises(specs.SpecError, match=r"'lrs'.*agree to 6 significant digits") as e:
        specs.parse({**VALID, "lrs": lrs})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("change, limit", [
    ({"widths": [32, 10_000_000]}, "limits.max_width"),
    ({"lrs": {"log_range": [1e-4, 1e-1], "num": 600_000}}, "limits.max_trials"),
    ({"steps": 10**9}, "limits.max_steps"),
    ({"batch_size": 10_000, "seq_len": 10_000}, "limits.max_batch_tokens"),
    ({"model": {"kind": "gdn", "depth": 100_000, "heads": 2, "base_width": 32}}, "limits.max_depth"),
    ({"model": {"kind": "gdn", "depth": 1, "heads": 10**6, "base_width": 32}}, "limits.max_heads"),
])
def test_sizes_beyond_the_limits_are_refused_at_once_naming_the_override(change: dict, limit: str) -> None:
    start = time.perf_counter()
    with pytest.raises(specs.SpecError, match=f"--set {limit}=N") as e:
        specs.parse({**VALID, **change})
    assert time.perf_counter() - start < 5 and len(str(e.value)) < 300


def test_raising_a_limit_lets_the_spec_through() -> None:
    raw = {**VALID, "widths": [32, 70_000]}
    with pytest.raises(specs.SpecError, match="max_width"):
        specs.parse(raw)
    assert specs.parse({**raw, "limits": {"max_width": 100_000}}).widths == (32, 70_000)


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "a/b", "..", "x" * 10_000_000])
def test_name_is_a_plain_folder_name(name: str) -> None:
    with pytest.raises(specs.SpecError, match="'name'") as e:
        specs.parse({**VALID, "name": name})
    assert len(str(e.value)) < 300


def test_a_trial_too_large_for_the_declared_resources_is_refused_before_anything(tmp_path) -> None:
    """A CPU sweep (gpu: 0) whose width-60000 trial would need hundreds of GB: refused before Ray or any file."""
    spec = specs.parse({**VALID, "widths": [32, 60_000]})
    out = tmp_path / "sweep"
    with pytest.raises(specs.SpecError, match=r"widths\[1\].*GB.*--set limits.check_memory=false"):
        run_sweep(spec, out)
    assert not out.exists()
    with pytest.raises(specs.SpecError, match=r"widths\[1\].*one GPU"):  # 0.5 of an 80 GB GPU: still one GPU
        run_sweep(specs.parse({**VALID, "widths": [32, 60_000], "resources": {"gpu": 0.5, "gpu_memory_gb": 80}}), out)
    assert not out.exists()


@pytest.mark.parametrize("workers, sharding, fits", [(8, "fsdp", True), (2, "fsdp", False), (8, "ddp", False)])
def test_a_width_that_fits_only_sharded_is_checked_per_worker(workers: int, sharding: str, fits: bool) -> None:
    """11.3B parameters (about 180 GB of weights, grads and AdamW moments) on 80 GB GPUs: DDP replicates that state
    on every worker, FSDP splits it (28.7 GB a worker over 8, 99 GB over 2)."""
    spec = specs.parse({**VALID, "widths": [4096], "batch_size": 8, "model": {**VALID["model"], "depth": 48},
                        "resources": {"gpu": 1, "gpu_memory_gb": 80, "workers_per_trial": workers,
                                      "sharding": sharding}})
    if fits:
        packing.check_memory(spec, local=False)
        return
    with pytest.raises(specs.SpecError, match=rf"widths\[0\].*GB on each of its {workers} {sharding} workers .*more "
                                              r"than the 80 GB of one GPU.*resources.sharding: fsdp") as e:
        packing.check_memory(spec, local=False)
    assert not str(e.value).endswith("...")  # the whole line fits SpecError's length
    assert "{4096: fsdp}" in str(e.value)


def test_sharding_per_width_shards_only_the_widths_it_names(tmp_path: Path) -> None:
    """FSDP for the width a replica does not fit, DDP (the default) for the rest: each width is checked, and each
    trial trains, with its own."""
    resources = {"gpu": 1, "gpu_memory_gb": 80, "workers_per_trial": 8, "sharding": {4096: "fsdp"}}
    spec = specs.parse({**VALID, "widths": [256, 4096], "batch_size": 8, "model": {**VALID["model"], "depth": 48},
                        "resources": resources})
    packing.check_memory(spec, local=False)  # 4096 fits sharded over 8; 256 fits replicated
    assert {p.width: trial_config(spec, p, tmp_path, run=1)["sharding"] for p in spec.grid()} == \
        {256: "ddp", 4096: "fsdp"}
    with pytest.raises(specs.SpecError, match=r"widths\[1\].*on each of its 8 ddp workers"):
        packing.check_memory(specs.parse({**VALID, "widths": [256, 4096], "batch_size": 8,
                                          "model": {**VALID["model"], "depth": 48},
                                          "resources": {**resources, "sharding": {256: "fsdp"}}}), local=False)
    for bad, says in (({512: "fsdp"}, r"resources.sharding.512': width 512 is not in widths \[256, 4096\]"),
                      ({4096: "zero3"}, r"resources.sharding.4096': expected one of ddp, fsdp, got 'zero3'")):
        with pytest.raises(specs.SpecError, match=says):
            specs.parse({**VALID, "widths": [256, 4096], "batch_size": 8, "resources": {**resources, "sharding": bad}})
