"""benchmarks/kernel_resources.py: every pass of the op compiled for Hopper on a machine without a GPU, through
`tuning.compiling()`, and the CTAs an H200 SM holds by registers, shared memory and warps."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kernel_resources import ctas_per_sm, waves

ROOT = Path(__file__).resolve().parents[1]
PASSES = {"chunk_kkt_solve_fwd_kernel", "chunk_wu_aqk_fwd_kernel", "chunk_state_fwd_kernel", "chunk_o_fwd_kernel",
          "chunk_dv_local_bwd_kernel", "chunk_state_bwd_kernel", "chunk_dqk_bwd_kernel", "chunk_wy_bwd_kernel"}


def script(*args: str, interpret: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([sys.executable, "benchmarks/kernel_resources.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_pass_of_forward_and_backward_compiles_for_hopper_and_nothing_runs(tmp_path):
    """Width 256's shape (narrow heads: one candidate a pass). Nothing is launched: a launch on this machine's
    compile-only driver would fail (it has no launcher), so a finished run means `compiling` ran no kernel."""
    pytest.importorskip("triton.backends.nvidia")
    out = tmp_path / "resources.md"
    r = script("--only", "0", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.read_text().splitlines()
            if line.startswith("| `")]
    assert {row[0].strip("`") for row in rows} == PASSES
    for name, config, regs, stack, smem, ctas, programs, rounds, mma, local, sass in rows:
        assert 0 < int(regs) <= 255 and float(smem) > 0 and int(sass) > 0, name
        assert "warps=" in config and int(stack) >= 0 and int(local) >= 0, name
        assert int(mma) > 0, f"{name} has no tensor-core instruction"  # every pass multiplies in dots
        assert ctas == "does not fit" or int(ctas) >= 1
        assert int(programs) > 0 and (ctas == "does not fit" or int(rounds) >= 1), name
    state = {row[6] for row in rows if row[0] == "`chunk_state_fwd_kernel`"}
    assert state == {str(64 // 16 * 6 * 8)}  # V 64 in blocks of 16, 6 heads, batch 8: the grid of the walk
    assert "8, 2048, 6, 32, 64 (width 256)" in out.read_text()


def test_bad_shape_and_interpreter_fail_in_one_line_before_compiling():
    r = script("--only", "99")
    assert r.returncode != 0 and r.stderr.strip().splitlines() == ["kernel_resources: no shape 99; there are 8 (0–7)"]
    r = script("--only", "0", interpret=True)
    assert r.returncode != 0 and "unset it to compile them" in r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("regs, warps, smem, want", [
    (128, 4, 16 * 1024, 4),     # registers: 128 × 32 × 4 = 16K of 64K
    (255, 4, 48 * 1024, 2),     # 255 rounds to 256 a thread: 32K a CTA
    (64, 4, 100 * 1024, 2),     # shared memory: 2 × (100 + 1) KB of 228
    (32, 2, 1024, 32),          # the 32-CTA limit
    (32, 8, 1024, 8),           # the 64-warp limit
    (64, 4, 228 * 1024, 0),     # over a CTA's 227 KB: does not fit
])
def test_ctas_per_sm_follows_hopper_limits(regs, warps, smem, want):
    assert ctas_per_sm(dict(regs=regs, warps=warps, smem=smem)) == want


def test_waves_are_the_rounds_the_sms_take():
    """192 programs (width 1024's walk) on 132 SMs: two rounds at one an SM, one at two; unknown or unfit: "–"."""
    assert (waves(192, 1), waves(192, 2), waves(132, 1), waves(None, 2), waves(192, 0)) == ("2", "1", "1", "–", "–")
