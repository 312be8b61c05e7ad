"""benchmarks/kernels.py's table: GPU-time ratios, the correctness verdict and crash texts, from a child's result."""
from benchmarks.kernels import SHAPES, label, row

TIMES = {"gpu fwd": 0.2, "gpu fwd+bwd": 0.9, "gpu fwd alone": 0.15, "wall fwd": 0.5, "wall fwd+bwd": 1.5}
GOOD = {n: 3e-3 for n in ("o", "dq", "dk", "dv", "dg", "dbeta")}
GOOD32 = {n: 5e-7 for n in GOOD}


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_row_gives_gpu_time_ratios_and_errors():
    res = {"errors": {"ours bf16": GOOD, "ours fp32": GOOD32, "fla bf16": {**GOOD, "dg": 0.9}},
           "ours": TIMES, "fla": {**TIMES, "gpu fwd": 0.1, "gpu fwd+bwd": 1.8, "gpu fwd alone": 0.3}}
    c = cells(row(SHAPES[1], res))
    assert c[0] == "8, 2048, 6, 64, 128 (width 512)"
    assert c[1:7] == ["0.200 / 0.100", "2.00", "0.900 / 1.800", "0.50", "0.150 / 0.300", "0.50"]
    assert c[7:10] == ["3.0e-03", "5.0e-07", "9.0e-01"]  # fla's wrong gradient shows, ours passes
    assert c[10:] == ["0.500 / 0.500", "1.500 / 1.500"]
    old = {k: v for k, v in TIMES.items() if k != "gpu fwd alone"}  # a result from before that column
    assert cells(row(SHAPES[1], {**res, "ours": old}))[5:7] == ["– / 0.300", "–"]


def test_row_flags_a_failure_and_keeps_a_crash_text():
    res = {"errors": {"ours bf16": {**GOOD, "dk": 0.24}, "ours fp32": GOOD32},
           "ours": TIMES, "fla": "crash: process died (exit 1)"}
    c = cells(row(SHAPES[0], res))
    assert c[1:7] == ["0.200 / crash: process died (exit 1)", "–", "0.900 / –", "–", "0.150 / –", "–"]
    assert c[7] == "2.4e-01 **FAIL**" and c[9] == "–"


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


def test_details_name_the_configs_a_run_took():
    from benchmarks.kernels import details

    took = "chunk_state_fwd_kernel BV=64,warps=4,stages=3,FUSE_O=True"
    res = {"errors": {"ours bf16": GOOD}, "ours configs": took,
           "ours": {"kernels fwd": [("chunk_o_fwd_kernel", 0.03)], "kernels fwd+bwd": []}}
    lines = details(SHAPES[1], res)
    assert lines[-1] == f"  - ours: the configs its launches took: {took}"
    assert not any("configs" in line for line in details(SHAPES[1], {**res, "ours configs": ""}))


def test_throughput_share_is_of_the_higher_peak_and_kernels_fall_in_their_category():
    """benchmarks/model_throughput.py: a GPU that clocks down during a variant is not credited for it (the share is
    of the higher of the peaks measured before the run and after the variant); the Triton short convolution and the
    fused loss are counted as such, not as "other"."""
    from benchmarks.model_throughput import category, table

    r = {"variant": "v", "params": 1e8, "ms_per_step": 40.0, "ms_per_step_synced": 41.0, "tokens_per_s": 3e5,
         "tflops": 360.0, "peak_gb": 13.0, "first_step_s": 3.0, "loss_first": 1.0, "loss_last": 0.9}
    assert cells(table([{**r, "matmul_peak_after": 700.0}], 800.0).splitlines()[2])[6:8] == ["45% of 800", "700"]
    assert cells(table([{**r, "matmul_peak_after": 900.0}], 800.0).splitlines()[2])[6:8] == ["40% of 900", "900"]
    assert category("short_conv_bwd_kernel") == "short convolution (Triton)"
    assert category("linear_ce_fwd_kernel") == "loss"
