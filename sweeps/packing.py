"""GPU packing: how much of a GPU one trial asks Ray for, from the model's size and a memory estimate.

Ray's fractional GPUs are bookkeeping only (co-located trials share the memory for real), so "auto" asks for the
memory a trial needs, rounded up to 1/2^k of a GPU, and a whole GPU for large models, where sharing buys nothing.
"""
from __future__ import annotations

import dataclasses
import math
import os
from functools import cache

import torch

from deltamup.models import DeltaLM, ModelConfig

from .gpu_monitor import memory_total_mib
from .spec import ResourceSpec, SpecError, SweepSpec

DEFAULT_GPU_MEMORY_GB = 80.0
CUDA_OVERHEAD_BYTES = 1.5e9        # CUDA context, allocator slack, kernels' workspaces
# Bytes a trial holds for autograd per token, layer and unit of width (DeltaProduct: per micro-token):
ACTIVATION_BYTES_PER_WIDTH = 270   # measured on the CPU (fp32, torch chunk kernel; 260–290 at widths 128–512); also
                                   # taken for GPU trials in fp32 or eager, which no run has measured
COMPILED_BF16_ACTIVATION_BYTES = 100  # compiled bf16 trials on GPUs: with the rest of the estimate, at or above what
                                      # the studies' trials held (nvidia-smi: 0.52–0.96 of it in 107 of 109 runs at
                                      # widths 256–2048, depths 4 and 8; benchmarks/trial-memory.md)
OPTIMIZER_STATE_BYTES = {"adamw": 8, "sgd": 4}  # fp32 moments per parameter


@cache
def parameter_count(config: ModelConfig) -> int:
    """Parameters of the model at config.width, counted on the meta device (no memory)."""
    with torch.device("meta"):
        model = DeltaLM(config)
    return sum(p.numel() for p in model.parameters())


def activation_bytes(train: dict, on_gpu: bool) -> float:
    """Activation bytes per token, layer and unit of width of a trial with these TRAIN_KEYS settings (the spec's
    `train`: bf16 defaults on, compile off) on a GPU or a CPU."""
    compiled_bf16 = train.get("bf16", True) and train.get("compile", False) not in (False, None)
    return COMPILED_BF16_ACTIVATION_BYTES if on_gpu and compiled_bf16 else ACTIVATION_BYTES_PER_WIDTH


def trial_memory_bytes(config: ModelConfig, optimizer: str, batch_size: int, seq_len: int, workers: int = 1,
                       sharding: str = "ddp", activation: float = ACTIVATION_BYTES_PER_WIDTH) -> float:
    """Estimated peak GPU memory of one training trial (of each of its `workers` data-parallel workers, each on
    batch_size / workers rows): weights, grads, optimizer state, activations (`activation` bytes per token, layer
    and unit of width: activation_bytes), logits. sharding "fsdp" splits the weights, grads and optimizer state over
    the workers, but gathers whole those of the root (embedding, readout) and of two blocks (the one computing and
    the next, prefetched) at a time."""
    params = parameter_count(config)
    states = params * (4 + 4 + OPTIMIZER_STATE_BYTES[optimizer])
    if sharding == "fsdp" and workers > 1:
        block = parameter_count(dataclasses.replace(config, depth=2)) - parameter_count(
            dataclasses.replace(config, depth=1))
        root = params - config.depth * block
        states = states / workers + (root + 2 * block) * (4 + 4)
    batch_size = math.ceil(batch_size / workers)
    tokens = batch_size * seq_len * config.householder
    activations = tokens * config.depth * config.width * activation
    logits = batch_size * seq_len * config.vocab_size * 10  # bf16 logits, fp32 copy and its gradient
    return CUDA_OVERHEAD_BYTES + states + activations + logits


def gpu_fraction(config: ModelConfig, optimizer: str, batch_size: int, seq_len: int, resources: ResourceSpec,
                 gpu_memory_bytes: float, activation: float = ACTIVATION_BYTES_PER_WIDTH) -> float:
    """The GPU share "auto" asks for: the memory estimate (with 10% headroom) as a fraction of one GPU, rounded
    up to 1/2^k and at least resources.min_gpu_fraction; 1 (a trial trains on one device) for models of
    resources.whole_gpu_params or more and where the estimate exceeds a GPU."""
    if parameter_count(config) >= resources.whole_gpu_params:
        return 1.0
    need = 1.1 * trial_memory_bytes(config, optimizer, batch_size, seq_len, activation=activation) / gpu_memory_bytes
    rounded = 2.0 ** math.ceil(math.log2(need))
    return min(1.0, max(resources.min_gpu_fraction, rounded))


def trial_gpus(spec: SweepSpec, width: int, optimizer: str, cluster_gpus: float, gpu_memory_bytes: float) -> float:
    """GPUs one trial at `width` asks for: the spec's number or per-width mapping, or "auto" (0 without GPUs)."""
    gpu = spec.resources.gpu
    if isinstance(gpu, dict):
        return float(gpu[width])
    if gpu != "auto":
        return float(gpu)
    if cluster_gpus <= 0:
        return 0.0
    return gpu_fraction(spec.model_config(width), optimizer, spec.batch_size, spec.seq_len, spec.resources,
                        gpu_memory_bytes, activation_bytes(spec.train, on_gpu=True))


def warmup_gpus(spec: SweepSpec, width: int, optimizer: str, trial_share: float, gpu_memory_bytes: float) -> float:
    """GPUs the compile warm-up's one step at `width` asks for (sweeps.warmup): with "auto", what its memory estimate
    needs, even where the trial gets a whole GPU (compiling is mostly CPU work: graphs of several whole-GPU widths
    then compile side by side on one GPU); otherwise, and without GPUs, the trial's own share."""
    if spec.resources.gpu != "auto" or trial_share <= 0:
        return trial_share
    one_step = dataclasses.replace(spec.resources, whole_gpu_params=math.inf)
    return gpu_fraction(spec.model_config(width), optimizer, spec.batch_size, spec.seq_len, one_step,
                        gpu_memory_bytes, activation_bytes(spec.train, on_gpu=True))


def gpu_memory_bytes(resources: ResourceSpec) -> float:
    """Memory of one GPU: the spec's gpu_memory_gb, else what nvidia-smi says the driver's first GPU has (on a
    cluster, give gpu_memory_gb when the driver has none), else 80 GB."""
    if resources.gpu_memory_gb is not None:
        return resources.gpu_memory_gb * 1e9
    mib = memory_total_mib()
    return mib * 2**20 if mib is not None else DEFAULT_GPU_MEMORY_GB * 1e9


def host_memory_bytes() -> float:
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_memory(spec: SweepSpec, local: bool) -> None:
    """SpecError (before Ray starts) for a width whose trial's memory estimate exceeds what one trial can have: one
    GPU's memory where the spec gives trials GPUs (gpu_memory_bytes), else this machine's memory (a local sweep
    without GPUs trains on the CPU). A data-parallel width's estimate is one worker's (resources.workers_per_trial,
    resources.sharding). Off with limits.check_memory: false."""
    if not spec.limits.check_memory:
        return
    gpu = spec.resources.gpu
    if isinstance(gpu, dict):
        on_gpu = any(share > 0 for share in gpu.values())
    elif gpu == "auto":  # a cluster given by --address may have GPUs the driver does not see
        on_gpu = not local or spec.resources.gpu_memory_gb is not None or memory_total_mib() is not None
    else:
        on_gpu = gpu > 0
    capacity, where = ((gpu_memory_bytes(spec.resources), "one GPU") if on_gpu else
                       (host_memory_bytes(), "this machine's memory"))
    for i, width in enumerate(spec.widths):
        for optimizer in spec.optimizers:
            workers = spec.resources.workers(width)
            need = trial_memory_bytes(spec.model_config(width), optimizer, max(spec.batch_size,
                                      (spec.eval.batch_size or 0) * workers), spec.seq_len, workers,
                                      spec.resources.sharding_of(width), activation_bytes(spec.train, on_gpu))
            if need > capacity:
                each = f" on each of its {workers} {spec.resources.sharding_of(width)} workers" if workers > 1 else ""
                raise SpecError(f"widths[{i}]", f"a width-{width} {optimizer} trial needs about {need / 1e9:,.0f} GB"
                                f"{each} (sweeps/packing.py's estimate), more than the {capacity / 1e9:,.0f} GB of "
                                f"{where}: lower width, batch or seq_len, shard it (resources.sharding: fsdp, or "
                                f"{{{width}: fsdp}}), or --set limits.check_memory=false")
