"""Coordinate checks against the theory (parametrizations/tables.py `expect`, derived in docs/theory.md), on the CPU
at widths 128…1024 with the CLI's defaults (8 × 64 tokens, AdamW lr 1e-2, SGD lr 0.03, 5 steps, depth 2)."""
import polars as pl
import pytest

from deltamup.models import ModelConfig
from deltamup.scaling import coord_check

WIDTHS = (128, 256, 512, 1024)

# Probe/steps whose slope at these widths falls outside the theory's band, measured (seed 0) and explained in
# docs/theory.md ("Where the measurement disagrees"). Everything else must agree; a new disagreement fails here.
# Entries marked "edge" measured inside the band by less than 0.01 (e.g. −0.398 against −0.4): listed so that another
# CPU's floating-point rounding cannot flip them into a spurious failure.
KNOWN_DEVIATIONS = {
    ("gdn", "gdn-mup", "adamw"): {"block1.mlp_out": {2, 3, 4, 5}, "block1.readout": {1, 5},  # 5: edge
                                  "block0.beta_pre": {2, 3, 4, 5},  # 2: edge
                                  "block1.state": {5}},
    ("gdn", "gdn-mup", "sgd"): {"block1.readout": {1, 2, 3, 4}, "block0.alpha_pre": {2}, "block0.mixer_out": {5},
                                "block0.beta_pre": {1}},  # edge
    ("deltaproduct", "gdn-mup", "adamw"): {"block0.mixer_out": {2, 3}, "block1.alpha_pre": {2},
                                           "block1.mlp_out": {3}, "block1.readout": {1}},
}


def measure(kind, parametrization, optimizer, steps=5):
    check = coord_check.CoordCheck(ModelConfig(kind=kind, depth=2, householder=2 if kind == "deltaproduct" else 1),
                                   parametrization, optimizer, WIDTHS, steps=steps, device="cpu")
    return coord_check.fit_slopes(coord_check.run(check), parametrization, optimizer)


def disagreements(slopes: pl.DataFrame) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for row in slopes.filter(pl.col("ok") == False).iter_rows(named=True):  # noqa: E712
        out.setdefault(row["probe"], set()).add(row["step"])
    return out


@pytest.mark.parametrize("kind,optimizer,steps", [("gdn", "adamw", 5), ("gdn", "sgd", 5), ("deltaproduct", "adamw", 3)])
def test_gdn_mup_probes_follow_the_theory(kind, optimizer, steps):
    slopes = measure(kind, "gdn-mup", optimizer, steps)
    judged = slopes.filter(pl.col("ok").is_not_null())
    # every probe the theory speaks about is judged, in every block, at every step
    for probe in ("embed", "logits", "block0.q", "block1.k", "block0.v", "block1.state", "block0.readout",
                  "block1.alpha_pre", "block0.beta_pre", "block1.mixer_out", "block0.mlp_out", "update.hidden",
                  "update.gate_matrix"):
        assert probe in set(judged["probe"]), probe
    assert len(judged) >= 24 * steps
    found = disagreements(slopes)
    known = KNOWN_DEVIATIONS[(kind, "gdn-mup", optimizer)]
    unexpected = {p: s - known.get(p, set()) for p, s in found.items() if s - known.get(p, set())}
    assert not unexpected, f"slopes off the theory: {unexpected}\n{slopes.filter(~pl.col('ok'))}"
    exact = judged.filter(pl.col("probe").str.contains(r"^update\.(hidden|gate_matrix)$|^embed$")
                          | (pl.col("probe").str.contains(r"\.(q|k)$") & (pl.col("step") == 0)))
    assert len(exact) and exact["ok"].all()  # the sizes fixed by construction agree everywhere


def test_sp_blows_up_with_width():
    slopes = measure("gdn", "sp", "adamw", steps=3)
    trained = slopes.filter(pl.col("step") >= 1)
    for probe in ("logits", "block0.mixer_out", "block1.mlp_out"):
        assert (trained.filter(pl.col("probe") == probe)["slope"] > 0.1).all(), probe
    assert not disagreements(slopes)


def test_naive_mup_readout_shrinks_where_gdn_mup_holds_it():
    naive = measure("gdn", "mup", "adamw", steps=3)
    gdn = measure("gdn", "gdn-mup", "adamw", steps=3)
    for step in (2, 3):
        def slope(frame, probe, step=step):
            return frame.filter((pl.col("probe") == probe) & (pl.col("step") == step))["slope"][0]

        for block in ("block0", "block1"):
            assert slope(naive, f"{block}.readout") < -0.45       # Θ(d^-1/2): the defect the √d fixes
            assert slope(gdn, f"{block}.readout") - slope(naive, f"{block}.readout") > 0.3
        assert slope(naive, "block0.beta_pre") > 0.5               # gate matrices at a width-independent LR
        assert abs(slope(gdn, "block0.beta_pre")) < 0.2
