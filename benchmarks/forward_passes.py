"""The training forward pass by pass, ours against fla's counterparts, from a kernels.py report's per-kernel lists.

Each of our passes is set beside the fla kernels that do the same work: the q/k norm; the per-chunk solve (fla's
kkt + inverse kernels and its gate cumsum, which ours does in the solve pass); w and u (ours also writes Aqk there,
fla's output pass forms it); the state walk and the output together (ours fuses the output into the walk at some
shapes); fla's ATen elementwise kernels apart. The last column is how far ours is above 0.8 of fla's forward.

    python3 benchmarks/forward_passes.py benchmarks/logs/kernels-h100-blockwise-2026-12-05.md [MORE.md …]

A shape in a later report replaces the same shape of an earlier one.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

PASSES = {  # pass: (our kernels, fla's kernels), by name prefix
    "q/k norm": (("l2norm_fwd",), ("l2norm_fwd",)),
    "solve (+ gate cumsum)": (("chunk_kkt_solve_fwd",),
                              ("chunk_gated_delta_rule_fwd_kkt_solve", "chunk_scaled_dot_kkt_fwd",
                               "merge_16x16_to_64x64_inverse", "chunk_local_cumsum")),
    "w, u (+ Aqk)": (("chunk_wu_aqk_fwd",), ("recompute_w_u_fwd",)),
    "state walk + output": (("chunk_state_fwd", "chunk_o_fwd"),
                            ("chunk_gated_delta_rule_fwd_kernel_h", "chunk_gated_delta_product_fwd_kernel_h",
                             "chunk_fwd_kernel_o")),
    "ATen elementwise": ((), ("void at::native",)),
}
SHAPE = re.compile(r"^- ([0-9][0-9, =a-z_]*): ours bf16")
KERNELS = re.compile(r"^  - (ours|fla) fwd kernels \(ms\): (.*)")


def forward_kernels(report: str) -> dict[str, dict[str, dict[str, float]]]:
    """shape -> {"ours"/"fla": {kernel: ms}} from a report's "fwd kernels" lines (the training forward)."""
    shapes: dict[str, dict[str, dict[str, float]]] = {}
    shape = None
    for line in report.splitlines():
        if m := SHAPE.match(line):
            shape = m.group(1)
            shapes[shape] = {}
        elif (m := KERNELS.match(line)) and shape is not None:
            shapes[shape][m.group(1)] = {k: float(v) for k, v in re.findall(r"`([^`]+)` ([0-9.]+)", m.group(2))}
    return {s: k for s, k in shapes.items() if "ours" in k and "fla" in k}


def by_pass(kernels: dict[str, float], side: int) -> dict[str, float]:
    """{pass: ms} for one side (0 ours, 1 fla); a kernel no pass names raises."""
    sums = dict.fromkeys(PASSES, 0.0)
    for name, ms in kernels.items():
        hits = [p for p, names in PASSES.items() if name.startswith(names[side])]
        if len(hits) != 1:
            raise ValueError(f"kernel {name!r} matches {len(hits)} passes")
        sums[hits[0]] += ms
    return sums


def main(paths: list[str]) -> None:
    if not paths:
        raise SystemExit("usage: python3 benchmarks/forward_passes.py REPORT.md [MORE.md …]")
    shapes: dict[str, dict[str, dict[str, float]]] = {}
    for path in paths:
        try:
            shapes.update(forward_kernels(Path(path).read_text()))
        except OSError as e:
            raise SystemExit(f"forward_passes.py: {e}") from None
    try:
        rows = [(shape, by_pass(sides["ours"], 0), by_pass(sides["fla"], 1)) for shape, sides in shapes.items()]
    except ValueError as e:
        raise SystemExit(f"forward_passes.py: {e}") from None
    print("| shape (B, T, H, K, V) | fwd ours / fla (ms) | ratio | "
          + " | ".join(f"{p}, ours / fla" for p in PASSES) + " | ours above 0.8 (ms) |")
    print("| --- " * (len(PASSES) + 4) + "|")
    for shape, ours, fla in rows:
        total_o, total_f = sum(ours.values()), sum(fla.values())
        cells = [f"{ours[p]:.3f} / {fla[p]:.3f}" for p in PASSES]
        print(f"| {shape} | {total_o:.3f} / {total_f:.3f} | {total_o / total_f:.2f} | " + " | ".join(cells)
              + f" | {total_o - 0.8 * total_f:+.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
