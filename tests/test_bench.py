"""benchmarks/kernels.py's table: GPU-time ratios, the correctness verdict and crash texts, from a child's result."""
from benchmarks.kernels import SHAPES, label, row

TIMES = {"gpu fwd": 0.2, "gpu fwd+bwd": 0.9, "wall fwd": 0.5, "wall fwd+bwd": 1.5}
GOOD = {n: 3e-3 for n in ("o", "dq", "dk", "dv", "dg", "dbeta")}
GOOD32 = {n: 5e-7 for n in GOOD}


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_row_gives_gpu_time_ratios_and_errors():
    res = {"errors": {"ours bf16": GOOD, "ours fp32": GOOD32, "fla bf16": {**GOOD, "dg": 0.9}},
           "ours": TIMES, "fla": {**TIMES, "gpu fwd": 0.1, "gpu fwd+bwd": 1.8}}
    c = cells(row(SHAPES[1], res))
    assert c[0] == "8, 2048, 6, 64, 128 (width 512)"
    assert c[1:5] == ["0.200 / 0.100", "2.00", "0.900 / 1.800", "0.50"]
    assert c[5:8] == ["3.0e-03", "5.0e-07", "9.0e-01"]  # fla's wrong gradient shows, ours passes
    assert c[8:] == ["0.500 / 0.500", "1.500 / 1.500"]


def test_row_flags_a_failure_and_keeps_a_crash_text():
    res = {"errors": {"ours bf16": {**GOOD, "dk": 0.24}, "ours fp32": GOOD32},
           "ours": TIMES, "fla": "crash: process died (exit 1)"}
    c = cells(row(SHAPES[0], res))
    assert c[1:5] == ["0.200 / crash: process died (exit 1)", "–", "0.900 / –", "–"]
    assert c[5] == "2.4e-01 **FAIL**" and c[7] == "–"


def test_labels_name_what_a_shape_stands_for():
    assert [label(s) for s in SHAPES[4:7]] == ["8, 2048, 6, 192, 384 (width 1536)", "4, 4096, 16, 128, 128 (fla's "
                                              "standard)", "8, 2048, 6, 128, 256, n_h = 2"]


def test_ab_table_gives_each_forms_gpu_time_the_ratio_and_errors(capsys):
    """The A/B benchmarks' table (benchmarks/short_conv.py, linear_cross_entropy.py): GPU ms of both forms, the ratio
    triton / compiled, wall time beside, each form's errors; keep_row prints each row's line as it comes."""
    from benchmarks.kernels import ab_table, keep_row

    form = {"gpu fwd": 0.4, "gpu fwd+bwd": 1.6, "wall fwd+bwd": 2.0, "errors": {"loss": 1e-3, "dx": 2e-3}}
    rows: list[dict] = []
    keep_row(rows, {"N": 8, "compiled": form, "triton": {**form, "gpu fwd": 0.1, "gpu fwd+bwd": 1.2}}, None)
    assert '"N": 8' in capsys.readouterr().out and len(rows) == 1
    c = cells(ab_table(rows, "N", lambda r: str(r["N"]), "loss, dx").splitlines()[2])
    assert c == ["8", "0.400 / 0.100", "0.25", "1.600 / 1.200", "0.75", "2.000 / 2.000",
                 "1.0e-03, 2.0e-03; 1.0e-03, 2.0e-03"]
