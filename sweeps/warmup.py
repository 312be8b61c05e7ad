"""Compile a sweep's graphs before its trials start (train.compile on): one training step per distinct graph, each in
a Ray task with its trial's resources, into the sweep's compile cache (DIR/compile-cache, scaling.compile_cache), so
that every trial finds its graph on disk instead of compiling it side by side with the trials that start with it.

What a trial's compiled graph depends on (graph_key): the model config at its width, the output norm's eps factor
(readout_eps, a float constant of the graph: GDN-µP with the √d written as the norm's eps, `gdn-mup-normeps`, is a
graph of its own), the batch shape, bf16 and the device kind. The forward multipliers are 0-d buffers of the model,
inputs of the graph, so SP, naive µP and GDN-µP at one width, and every output_mult or embed_mult of a swept hparams
axis, share one graph. The learning rate, the seed, the optimizer's settings and the schedule are not in it: the
optimizer step is not compiled. Data-parallel trials (resources.workers_per_trial > 1) are not warmed: DDP or FSDP
wrapping changes the graph; they compile their own.

A graph warmed once is stamped in the cache (DIR/compile-cache/deltamup-warmed/, a name that changes with the graph
key, the code fingerprint (sources, torch, Triton: scaling.code), the device's name and the machine's boot
(machine_boot)); a later run of the sweep on the same code, device and machine skips it, and its trials load it from
the cache as they would after a warm-up. A carried cache on a fresh machine warms again: there, a skipped warm-up put
45.8 s into the first trial's first step where the warm-up takes 13–36 s and leaves 3–6 s
(docs/sweeps-compile.md). A stamp whose graph the cache has lost costs a compile in the trials, never a wrong
result.

    warm_graphs(spec, configs)   # in the driver, Ray initialised: {"graphs", "seconds", "failed", "stamped"}
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import torch

from deltamup.console import duration
from deltamup.models import ModelConfig
from deltamup.parametrizations import BaseHparams, multipliers
from deltamup.scaling.code import code_fingerprint
from deltamup.scaling.compile_cache import use_cache
from deltamup.scaling.train import train

from . import store
from .packing import gpu_memory_bytes, warmup_gpus
from .spec import SweepSpec
from .trial import build_trial, placement, sweep_dir
from .tuner import trial_resources


def graph_key(cfg: dict[str, Any], on_gpu: bool) -> tuple:
    """What the compiled graph of trial config `cfg` (trial.trial_config) depends on (module docstring)."""
    point, model = cfg["point"], ModelConfig(**cfg["model"])
    factors = multipliers(point["parametrization"], point["optimizer"], model.width_mult, model.width,
                          BaseHparams.of(point.get("hparams", {})))
    return (json.dumps(cfg["model"], sort_keys=True), factors.readout_eps, cfg["batch_size"], cfg["seq_len"],
            cfg["train"]["bf16"], on_gpu)


def machine_boot() -> str:
    """This machine since its last boot: Linux's boot id, else the host name (a reboot then keeps its stamps)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


def stamp_path(cfg: dict[str, Any], on_gpu: bool) -> Path:
    """Where the cache records that trial config `cfg`'s graph was warmed into it on this machine (the module
    docstring)."""
    device = (torch.cuda.get_device_name() if torch.cuda.is_available() else "a GPU") if on_gpu else "cpu"
    text = json.dumps([list(graph_key(cfg, on_gpu)), code_fingerprint(), device, machine_boot()])
    return (store.compile_cache_dir(sweep_dir(cfg)) / "deltamup-warmed"
            / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json")


def warm_graph(cfg: dict[str, Any]) -> dict[str, Any]:
    """Trains trial `cfg`'s model one step in this process (a Ray task), compiling its graph into the sweep's
    cache, and stamps it there; returns the step's first_step_seconds and the cache lookups
    (compile_cache.cache_counts)."""
    use_cache(store.compile_cache_dir(sweep_dir(cfg)))
    threads, device, _ = placement()
    torch.set_num_threads(threads)
    model, _, train_config, batches = build_trial(cfg, device)
    result = train(model, cfg["point"]["parametrization"], dataclasses.replace(train_config, steps=1), batches,
                   device=device)
    on_gpu = device.type == "cuda"
    stamp = stamp_path(cfg, on_gpu)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"trial_id": cfg["trial_id"], "graph_key": list(graph_key(cfg, on_gpu)),
                                 "first_step_seconds": result.first_step_seconds}) + "\n")
    return {"first_step_seconds": result.first_step_seconds, **result.compile_cache}


def warm_graphs(spec: SweepSpec, configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Compiles each distinct graph among the one-device trial configs once, in parallel Ray tasks with the trials'
    CPUs and the GPU share their one step's memory needs (packing.warmup_gpus: a width whose trials hold a whole GPU
    compiles beside the others; at most spec.max_concurrent at once; each task's process exits after it, freeing its
    GPU memory), in the order of `configs`, but for those stamped in the cache before (the module docstring). A
    graph that fails is reported and left to its trials. Returns {"graphs": distinct graphs warmed, "seconds": wall
    time, "failed": graphs that failed, "stamped": distinct graphs skipped as warmed before}."""
    import ray

    _, bundles = trial_resources(spec)
    memory = gpu_memory_bytes(spec.resources)
    firsts: dict[tuple, tuple[dict[str, Any], dict[str, float]]] = {}
    for cfg in (c for c in configs if c["workers"] == 1):
        width, optimizer = cfg["point"]["width"], cfg["point"]["optimizer"]
        bundle = bundles[(width, optimizer)]
        step = {"CPU": bundle["CPU"], "GPU": warmup_gpus(spec, width, optimizer, bundle["GPU"], memory)}
        firsts.setdefault(graph_key(cfg, bundle["GPU"] > 0), (cfg, step))
    stamped = {key for key, (cfg, _) in firsts.items() if stamp_path(cfg, key[-1]).is_file()}
    if stamped:
        print(f"compile warm-up: {len(stamped)} graph(s) warmed in this cache before (same code, torch, Triton, "
              f"device and machine): not again", flush=True)
    firsts = {key: first for key, first in firsts.items() if key not in stamped}
    began = time.time()
    task = ray.remote(max_calls=1, max_retries=0)(warm_graph)
    queue, running, seconds, failed = list(firsts.values()), {}, [], 0
    while queue or running:
        while queue and len(running) < (spec.max_concurrent or len(firsts)):
            cfg, bundle = queue.pop(0)
            running[task.options(num_cpus=bundle["CPU"], num_gpus=bundle["GPU"]).remote(cfg)] = cfg
        (done,), _ = ray.wait(list(running))
        cfg = running.pop(done)
        try:
            seconds.append(ray.get(done)["first_step_seconds"])
        except ray.exceptions.RayError as e:
            failed += 1
            print(f"compile warm-up of {cfg['trial_id']} failed (its trials will compile it): "
                  f"{str(e).strip().splitlines()[-1]}", flush=True)
    took = time.time() - began
    if firsts:
        steps = f" (first steps {min(seconds):.0f}–{max(seconds):.0f} s)" if seconds else ""
        print(f"compile warm-up: {len(firsts)} graph(s) in {duration(took)}{steps}, {failed} failed", flush=True)
    return {"graphs": len(firsts), "seconds": took, "failed": failed, "stamped": len(stamped)}
