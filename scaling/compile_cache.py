"""torch.compile's on-disk caches: which folder a process uses, and what its compilations found there.

What survives a process (all under one folder once use_cache has named it): Inductor's FX graph cache (the generated
code of each forward and backward graph), AOTAutograd's cache (the traced forward/backward pair; a graph that enters
autocast bypasses it, so scaling.train keeps autocast outside the compiled region) and Triton's cache (compiled GPU
binaries: Inductor's kernels and deltamup's own). Dynamo's tracing is never cached on disk: a new process traces the
model again, then finds its graphs. Within a process the compiled code stays in memory: another model of the same
shape (whatever its forward multipliers, buffers that are inputs of the graph) runs it without compiling
(docs/sweeps-compile.md).
"""
from __future__ import annotations

import os
from pathlib import Path

INDUCTOR, TRITON = "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"
# torch._dynamo.utils.counters entries: (group, key) per name
COUNTERS = {"fx_hit": ("inductor", "fxgraph_cache_hit"), "fx_miss": ("inductor", "fxgraph_cache_miss"),
            "aot_hit": ("aot_autograd", "autograd_cache_hit"), "aot_miss": ("aot_autograd", "autograd_cache_miss"),
            "aot_bypass": ("aot_autograd", "autograd_cache_bypass")}


def cache_env(folder: str | Path) -> dict[str, str]:
    """The environment that puts Inductor's and Triton's caches under `folder` (inductor/ and triton/)."""
    folder = Path(folder).resolve()
    return {INDUCTOR: str(folder / "inductor"), TRITON: str(folder / "triton")}


def use_cache(folder: str | Path) -> None:
    """Makes this process (and the processes it starts) compile into and load from `folder`. Both libraries read the
    variables when they look something up, so this works at any time before the compilation it should serve."""
    os.environ.update(cache_env(folder))


def cache_counts() -> dict[str, int]:
    """This process's compile-cache lookups so far: FX graph cache hits and misses (one per forward or backward graph
    compiled), AOTAutograd cache hits, misses and bypasses (one per compiled graph pair)."""
    from torch._dynamo.utils import counters

    return {name: counters[group][key] for name, (group, key) in COUNTERS.items()}


def counts_since(before: dict[str, int]) -> dict[str, int]:
    """cache_counts() minus an earlier snapshot: the lookups made in between."""
    return {name: count - before[name] for name, count in cache_counts().items()}
